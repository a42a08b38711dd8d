"""The ``pytest11`` entry point of the distribution.

pytest loads every installed plugin at start-up, so this module must import in every
install. It names the plugins registered under the ``evalport.pytest`` entry point group
(the client's) whose extra is installed, for pytest to load; in a service that installed
only ``evalport[server]`` pytest runs as if evalport were absent.
"""

from __future__ import annotations

from ._extras import extra_installed, extra_of, plugins

pytest_plugins = [
    point.module
    for point in plugins("evalport.pytest").values()
    if extra_installed(extra_of(point))
]
