"""evalport.server: expose an in-process agent over the eval protocol (Starlette).

Install with ``pip install 'evalport[server]'``. Mount :meth:`EvalAdapter.routes` in a
Starlette or FastAPI app, or serve :meth:`EvalAdapter.app` (``evalport serve``).
"""

from evalport.protocol import require as _require

_require("starlette", "server", "evalport.server")

from .app import EvalAdapter  # noqa: E402
from .limits import Limits  # noqa: E402
from .problems import HTTPProblem  # noqa: E402
from .sessions import RunPolicy, SessionManager  # noqa: E402
from .stores import Lease, MemoryStore, SessionStore, StoredSession  # noqa: E402

__all__ = [
    "EvalAdapter",
    "HTTPProblem",
    "Lease",
    "Limits",
    "MemoryStore",
    "RunPolicy",
    "SessionManager",
    "SessionStore",
    "StoredSession",
]
