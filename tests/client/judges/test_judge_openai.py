"""OpenAIJudge against a real (fake) OpenAI-compatible server on loopback, and respx."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
import respx
from evalport.client.judges import (
    JudgeCache,
    JudgeConfig,
    JudgeError,
    JudgeRequest,
    OpenAIJudge,
    criteria,
)
from judge_fake_server import FakeChatServer, completion, raw, status, verdict


def _judge(server: FakeChatServer, **options: object) -> OpenAIJudge:
    options.setdefault("api_key_env", None)
    return OpenAIJudge("judge-model", base_url=server.base_url, backoff=0.0, **options)  # type: ignore[arg-type]


def _request(output: str = "Paris is the capital of France.", sample: int = 0) -> JudgeRequest:
    return JudgeRequest(
        criterion=criteria.correctness("Paris"),
        output=output,
        input="What is the capital of France?",
        sample=sample,
    )


async def test_verdict_request_and_parsing(chat_server: FakeChatServer, monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-test")
    chat_server.reset(verdict(0.9, "matches", ["Paris"]))
    async with _judge(chat_server, api_key_env="JUDGE_KEY") as judge:
        result = await judge.judge(_request())
    assert (result.score, result.reason, result.evidence) == (0.9, "matches", ["Paris"])
    assert result.usage.input_tokens == 11 and result.usage.output_tokens == 7
    assert result.model == "fake-model" and not result.cached
    body = chat_server.requests[0]
    assert body["model"] == "judge-model"
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == [
        "reason",
        "evidence",
        "score",
    ]
    assert chat_server.headers[0]["authorization"] == "Bearer sk-test"


async def test_retries_429_and_5xx_then_succeeds(chat_server: FakeChatServer) -> None:
    chat_server.reset(
        status(429, "slow down", {"Retry-After": "0"}), status(503), verdict(1.0, "fine")
    )
    async with _judge(chat_server) as judge:
        result = await judge.judge(_request())
    assert result.score == 1.0
    assert len(chat_server.requests) == 3


async def test_gives_up_after_bounded_retries(chat_server: FakeChatServer) -> None:
    chat_server.reset(*[status(429, headers={"Retry-After": "0"})] * 3)
    async with _judge(chat_server, max_retries=2) as judge:
        with pytest.raises(JudgeError, match="429 after 3 attempts"):
            await judge.judge(_request())
    assert len(chat_server.requests) == 3


async def test_client_error_is_not_retried(chat_server: FakeChatServer) -> None:
    chat_server.reset(status(401, "bad key"))
    async with _judge(chat_server) as judge:
        with pytest.raises(JudgeError, match="answered 401"):
            await judge.judge(_request())
    assert len(chat_server.requests) == 1


@pytest.mark.parametrize(
    "bad",
    [
        completion("not json at all"),
        completion('{"score": 1.5, "reason": "x", "evidence": []}'),
        completion('{"reason": "no score", "evidence": []}'),
        completion('{"score": "1", "reason": "x", "evidence": []}'),
        completion('{"score": true, "reason": "x", "evidence": []}'),
        raw(b"<html>gateway</html>"),
        raw(b'{"choices": []}'),
    ],
)
async def test_malformed_answer_is_retried_then_error(chat_server: FakeChatServer, bad) -> None:
    chat_server.reset(bad, bad, bad)
    async with _judge(chat_server, malformed_retries=2) as judge:
        with pytest.raises(JudgeError, match="no valid verdict in 3 attempts"):
            await judge.judge(_request())
    assert len(chat_server.requests) == 3


async def test_malformed_then_valid_counts_all_tokens(chat_server: FakeChatServer) -> None:
    chat_server.reset(completion("Sure! The score is 1."), verdict(0.25, "partly"))
    async with _judge(chat_server) as judge:
        result = await judge.judge(_request())
    assert result.score == 0.25
    assert result.usage.input_tokens == 22 and result.usage.output_tokens == 14
    first, second = (body["messages"][1]["content"] for body in chat_server.requests)
    assert first != second  # a fresh nonce for the retry


async def test_falls_back_to_plain_json_when_structured_output_is_refused(
    chat_server: FakeChatServer,
) -> None:
    chat_server.reset(
        status(400, "response_format json_schema is not supported"),
        completion('```json\n{"score": 0.5, "reason": "half", "evidence": []}\n```'),
        verdict(0.75),
    )
    async with _judge(chat_server) as judge:
        assert (await judge.judge(_request())).score == 0.5
        assert (await judge.judge(_request("other"))).score == 0.75
    assert "response_format" in chat_server.requests[0]
    assert "response_format" not in chat_server.requests[1]
    assert "response_format" not in chat_server.requests[2]


async def test_missing_api_key_variable_is_a_clear_error(
    chat_server: FakeChatServer, monkeypatch
) -> None:
    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    async with _judge(chat_server, api_key_env="NO_SUCH_JUDGE_KEY") as judge:
        with pytest.raises(JudgeError, match="NO_SUCH_JUDGE_KEY is not set"):
            await judge.judge(_request())
    assert chat_server.requests == []


async def test_classifier_scores_the_answer_distribution(chat_server: FakeChatServer) -> None:
    levels = ["wrong", "partial", "right"]
    chat_server.reset(
        completion("2", top_logprobs=[("2", math.log(0.6)), ("1", math.log(0.3)), ("x", -1.0)]),
        completion("1"),
        completion("yes"),
        completion("yes"),
        completion("yes"),
    )
    request = JudgeRequest(criterion=criteria.classify("How correct?", levels), output="Paris")
    async with _judge(chat_server) as judge:
        graded = await judge.judge(request)
        chosen = await judge.judge(request)
        with pytest.raises(JudgeError):
            await judge.judge(request)
    # P(2)=0.6/0.9, P(1)=0.3/0.9 -> expected level (2*0.6+1*0.3)/0.9 = 1.667 -> /2
    assert graded.score == pytest.approx((2 * 0.6 + 0.3) / 0.9 / 2)
    assert graded.details["probabilities"] == pytest.approx([0.0, 1 / 3, 2 / 3])
    assert chosen.score == 0.5 and chosen.details["level"] == "partial"
    body = chat_server.requests[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 10
    assert "response_format" not in body


async def test_boolean_classifier(chat_server: FakeChatServer) -> None:
    chat_server.reset(completion("1", top_logprobs=[("1", math.log(0.8)), ("0", math.log(0.2))]))
    request = JudgeRequest(criterion=criteria.classify("Is it polite?"), output="Thanks!")
    async with _judge(chat_server) as judge:
        assert (await judge.judge(request)).score == pytest.approx(0.8)


async def test_cache_hit_costs_nothing(chat_server: FakeChatServer, tmp_path: Path) -> None:
    chat_server.reset(verdict(0.8, "good"), verdict(0.1, "other sample"))
    cache = JudgeCache(tmp_path / "judge-cache")
    async with _judge(chat_server, cache=cache) as judge:
        first = await judge.judge(_request())
        again = await judge.judge(_request())
        sampled = await judge.judge(_request(sample=1))
    assert (first.score, first.cached, first.usage.input_tokens) == (0.8, False, 11)
    assert (again.score, again.reason, again.cached) == (0.8, "good", True)
    assert again.usage.input_tokens == 0 and again.usage.output_tokens == 0
    assert sampled.score == 0.1  # another sample is another entry
    assert len(chat_server.requests) == 2
    # another model is another entry, even with the same prompt
    async with OpenAIJudge(
        "other-model", base_url=chat_server.base_url, api_key_env=None, cache=cache
    ) as other:
        chat_server.reset(verdict(0.3))
        assert (await other.judge(_request())).score == 0.3


async def test_cache_ignores_a_torn_entry(chat_server: FakeChatServer, tmp_path: Path) -> None:
    chat_server.reset(verdict(0.6), verdict(0.6))
    async with _judge(chat_server, cache=tmp_path) as judge:
        await judge.judge(_request())
        for entry in tmp_path.rglob("*.json"):
            entry.write_text("{torn")
        result = await judge.judge(_request())
    assert not result.cached and len(chat_server.requests) == 2


@respx.mock
async def test_timeouts_are_retried_then_reported() -> None:
    route = respx.post("http://judge.test/v1/chat/completions").mock(
        side_effect=httpx.ReadTimeout("timed out")
    )
    judge = OpenAIJudge(
        "m", base_url="http://judge.test/v1", api_key_env=None, backoff=0.0, max_retries=2
    )
    async with judge:
        with pytest.raises(JudgeError, match="unreachable after 3 attempts: ReadTimeout"):
            await judge.judge(_request())
    assert route.call_count == 3


@respx.mock
async def test_azure_style_key_header_and_query() -> None:
    route = respx.post("http://azure.test/openai/chat/completions").mock(
        return_value=httpx.Response(200, content=verdict(1.0)["body"])
    )
    judge = OpenAIJudge(
        "gpt",
        base_url="http://azure.test/openai",
        api_key_env="AZ_KEY",
        auth_header="api-key",
        params={"api-version": "2024-10-21"},
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AZ_KEY", "azure-secret")
        async with judge:
            await judge.judge(_request())
    sent = route.calls[0].request
    assert sent.headers["api-key"] == "azure-secret"
    assert sent.url.params["api-version"] == "2024-10-21"


def test_judge_config() -> None:
    assert JudgeConfig.from_env({}) is None
    config = JudgeConfig.from_env(
        {
            "EVALPORT_JUDGE_MODEL": "llama3",
            "EVALPORT_JUDGE_BASE_URL": "http://127.0.0.1:11434/v1",
            "EVALPORT_JUDGE_API_KEY_ENV": "",
        }
    )
    assert config is not None
    assert (config.model, config.base_url, config.api_key_env) == (
        "llama3",
        "http://127.0.0.1:11434/v1",
        None,
    )
    with pytest.raises(ValueError, match=r"judge: .*modle"):
        JudgeConfig.from_mapping({"model": "m", "modle": "typo"})


async def test_concurrency_is_bounded_per_client() -> None:
    import asyncio

    in_flight = peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return httpx.Response(200, content=verdict(0.5)["body"])

    judge = OpenAIJudge(
        "m",
        base_url="http://judge.test/v1",
        api_key_env=None,
        concurrency=2,
        transport=httpx.MockTransport(handler),
    )
    async with judge:
        results = await asyncio.gather(*(judge.judge(_request(sample=i)) for i in range(6)))
    assert [r.score for r in results] == [0.5] * 6
    assert peak == 2


@pytest.mark.parametrize("status", [401, 503])
async def test_the_api_key_never_reaches_an_error_text(
    status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalport.client.judges import JudgeError
    from evalport.client.judges._chat import ChatClient

    monkeypatch.setenv("LEAKY_GATEWAY_KEY", "sk-live-SECRET123456")

    def echo(request: httpx.Request) -> httpx.Response:  # a gateway that echoes the header
        return httpx.Response(status, json={"error": f"bad {request.headers['authorization']}"})

    client = ChatClient(
        "m", api_key_env="LEAKY_GATEWAY_KEY", max_retries=0, transport=httpx.MockTransport(echo)
    )
    try:
        with pytest.raises(JudgeError) as raised:
            await client.complete([{"role": "user", "content": "x"}])
    finally:
        await client.aclose()
    assert "SECRET123456" not in str(raised.value)
    assert str(status) in str(raised.value)
