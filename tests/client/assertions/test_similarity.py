"""Embedding similarity with the deterministic embedder and the OpenAI-compatible client."""

from __future__ import annotations

import json

import httpx
import pytest
from evalport.client.assertions import (
    EmbedderError,
    EmbeddingSimilarity,
    HashingEmbedder,
    OpenAIEmbedder,
)
from evalport.client.assertions._similarity import cosine


async def test_hashing_embedder_is_deterministic_and_meaningful_for_overlap() -> None:
    embedder = HashingEmbedder()
    a, b, c = await embedder.embed(
        ["Your refund is on its way", "your refund is on the way", "The weather is sunny"]
    )
    assert a == (await embedder.embed(["Your refund is on its way"]))[0]
    assert cosine(a, b) > 0.7 > cosine(a, c)


async def test_similarity_passes_and_fails_by_threshold() -> None:
    check = EmbeddingSimilarity("your refund is on the way", HashingEmbedder(), threshold=0.7)
    assert (await check.aevaluate("Your refund is on its way")).passed
    result = await check.aevaluate("The weather is sunny today")
    assert not result.passed and result.evaluated and "similarity" in result.message


def test_sync_evaluate_outside_a_loop() -> None:
    check = EmbeddingSimilarity("hello world", HashingEmbedder(), threshold=0.9)
    assert check.evaluate("hello world").score == pytest.approx(1.0)


async def test_sync_evaluate_inside_a_loop_explains_itself() -> None:
    with pytest.raises(RuntimeError, match="aevaluate"):
        EmbeddingSimilarity("x", HashingEmbedder()).evaluate("x")


def test_embedder_must_be_an_embedder() -> None:
    with pytest.raises(TypeError, match="async embed"):
        EmbeddingSimilarity("x", object())  # type: ignore[arg-type]


def _embeddings_server(seen: list[dict]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append({"url": str(request.url), "auth": request.headers.get("authorization"), **body})
        vectors = {"same": [1.0, 0.0], "close": [0.9, 0.1], "far": [0.0, 1.0]}
        data = [{"index": i, "embedding": vectors[text]} for i, text in enumerate(body["input"])]
        return httpx.Response(200, json={"data": list(reversed(data))})

    return httpx.MockTransport(handler)


async def test_openai_embedder_posts_to_embeddings_and_orders_by_index() -> None:
    seen: list[dict] = []
    async with OpenAIEmbedder(
        "text-embedding-3-small",
        base_url="http://llm.test/v1/",
        api_key="k",
        transport=_embeddings_server(seen),
    ) as embedder:
        vectors = await embedder.embed(["same", "far"])
        check = EmbeddingSimilarity("same", embedder, threshold=0.9)
        assert (await check.aevaluate("close")).passed
        assert not (await check.aevaluate("far")).passed
    assert vectors == [[1.0, 0.0], [0.0, 1.0]]
    assert seen[0] == {
        "url": "http://llm.test/v1/embeddings",
        "auth": "Bearer k",
        "model": "text-embedding-3-small",
        "input": ["same", "far"],
    }


async def test_embedder_failures_make_the_assertion_not_evaluable() -> None:
    broken = httpx.MockTransport(lambda request: httpx.Response(500, text="overloaded"))
    async with OpenAIEmbedder("m", base_url="http://llm.test", transport=broken) as embedder:
        with pytest.raises(EmbedderError, match="answered 500: overloaded"):
            await embedder.embed(["x"])
        result = await EmbeddingSimilarity("x", embedder, threshold=0.0).aevaluate("x")
    assert not result.evaluated and not result.passed
    assert "embedding failed" in result.message


async def test_malformed_embeddings_body_is_an_embedder_error() -> None:
    odd = httpx.MockTransport(lambda request: httpx.Response(200, json={"vectors": []}))
    async with OpenAIEmbedder("m", base_url="http://llm.test", transport=odd) as embedder:
        with pytest.raises(EmbedderError, match="unexpected embeddings body"):
            await embedder.embed(["x"])


async def test_a_shared_client_is_left_open() -> None:
    seen: list[dict] = []
    async with httpx.AsyncClient(transport=_embeddings_server(seen)) as client:
        embedder = OpenAIEmbedder("m", base_url="http://llm.test", client=client)
        await embedder.embed(["same"])
        await embedder.aclose()
        assert not client.is_closed
