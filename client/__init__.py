"""evalport.client: drive agents locally or over HTTP, assert on their runs, judge them.

Install with ``pip install 'evalport[client]'``.
"""

from evalport.protocol import require as _require

_require("httpx", "client", "evalport.client")

__all__: list[str] = []
