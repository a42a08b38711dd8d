"""A target named by a URL whose scheme says the protocol (``agui+https://...``); an
unknown prefix is a :class:`ValueError` listing the known ones. Rules: see
ARCHITECTURE.md, "The HTTP target".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import httpx
from evalport.protocol import TracePolicy

from ._a2a import A2ATarget
from ._agui import AgUiTarget
from ._http import HttpTarget

SCHEMES: Final[Mapping[str, type[Any]]] = {
    "http": HttpTarget,
    "agui": AgUiTarget,
    "a2a": A2ATarget,
}
"""The target kind of each URL prefix (``http`` also stands for ``https``)."""


def target_for(
    url: str,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float | httpx.Timeout | None = None,
    policy: TracePolicy | None = None,
    limits: httpx.Limits | None = None,
) -> HttpTarget | AgUiTarget | A2ATarget:
    """The target that ``url`` names (see ARCHITECTURE.md, "The HTTP target")."""
    scheme, sep, rest = url.partition("://")
    prefix, plus, inner = scheme.lower().partition("+")
    if not sep or not plus:
        return HttpTarget(
            url, token=token, headers=headers, timeout=timeout, policy=policy, limits=limits
        )
    kind = SCHEMES.get(prefix)
    if kind is None or kind is HttpTarget or inner not in ("http", "https"):
        known = ", ".join(f"{name}+https://" for name in SCHEMES if name != "http")
        raise ValueError(
            f"unknown target scheme {scheme + '://'!r}: use http(s):// for the evalport "
            f"protocol, or one of {known} (http or https after the +)"
        )
    return kind(  # type: ignore[no-any-return]
        f"{inner}://{rest}",
        token=token,
        headers=headers,
        timeout=timeout,
        policy=policy,
        limits=limits,
    )
