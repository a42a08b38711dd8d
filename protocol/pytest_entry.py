"""The ``pytest11`` entry point of the distribution.

pytest loads every installed plugin at start-up, so this module must import in every
install: with the ``client`` extra it loads :mod:`evalport.client.pytest_plugin`; in a
service that installed only ``evalport[server]`` it registers nothing and pytest runs as
if evalport were absent.
"""

from __future__ import annotations

import importlib.util

pytest_plugins = (
    ["evalport.client.pytest_plugin"] if importlib.util.find_spec("httpx") is not None else []
)
