"""The agent ``benchmarks/streaming.py`` serves: its first chunk is the monotonic clock's
reading when it was yielded; the message says how many seconds the rest takes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any


async def agent(message: str, history: list[Any], ctx: Any) -> AsyncIterator[str]:
    yield f"{time.perf_counter_ns()} "
    await asyncio.sleep(float(message))
    yield "done"
