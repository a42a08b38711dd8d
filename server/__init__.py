"""evalport.server: expose an in-process agent over the eval protocol (Starlette).

Install with ``pip install 'evalport[server]'``. Mount :meth:`EvalAdapter.routes` in a
Starlette or FastAPI app, or serve :meth:`EvalAdapter.app` (a :class:`ProtocolApp`;
``evalport serve`` runs one), tuned by :class:`Limits`. Session stores are in
:mod:`evalport.server.stores`, framework adapters in :mod:`evalport.server.adapters`. The
agent interface (:class:`TurnContext`, :func:`tool`, :class:`ApprovalRejected`,
:class:`SessionInfo`) lives in :mod:`evalport.protocol.runtime`, so that the client's
LocalTarget drives it without the server; it is re-exported here.
"""

from evalport.protocol import require as _require

_require("starlette", "server", "evalport.server")

from evalport.protocol.runtime import ApprovalRejected, SessionInfo, TurnContext, tool  # noqa: E402

from ._app import EvalAdapter  # noqa: E402
from ._limits import Limits  # noqa: E402
from ._standalone import ProtocolApp  # noqa: E402

__all__ = [
    "ApprovalRejected",
    "EvalAdapter",
    "Limits",
    "ProtocolApp",
    "SessionInfo",
    "TurnContext",
    "tool",
]
