"""Embedding similarity, the ``Embedder`` protocol, and two embedders (OpenAI-compatible,
offline hashing). An embedder that fails makes the assertion not evaluable, never passed.
See ARCHITECTURE.md, "The assertion families".
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import httpx

from .._core import AssertionResult
from ._base import Assertion, text_of


class EmbedderError(RuntimeError):
    """An embedder could not produce vectors."""


@runtime_checkable
class Embedder(Protocol):
    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def cosine(left: Sequence[float], right: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is all zeros."""
    if len(left) != len(right):
        raise EmbedderError(f"vectors differ in length: {len(left)} and {len(right)}")
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    norm = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
    return dot / norm if norm else 0.0


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """A deterministic offline embedder: hashed word and trigram counts, for tests, not meaning."""

    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.dimensions

    def vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.casefold()):
            vector[self._bucket("w:" + word)] += 1.0
            padded = f" {word} "
            for i in range(len(padded) - 2):
                vector[self._bucket("c:" + padded[i : i + 3])] += 0.5
        return vector

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(text) for text in texts]


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint.

    Pass ``client`` to share an ``httpx.AsyncClient`` (you close it); otherwise the
    embedder opens one and ``aclose()`` closes it. ``transport`` is the test seam.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.model = model
        self.url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own = client is None
        self._client = client or httpx.AsyncClient(transport=transport, timeout=timeout)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        body = {"model": self.model, "input": list(texts)}
        try:
            response = await self._client.post(self.url, json=body, headers=self._headers)
        except httpx.HTTPError as error:
            raise EmbedderError(f"embeddings request to {self.url} failed: {error}") from error
        if response.status_code != 200:
            raise EmbedderError(
                f"embeddings endpoint {self.url} answered {response.status_code}: "
                f"{response.text[:300]}"
            )
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: item.get("index", 0))
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise EmbedderError(f"unexpected embeddings body from {self.url}: {error}") from error
        if len(vectors) != len(texts):
            raise EmbedderError(f"asked for {len(texts)} embeddings, got {len(vectors)}")
        return vectors

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class EmbeddingSimilarity(Assertion):
    """Semantically close to ``reference`` (Neuron's ``StringSimilarity``)."""

    kind = "similar_to"

    def __init__(self, reference: str, embedder: Embedder, *, threshold: float = 0.8) -> None:
        if not isinstance(embedder, Embedder):
            raise TypeError(f"embedder must have async embed(texts), got {type(embedder).__name__}")
        self.reference = reference
        self.embedder = embedder
        self.threshold = threshold

    def describe(self) -> str:
        shown = self.reference if len(self.reference) <= 40 else self.reference[:37] + "..."
        return repr(shown)

    async def aevaluate(self, subject: Any) -> AssertionResult:
        text = text_of(subject, self.kind)
        try:
            left, right = await self.embedder.embed([text, self.reference])
            similarity = cosine(left, right)
        except (EmbedderError, ValueError) as error:
            return self.not_evaluable(f"embedding failed: {error}")
        message = f"similarity {similarity:.3f}"
        return self.result(max(similarity, 0.0), message, similarity=similarity)

    def evaluate(self, subject: Any) -> AssertionResult:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.aevaluate(subject))
        raise RuntimeError(
            "EmbeddingSimilarity needs I/O: inside async code use `await "
            "assertion.aevaluate(subject)` (the eval context does this for you)"
        )
