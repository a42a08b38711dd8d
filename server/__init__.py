"""evalport.server: expose an in-process agent over the eval protocol (Starlette).

Install with ``pip install 'evalport[server]'``.
"""

from evalport.protocol import require as _require

_require("starlette", "server", "evalport.server")

__all__: list[str] = []
