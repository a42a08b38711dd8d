"""evalport.server: expose an in-process agent over the eval protocol (Starlette).

Install with ``pip install 'evalport[server]'``. Mount :meth:`EvalAdapter.routes` in a
Starlette or FastAPI app, or serve :meth:`EvalAdapter.app` (a :class:`ProtocolApp`;
``evalport serve`` runs one), tuned by :class:`Limits`.

Rules:

- This module is the package's public face; its implementation modules are private
  (``_name.py``) and export nothing of their own.
- Two public subpackages have faces of their own: :mod:`evalport.server.stores` (the
  session store interface, the memory store, ``RedisStore`` and ``open_store``) and
  :mod:`evalport.server.adapters` (framework adapters, each loaded when first used,
  since each needs its framework's extra).
- The agent interface (:class:`TurnContext`, :func:`tool`, :class:`ApprovalRejected`,
  :class:`SessionInfo`) is re-exported from :mod:`evalport.protocol.runtime`, where it
  lives so that the client's LocalTarget drives the same interface without the server.
- Layers: the server builds on :mod:`evalport.protocol` and its runtime, never on the
  client; no import cycles among its modules.
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
