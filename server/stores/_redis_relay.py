"""The approvals relay of the Redis store (pub/sub on ``relay:{id}``, sharded in a cluster);
a publish nobody receives means the holder is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

logger = logging.getLogger("evalport.server")

Handler = Callable[[bytes], Awaitable[bytes]]

_RELAY_GRACE: Final = 3.0


class _Forwarded(msgspec.Struct, array_like=True, frozen=True, gc=False):
    reply: str
    body: bytes


_encode_forwarded = msgspec.msgpack.Encoder()
_decode_forwarded = msgspec.msgpack.Decoder(_Forwarded)


class RedisRelay:
    """The relay over ``redis`` (``call``: the store's wrapper of each Redis call;
    ``unavailable``: the exceptions of an unreachable Redis)."""

    def __init__(
        self,
        redis: Any,
        prefix: str,
        *,
        sharded: bool,
        call: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
        unavailable: tuple[type[BaseException], ...],
    ) -> None:
        self._redis = redis
        self.prefix = prefix
        self._sharded = sharded
        self._call = call
        self._unavailable = unavailable
        self._handlers: dict[str, Handler] = {}
        self._pubsub: Any = None
        self._pump: asyncio.Task[None] | None = None
        self._answers: set[asyncio.Task[None]] = set()

    def _channel(self, session_id: str) -> str:
        return f"{self.prefix}relay:{{{session_id}}}"

    async def _subscribe(self, pubsub: Any, channel: str) -> None:
        await self._call(
            lambda: pubsub.ssubscribe(channel) if self._sharded else pubsub.subscribe(channel)
        )

    async def _publish(self, channel: str, message: bytes) -> int:
        if self._sharded:
            return int(await self._call(lambda: self._redis.spublish(channel, message)))
        return int(await self._call(lambda: self._redis.publish(channel, message)))

    async def _next(self, pubsub: Any, timeout: float) -> Any:
        """The next message of ``pubsub`` (``None`` if none came within ``timeout``)."""
        if self._sharded:
            message = await pubsub.get_sharded_message(timeout=timeout)
            return message if message is not None and message["type"] == "smessage" else None
        message = await pubsub.get_message(timeout=timeout)
        return message if message is not None and message["type"] == "message" else None

    async def listen(self, session_id: str, handler: Handler) -> None:
        """Answer requests :meth:`forward`-ed to ``session_id`` with ``handler``."""
        self._handlers[session_id] = handler
        if self._pubsub is None:
            self._pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        await self._subscribe(self._pubsub, self._channel(session_id))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.get_running_loop().create_task(self._receive())

    async def unlisten(self, session_id: str) -> None:
        """Stop answering for ``session_id`` (nothing happens if this store did not)."""
        if self._handlers.pop(session_id, None) is None or self._pubsub is None:
            return
        channel = self._channel(session_id)
        pubsub = self._pubsub
        await self._call(
            lambda: pubsub.sunsubscribe(channel) if self._sharded else pubsub.unsubscribe(channel)
        )

    async def forward(self, session_id: str, request: bytes, *, timeout: float) -> bytes | None:
        """Send ``request`` to the replica listening for ``session_id``; its answer.

        ``None`` when no replica listens (for ``_RELAY_GRACE`` seconds: a holder may be
        reconnecting); :class:`TimeoutError` after ``timeout`` seconds.
        """
        reply = f"{self.prefix}reply:{{{uuid.uuid4().hex}}}"
        message = _encode_forwarded.encode(_Forwarded(reply=reply, body=request))
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await self._subscribe(pubsub, reply)
            channel = self._channel(session_id)
            loop = asyncio.get_running_loop()
            # Nobody listening may be a holder that is reconnecting (Redis restarted):
            # give it a moment before calling it gone.
            settle = loop.time() + _RELAY_GRACE
            while not await self._publish(channel, message):
                if loop.time() >= settle:
                    return None
                await asyncio.sleep(0.2)
            deadline = loop.time() + timeout
            while (left := deadline - loop.time()) > 0:
                answer = await self._call(lambda: self._next(pubsub, min(left, 1.0)))
                if answer is not None:
                    return bytes(answer["data"])
            raise TimeoutError(f"no answer for session {session_id} within {timeout:g} s")
        finally:
            await pubsub.aclose()

    async def _receive(self) -> None:
        while self._handlers:
            try:
                message = await self._next(self._pubsub, 1.0)
            except self._unavailable:
                await asyncio.sleep(0.5)  # the pub/sub connection re-subscribes when back
                continue
            except Exception:
                logger.exception("approvals relay: reading Redis pub/sub failed")
                await asyncio.sleep(0.5)
                continue
            if message is None:
                continue
            channel = message["channel"].decode()
            session_id = channel.removeprefix(f"{self.prefix}relay:{{").removesuffix("}")
            handler = self._handlers.get(session_id)
            if handler is not None:
                task = asyncio.get_running_loop().create_task(
                    self._answer(handler, _decode_forwarded.decode(message["data"]))
                )
                self._answers.add(task)
                task.add_done_callback(self._answers.discard)

    async def _answer(self, handler: Handler, forwarded: _Forwarded) -> None:
        try:
            answer = await handler(forwarded.body)
            await self._publish(forwarded.reply, answer)
        except Exception:
            logger.exception("could not answer a forwarded approvals request")

    async def aclose(self) -> None:
        self._handlers.clear()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, *self._unavailable):
                await self._pump
        if self._answers:
            await asyncio.wait(self._answers, timeout=1.0)
        if self._pubsub is not None:
            with contextlib.suppress(*self._unavailable):
                await self._pubsub.aclose()
