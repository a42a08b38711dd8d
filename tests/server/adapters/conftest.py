"""Framework adapter tests: each framework's own offline test double, evaluated over HTTP.

This folder is on ``sys.path`` (pytest's prepend import mode), so the test modules share
the scenario in ``adapterkit`` and the doubles in ``adapterfakes``. The Agents SDK reads
``OPENAI_AGENTS_DISABLE_TRACING`` once: set here, no test ever tries to export traces.
"""

import os

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
