"""The client's core, and its face for the rest of the client.

The client is two layers and parts. The core is this package: targets (``_target``:
``Target``, ``Session``, ``Turn``; the kinds in its room ``targets/``: HTTP, in-process,
AG-UI, A2A), cases (``_cases``, ``_datasets``, ``_conversation``, logged conversations
``_logged``), the runner's pieces (``_pacing``, the cache ``_cache``, ``_caching``,
``_cache_stores``, ``_selection``, ``_config``) and results (``_results``, which decides
every verdict, ``_stats``). Over it, the modules of ``client/`` itself: the context
(``_context``, its assertion methods ``_methods``), discovery and evaluator classes, the
trial and the runner (``_trial``, ``_runner``), tracing. The parts are the client's other
subpackages: assertions, judges (with the simulated users), reports (with ``merge`` and
the run browser) and cli (with the conformance check and the pytest plugin).

Rules:

- **The core imports nothing of the client outside itself**: no part, no context, no
  runner, no public face; so no import cycle runs through it, not even under
  ``TYPE_CHECKING``.
- **The rest of the client enters the core through this module**, never one of its
  modules or rooms: the upper layer and the public faces for what they are built on, the
  parts for what the record of a run is made of (or the public :mod:`evalport.client`
  for the rest). Assertions and judges only ever import this module: the context stands
  on them, so the public face (which imports them) would be a cycle.
- **Parts do not import each other's private modules**; they use each other's faces.
- A private import across packages that is none of these is listed in ARCHITECTURE.md
  or absent; ``tests/test_layering.py`` checks all of these rules.
"""

from ._agent_errors import describe_error as describe_error
from ._agent_errors import error_message as error_message
from ._agent_errors import error_title as error_title
from ._agent_errors import run_errors as run_errors
from ._cache import RunCache as RunCache
from ._cache_stores import CacheStore as CacheStore
from ._cache_stores import FolderCacheStore as FolderCacheStore
from ._cache_stores import RedisCacheStore as RedisCacheStore
from ._cache_stores import open_cache_store as open_cache_store
from ._caching import CachingTarget as CachingTarget
from ._cases import Case as Case
from ._cases import CaseSpec as CaseSpec
from ._cases import ConcurrencyLimit as ConcurrencyLimit
from ._cases import cases_from as cases_from
from ._cases import dataset_of as dataset_of
from ._cases import describe_row as describe_row
from ._cases import eval_case as eval_case
from ._cases import source_of as source_of
from ._cases import spec_of as spec_of
from ._chat_history import ChatHistoryError as ChatHistoryError
from ._chat_history import run_from_chat as run_from_chat
from ._clients import PER_CLIENT as PER_CLIENT
from ._clients import ClientSet as ClientSet
from ._clients import pool_limits as pool_limits
from ._clients import tls_context as tls_context
from ._closing import asserted_nothing as asserted_nothing
from ._closing import failed_turns as failed_turns
from ._closing import left_pending as left_pending
from ._closing import uses_names as uses_names
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
from ._conversation import ApprovalError as ApprovalError
from ._conversation import ApprovalPolicy as ApprovalPolicy
from ._conversation import ApprovalRequest as ApprovalRequest
from ._conversation import InterruptPolicy as InterruptPolicy
from ._conversation import UserSimulator as UserSimulator
from ._conversation import answer_by_kind as answer_by_kind
from ._conversation import approve_all as approve_all
from ._conversation import decide_by_tool as decide_by_tool
from ._conversation import reject_all as reject_all
from ._conversation import resume_with as resume_with
from ._conversation import settle_approvals as settle_approvals
from ._datasets import Dataset as Dataset
from ._datasets import DatasetError as DatasetError
from ._datasets import DatasetRow as DatasetRow
from ._errors import NOT_HERE as NOT_HERE
from ._errors import Secrets as Secrets
from ._handles import AssertionHandle as AssertionHandle
from ._handles import DeferredHandle as DeferredHandle
from ._handles import Expectation as Expectation
from ._logged import LoggedConversationError as LoggedConversationError
from ._logged import LoggedConversations as LoggedConversations
from ._logged import LoggedSession as LoggedSession
from ._logged import read_conversation as read_conversation
from ._pacing import AttachedTarget as AttachedTarget
from ._pacing import RateLimitedTarget as RateLimitedTarget
from ._pacing import TrackingTarget as TrackingTarget
from ._parts import turn_parts as turn_parts
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
from ._results import lower_bound_miss as lower_bound_miss
from ._results import required_passes as required_passes
from ._results import trial_verdict as trial_verdict
from ._retry import RetryPolicy as RetryPolicy
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
from ._sync import SyncSession as SyncSession
from ._sync import SyncTarget as SyncTarget
from ._sync import connect as connect
from ._target import Session as Session
from ._target import Target as Target
from ._target import TargetIdentity as TargetIdentity
from ._target import Turn as Turn
from ._target import faults_option as faults_option
from ._target import moment_of as moment_of
from ._target import turn_at as turn_at
from ._trace_context import TRIAL as TRIAL
from ._trace_context import TrialTrace as TrialTrace
from ._trace_context import judge_span as judge_span
from ._trajectory import Trajectory as Trajectory
from ._trajectory import TrajectoryToolCall as TrajectoryToolCall
from ._turns import DecisionLike as DecisionLike
from ._turns import moment as moment
from .targets import SCHEMES as SCHEMES
from .targets import A2ATarget as A2ATarget
from .targets import AgUiSession as AgUiSession
from .targets import AgUiTarget as AgUiTarget
from .targets import HttpSession as HttpSession
from .targets import HttpTarget as HttpTarget
from .targets import LocalSession as LocalSession
from .targets import LocalTarget as LocalTarget
from .targets import target_for as target_for
