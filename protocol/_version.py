"""Versions: of the wire protocol, and of the evalport distribution."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import Final

PROTOCOL_VERSION: Final = "1"

try:
    __version__: str = _distribution_version("evalport")
except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    __version__ = "0.0.0"
