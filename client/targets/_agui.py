"""AgUiTarget: being written (issue 37)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from evalport.protocol import TracePolicy


class AgUiTarget:
    """Being written (issue 37)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None = None,
        policy: TracePolicy | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        self.url = url
        self.options: dict[str, Any] = {"token": token, "headers": headers, "timeout": timeout}
        self.policy = policy
        self.limits = limits
