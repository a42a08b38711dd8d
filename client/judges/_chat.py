"""The client of OpenAI-compatible chat completions (judges and simulated users).

Rule: its retries are its :class:`RetryPolicy`'s; the API key is read at call time and
scrubbed from every error. See ARCHITECTURE.md, "The chat client".
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx
import msgspec

from .._core import PER_CLIENT, ClientSet, RetryPolicy, Secrets, pool_limits, tls_context
from ._base import JudgeError, JudgeUsage, MalformedAnswer

BREAKER_FAILURES: Final = 3


class ChatCompletion(msgspec.Struct, kw_only=True):
    """The parts of a completion evalport reads."""

    content: str
    usage: JudgeUsage
    model: str | None = None
    top_logprobs: list[tuple[str, float]] | None = None


class ChatClient:
    """Calls ``/chat/completions`` with retries, timeouts and feature fallback."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        temperature: float = 0.0,
        params: Mapping[str, str] | None = None,
        auth_header: str = "Authorization",
        concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not model:
            raise ValueError("a chat model name is required (model=...)")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry = RetryPolicy(
            attempts=max_retries + 1,
            backoff=backoff,
            max_backoff=max_backoff,
            statuses=frozenset({429, 500, 502, 503, 504}),
        )
        self.temperature = temperature
        self.auth_header = auth_header
        self.structured_output = True
        self.logprobs = True
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._failures_in_a_row = 0  # transport errors since the last answer
        query = dict(params or {})

        def make() -> httpx.AsyncClient:
            return httpx.AsyncClient(
                timeout=timeout,
                transport=transport,
                params=query,
                limits=pool_limits(),
                verify=tls_context(),
            )

        self._clients = ClientSet(make, per_client=None if transport is not None else PER_CLIENT)

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _headers(self) -> dict[str, str]:
        if self.api_key_env is None:
            return {}
        key = os.environ.get(self.api_key_env)
        if not key:
            raise JudgeError(
                f"environment variable {self.api_key_env} is not set: export the API key "
                "there, or name another variable with api-key-env under "
                '[tool.evalport.judge] (EVALPORT_JUDGE_API_KEY_ENV); set it to "" for a '
                "server that needs no key"
            )
        if self.auth_header.lower() == "authorization":
            return {"Authorization": f"Bearer {key}"}
        return {self.auth_header: key}

    def _body(
        self,
        messages: Sequence[Mapping[str, str]],
        schema: Mapping[str, Any] | None,
        max_tokens: int | None,
        top_logprobs: int,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": self.temperature,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if schema is not None and self.structured_output:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": dict(schema)},
            }
        if top_logprobs and self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = top_logprobs
        return body

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        top_logprobs: int = 0,
    ) -> ChatCompletion:
        """One completion; retries and fallbacks: ARCHITECTURE.md, "The chat client"."""
        headers = self._headers()
        async with self._slots:
            try:
                return await self._complete(messages, headers, schema, max_tokens, top_logprobs)
            except JudgeError as error:
                # A gateway may echo the credentials: they never reach errors or reports.
                keys = [value.removeprefix("Bearer ") for value in headers.values()]
                scrubbed = Secrets([*headers.values(), *keys]).scrub(str(error))
                if scrubbed == str(error):
                    raise
                raise type(error)(scrubbed) from None

    async def _complete(
        self,
        messages: Sequence[Mapping[str, str]],
        headers: Mapping[str, str],
        schema: Mapping[str, Any] | None,
        max_tokens: int | None,
        top_logprobs: int,
    ) -> ChatCompletion:
        attempts = 0  # requests that failed, the first included (a feature dropped is none)
        while True:
            self._check_breaker()
            body = self._body(messages, schema, max_tokens, top_logprobs)
            try:
                async with self._clients.holding() as client:
                    response = await client.post(
                        f"{self.base_url}/chat/completions", json=body, headers=headers
                    )
            except httpx.TransportError as error:
                self._failures_in_a_row += 1
                attempts += 1
                delay = self.retry.delay(attempts)
                failure = f"unreachable after {attempts} attempts: {type(error).__name__}: {error}"
            else:
                self._failures_in_a_row = 0
                status = response.status_code
                if status in (400, 422) and ("response_format" in body or "logprobs" in body):
                    self.structured_output &= "response_format" not in body
                    self.logprobs &= "logprobs" not in body
                    continue
                if status == 200:
                    return _completion(response.content)
                if status not in self.retry.statuses:
                    raise JudgeError(
                        f"chat server {self.base_url} answered {status}: {response.text[:300]}"
                    )
                attempts += 1
                delay = self.retry.after_answer(
                    attempts, status, response.headers.get("retry-after")
                )
                failure = f"answered {status} after {attempts} attempts: {response.text[:300]}"
            if delay is None:
                raise JudgeError(f"chat server {self.base_url} {failure}")
            self._check_breaker()
            await self.retry.sleep(delay)

    def _check_breaker(self) -> None:
        if self._failures_in_a_row >= BREAKER_FAILURES:
            raise JudgeError(
                f"chat server {self.base_url} is down ({self._failures_in_a_row} connection "
                "failures in a row in this run), so it is not asked again: start it, or "
                "point base-url under [tool.evalport.judge] (EVALPORT_JUDGE_BASE_URL) at "
                "one that answers"
            )


def _completion(raw: bytes) -> ChatCompletion:
    try:
        data = msgspec.json.decode(raw)
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (msgspec.DecodeError, KeyError, IndexError, TypeError) as error:
        raise MalformedAnswer(f"the server's answer is not a chat completion: {error!r}") from None
    if not isinstance(content, str):
        raise MalformedAnswer("the completion has no text content")
    usage = data.get("usage") or {}
    tokens = JudgeUsage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
    )
    top: list[tuple[str, float]] | None = None
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict) and logprobs.get("content"):
        first = logprobs["content"][0]
        entries = first.get("top_logprobs") or [first]
        top = [
            (str(entry.get("token", "")), float(entry.get("logprob", -math.inf)))
            for entry in entries
            if isinstance(entry, dict)
        ]
    return ChatCompletion(content=content, usage=tokens, model=data.get("model"), top_logprobs=top)
