"""Targets made inside ``evalport serve``'s event loop (served by test_serve_targets.py).

``$EFFECTS`` names a file each start-up and shutdown appends a line to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from evalport.protocol import Message
from evalport.protocol.runtime import TurnContext


def _effect(text: str) -> None:
    with open(os.environ["EFFECTS"], "a", encoding="utf-8") as file:
        file.write(text + "\n")


def _agent(resource: asyncio.Event) -> Any:
    loop = asyncio.get_running_loop()

    async def agent(message: str, history: list[Message], ctx: TurnContext) -> str:
        resource.set()  # a loop-bound resource, used from the loop that serves
        same = asyncio.get_running_loop() is loop
        return f"{message}: made in the serving loop={same}"

    return agent


async def make_agent() -> Any:
    return _agent(asyncio.Event())


@contextlib.asynccontextmanager
async def lifespan() -> AsyncIterator[Any]:
    _effect("started")
    try:
        yield _agent(asyncio.Event())
    finally:
        _effect("stopped")


async def generator() -> AsyncIterator[Any]:
    _effect("started")
    yield _agent(asyncio.Event())
    _effect("stopped")


async def broken() -> Any:
    raise ConnectionError("no database at db:5432")


class Huge:
    def __repr__(self) -> str:
        return "Huge(" + "x" * 5000 + ")"


huge = Huge()
