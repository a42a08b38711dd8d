"""evalport.server: expose an in-process agent over the eval protocol (Starlette).

Install with ``pip install 'evalport[server]'``. Mount :meth:`EvalAdapter.routes` in a
Starlette or FastAPI app, or serve :meth:`EvalAdapter.app` (``evalport serve``).
"""

from evalport.protocol import require as _require

_require("starlette", "server", "evalport.server")

# The agent interface, for agents written against the server: ``from evalport.server
# import TurnContext, tool``. It lives in evalport.protocol so that the client's
# LocalTarget drives the same interface without importing the server.
from evalport.protocol.runtime import ApprovalRejected, SessionInfo, TurnContext, tool  # noqa: E402

from .app import EvalAdapter  # noqa: E402
from .limits import Limits  # noqa: E402
from .problems import HTTPProblem  # noqa: E402
from .records import RunPolicy  # noqa: E402
from .sessions import SessionManager  # noqa: E402
from .standalone import ProtocolApp  # noqa: E402
from .stores import (  # noqa: E402
    ApprovalRelay,
    Lease,
    MemoryStore,
    SessionStore,
    StoredSession,
    StoreUnavailable,
    open_store,
)

__all__ = [
    "ApprovalRejected",
    "ApprovalRelay",
    "EvalAdapter",
    "HTTPProblem",
    "Lease",
    "Limits",
    "MemoryStore",
    "ProtocolApp",
    "RunPolicy",
    "SessionInfo",
    "SessionManager",
    "SessionStore",
    "StoreUnavailable",
    "StoredSession",
    "TurnContext",
    "open_store",
    "tool",
]
