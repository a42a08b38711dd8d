"""OpenAIJudge: a judge over any OpenAI-compatible chat-completions server; JudgeConfig.

Rule: a malformed answer is asked again a bounded number of times, then it is a
:class:`JudgeError`, never a score. See ARCHITECTURE.md, "The OpenAI-compatible judge".
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import httpx
import msgspec

from ._base import (
    JudgeError,
    JudgeRequest,
    JudgeUsage,
    JudgeVerdict,
    MalformedAnswer,
    level_verdict,
)
from ._cache import JudgeCache, cache_key
from ._chat import ChatClient, ChatCompletion
from ._prompts import (
    CACHE_NONCE,
    VERDICT_SCHEMA,
    classifier_messages,
    new_nonce,
    parse_verdict,
    verdict_messages,
)


class OpenAIJudge:
    """A hardened LLM judge over ``POST {base_url}/chat/completions``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 4,
        malformed_retries: int = 2,
        backoff: float = 0.5,
        temperature: float = 0.0,
        cache: JudgeCache | str | os.PathLike[str] | None = None,
        params: Mapping[str, str] | None = None,
        auth_header: str = "Authorization",
        concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._chat = ChatClient(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            temperature=temperature,
            params=params,
            auth_header=auth_header,
            concurrency=concurrency,
            transport=transport,
        )
        self.malformed_retries = malformed_retries
        self.cache = JudgeCache.of(cache)

    @property
    def model(self) -> str:
        return self._chat.model

    @property
    def base_url(self) -> str:
        return self._chat.base_url

    async def aclose(self) -> None:
        await self._chat.aclose()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _key(self, request: JudgeRequest) -> str:
        classifier = request.criterion.is_classifier
        render = classifier_messages if classifier else verdict_messages
        params = {
            "kind": "classify" if classifier else "verdict",
            "temperature": self._chat.temperature,
            "sample": request.sample,
        }
        return cache_key(self.model, render(request, CACHE_NONCE), params)

    async def judge(self, request: JudgeRequest) -> JudgeVerdict:
        if self.cache is None:
            return await self._ask(request)
        return await self.cache.verdict(self._key(request), lambda: self._ask(request))

    async def _ask(self, request: JudgeRequest) -> JudgeVerdict:
        spent = JudgeUsage()
        problem: JudgeError | None = None
        for _ in range(self.malformed_retries + 1):
            nonce = new_nonce()
            try:
                if request.criterion.is_classifier:
                    completion = await self._chat.complete(
                        classifier_messages(request, nonce), max_tokens=5, top_logprobs=10
                    )
                    spent = spent + completion.usage
                    verdict = _classified(request, completion)
                else:
                    completion = await self._chat.complete(
                        verdict_messages(request, nonce), schema=VERDICT_SCHEMA
                    )
                    spent = spent + completion.usage
                    score, reason, evidence = parse_verdict(completion.content)
                    verdict = JudgeVerdict(score=score, reason=reason, evidence=evidence)
            except MalformedAnswer as error:
                problem = error
                continue
            verdict.usage = spent
            verdict.model = completion.model or self.model
            return verdict
        raise JudgeError(
            f"judge {self.model} gave no valid verdict in {self.malformed_retries + 1} "
            f"attempts; last problem: {problem}"
        )


def _classified(request: JudgeRequest, completion: ChatCompletion) -> JudgeVerdict:
    levels = request.criterion.levels or ()
    top = len(levels) - 1
    answer = completion.content.strip()
    if len(answer) != 1 or not answer.isdigit() or int(answer) > top:
        raise MalformedAnswer(f"the classifier answer {answer[:40]!r} is not a digit 0..{top}")
    chosen = int(answer)
    mass = [0.0] * len(levels)
    for token, logprob in completion.top_logprobs or ():
        text = token.strip()
        if len(text) == 1 and text.isdigit() and int(text) <= top and math.isfinite(logprob):
            mass[int(text)] += math.exp(logprob)
    return level_verdict(levels, chosen, mass)


class JudgeConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A judge from configuration; the key itself is never part of it."""

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 4
    cache_dir: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeConfig | None:
        """From ``EVALPORT_JUDGE_MODEL`` (required), ``_BASE_URL``, ``_API_KEY_ENV``,
        ``_CACHE_DIR``; ``None`` when no model is set. ``_API_KEY_ENV=""`` means no key."""
        env = os.environ if environ is None else environ
        model = env.get("EVALPORT_JUDGE_MODEL")
        if not model:
            return None
        key_env = env.get("EVALPORT_JUDGE_API_KEY_ENV", "OPENAI_API_KEY")
        return cls(
            model=model,
            base_url=env.get("EVALPORT_JUDGE_BASE_URL", cls.base_url),
            api_key_env=key_env or None,
            cache_dir=env.get("EVALPORT_JUDGE_CACHE_DIR") or None,
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, where: str = "judge") -> JudgeConfig:
        """Validate a configuration mapping; errors name ``where`` and the field."""
        try:
            return msgspec.convert(dict(data), cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"{where}: {error}") from None

    def build(self, concurrency: int = 8) -> OpenAIJudge:
        """The judge, with at most ``concurrency`` calls in flight."""
        return OpenAIJudge(
            self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout=self.timeout,
            max_retries=self.max_retries,
            cache=self.cache_dir,
            concurrency=concurrency,
        )
