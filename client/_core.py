"""The core's face for the client's parts.

The client is a core and parts over it. The core is the modules of ``client/`` itself
and its room ``targets/``, in reading order: targets (``_target``: ``Target``,
``Session``, ``Turn``; the kinds in ``targets/``: HTTP, in-process, AG-UI, A2A), cases
(``_cases``, found by ``_discovery``), the context (``_context``, its assertion methods
``_methods``), the runner (``_trial``, ``_runner``; the cache ``_cache``, logged
conversations ``_logged``) and results (``_results``, ``_stats``). The parts are its
other subpackages: assertions, judges (with the simulated users), reports (with
``merge`` and the run browser) and cli (with the conformance check and the pytest plugin).

Rules:

- **A part imports the core through its faces, never a private module:** this module for
  what the record of a run is made of (the names below), and the public
  :mod:`evalport.client` for the rest (the runner, the targets, discovery). Assertions and
  judges only ever import this module: the context stands on them, so the public face
  (which imports them) would be a cycle.
- **Parts do not import each other's private modules**; they use each other's faces.
- This module imports no part and nothing that does (no context, no runner), so no import
  cycle runs through it, not even under ``TYPE_CHECKING``.
- A private import across packages that is none of these is listed in ARCHITECTURE.md
  or absent; ``tests/test_layering.py`` checks all three rules.
"""

from ._agent_errors import describe_error as describe_error
from ._agent_errors import error_message as error_message
from ._agent_errors import error_title as error_title
from ._agent_errors import run_errors as run_errors
from ._cache_stores import open_cache_store as open_cache_store
from ._clients import PER_CLIENT as PER_CLIENT
from ._clients import ClientSet as ClientSet
from ._clients import pool_limits as pool_limits
from ._clients import tls_context as tls_context
from ._closing import asserted_nothing as asserted_nothing
from ._closing import failed_turns as failed_turns
from ._closing import left_pending as left_pending
from ._commands import EXIT_FAILED as EXIT_FAILED
from ._commands import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from ._commands import EXIT_OK as EXIT_OK
from ._commands import EXIT_UNREACHABLE as EXIT_UNREACHABLE
from ._commands import EXIT_USAGE as EXIT_USAGE
from ._commands import fail as fail
from ._config import TRACE_POLICIES as TRACE_POLICIES
from ._config import ConfigError as ConfigError
from ._config import Settings as Settings
from ._config import find_pyproject as find_pyproject
from ._config import load_settings as load_settings
from ._errors import NOT_HERE as NOT_HERE
from ._errors import Secrets as Secrets
from ._handles import AssertionHandle as AssertionHandle
from ._handles import Expectation as Expectation
from ._logged import LoggedConversations as LoggedConversations
from ._printable import printable as printable
from ._results import AssertionResult as AssertionResult
from ._results import CaseResult as CaseResult
from ._results import JudgeRecord as JudgeRecord
from ._results import JudgeToolCall as JudgeToolCall
from ._results import RunData as RunData
from ._results import Severity as Severity
from ._results import TrialResult as TrialResult
from ._results import TurnTiming as TurnTiming
from ._results import Verdict as Verdict
from ._results import case_verdict as case_verdict
from ._results import enc_hook as enc_hook
from ._results import required_passes as required_passes
from ._selection import parse_shard as parse_shard
from ._selection import select as select
from ._stats import fisher_exact as fisher_exact
from ._stats import flaky as flaky
from ._stats import k_values as k_values
from ._stats import mcnemar_exact as mcnemar_exact
from ._stats import mean_std as mean_std
from ._stats import pass_at_k as pass_at_k
from ._stats import pass_hat_k as pass_hat_k
from ._stats import percentile as percentile
from ._stats import rank_sum_greater as rank_sum_greater
from ._stats import wilson as wilson
from ._target import Target as Target
from ._target import Turn as Turn
from ._trace_context import judge_span as judge_span
from ._trajectory import Trajectory as Trajectory
from ._trajectory import TrajectoryToolCall as TrajectoryToolCall
