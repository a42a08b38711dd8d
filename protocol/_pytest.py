"""The ``pytest11`` entry point: it must import in every install.

Rules: see ARCHITECTURE.md, "Shared below the server and the client".
"""

from __future__ import annotations

from ._extras import extra_installed, extra_of, plugins

pytest_plugins = [
    point.module
    for point in plugins("evalport.pytest").values()
    if extra_installed(extra_of(point))
]
