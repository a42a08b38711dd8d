"""Content parts in logged conversations: the images, files and audio of a logged user
message are the run's ``userParts``, as a live turn sent with those parts records them,
in each of the three formats; the safe policy keeps their digests, and a malformed part
names the file and the message (a judge's view: tests/client/judges/test_judge_chat_history.py)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from evalport.client import ChatHistoryError, LocalTarget, TracePolicy, run_from_chat
from evalport.protocol import FilePart, ImagePart, UserPart
from evalport.protocol._cli import main
from evalport.protocol.runtime import TurnContext

PNG = b"\x89PNG\r\n\x1a\n receipt pixels"
PDF = b"%PDF-1.7 the invoice"
PNG64 = base64.b64encode(PNG).decode()
PDF64 = base64.b64encode(PDF).decode()
ASK = "What does this receipt say?"
REPLY = "It says 12 EUR."

OPENAI_CHAT: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": ASK},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
            {
                "type": "file",
                "file": {
                    "filename": "invoice.pdf",
                    "file_data": f"data:application/pdf;base64,{PDF64}",
                },
            },
        ],
    },
    {"role": "assistant", "content": REPLY},
]
OPENAI_RESPONSES: list[dict[str, Any]] = [
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": ASK},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG64}"},
            {
                "type": "input_file",
                "filename": "invoice.pdf",
                "file_data": f"data:application/pdf;base64,{PDF64}",
            },
        ],
    },
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": REPLY}]},
]
ANTHROPIC: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": ASK},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
            },
            {
                "type": "document",
                "title": "invoice.pdf",
                "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            },
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": REPLY}]},
]
LOGS = {"openai-chat": OPENAI_CHAT, "openai-responses": OPENAI_RESPONSES, "anthropic": ANTHROPIC}


async def live_parts(policy: TracePolicy) -> list[UserPart]:
    """What a live turn sent with the same parts records."""

    async def agent(message: str, history: list[Any], ctx: TurnContext) -> str:
        return REPLY

    async with LocalTarget(agent, policy=policy) as target:
        session = await target.open()
        turn = await session.send(
            ASK,
            parts=[
                ImagePart(data=PNG, media_type="image/png"),
                FilePart(data=PDF, media_type="application/pdf", name="invoice.pdf"),
            ],
        )
        parts = turn.run.user_parts
    assert isinstance(parts, list)
    return parts


@pytest.mark.parametrize("fmt", sorted(LOGS))
async def test_parts_are_recorded_as_a_live_turn_records_them(fmt: str) -> None:
    for policy in (TracePolicy.verbatim(), TracePolicy.safe()):
        expected = await live_parts(policy)
        for given in (fmt, "auto"):
            run = run_from_chat(LOGS[fmt], format=given, policy=policy)
            assert run.user_messages == [ASK]  # the text stays the message
            assert run.user_parts == expected, (fmt, given)
    safe = run_from_chat(LOGS[fmt])
    assert isinstance(safe.user_parts, list)
    image, document = safe.user_parts[1:]
    assert (image.type, image.media_type, image.data) == ("image", "image/png", None)
    assert (image.sha256, image.size) == (hashlib.sha256(PNG).hexdigest(), len(PNG))
    assert (document.type, document.name, document.data) == ("file", "invoice.pdf", None)
    assert document.sha256 == hashlib.sha256(PDF).hexdigest()
    verbatim = run_from_chat(LOGS[fmt], policy=TracePolicy.verbatim())
    assert isinstance(verbatim.user_parts, list) and verbatim.user_parts[1].data == PNG


def test_urls_ids_and_audio() -> None:
    wav = base64.b64encode(b"RIFF audio").decode()
    log = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "https://cdn.example/r.png?sig=SECRET"}},
                {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-abc", "filename": "a.pdf"}},
            ],
        }
    ]
    verbatim = run_from_chat(log, policy=TracePolicy.verbatim())
    assert verbatim.user_messages == [""]
    assert isinstance(verbatim.user_parts, list)
    url, audio, by_id = verbatim.user_parts
    assert (url.type, url.url) == ("image", "https://cdn.example/r.png?sig=SECRET")
    assert (audio.type, audio.media_type, audio.data) == ("file", "audio/wav", b"RIFF audio")
    assert (by_id.type, by_id.url, by_id.name) == ("file", "file-abc", "a.pdf")
    safe = run_from_chat(log)
    assert isinstance(safe.user_parts, list)
    assert "SECRET" not in (safe.user_parts[0].url or "")
    assert safe.user_parts[0].url.startswith("https://cdn.example/r.png?sha256=")  # type: ignore[union-attr]


def test_text_alone_records_no_parts() -> None:
    log = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]
    run = run_from_chat(log)
    assert run.user_messages == ["a\nb"] and not run.user_parts


def test_anthropic_blocks_without_a_reader_load_and_search_results_keep_their_text() -> None:
    """Logs the Messages API took load: a search result is text, other blocks are skipped;
    only a malformed media block or a block that is not an object is an error."""
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG64},
    }
    log = [
        {
            "role": "user",
            "content": [
                {
                    "type": "search_result",
                    "source": "https://kb.example/refunds",
                    "title": "Refunds",
                    "content": [{"type": "text", "text": "Refunds take 5 days."}],
                },
                {"type": "search_result", "source": "s", "title": "t", "content": []},
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "container_upload", "file_id": "file_011"},
                {"type": "text", "text": "How long?"},
                image,
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "5 days."}]},
    ]
    for fmt in ("anthropic", "auto"):  # a search result tells the format
        run = run_from_chat(log, format=fmt)
        assert run.user_messages == ["Refunds take 5 days.\nHow long?"]
        assert [part.type for part in run.user_parts or ()] == ["text", "text", "image"]
        assert run.reply == "5 days." and run.status == "completed"
    for bad, fault in (
        (["not a block"], "message 0: a content block is not an object"),
        ([{"type": "image", "source": {"type": "url"}}], "message 0: the image part: url must"),
    ):
        with pytest.raises(ChatHistoryError, match=fault):
            run_from_chat([{"role": "user", "content": bad}], format="anthropic")


@pytest.mark.parametrize(
    ("fmt", "part", "fault"),
    [
        ("openai-chat", {"type": "image_url", "image_url": {}}, "the image_url part: url must"),
        (
            "openai-chat",
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}},
            "the image_url part: its base64 data does not decode",
        ),
        ("openai-chat", {"type": "video", "url": "x"}, "a user content part of type 'video'"),
        ("openai-responses", {"type": "input_file"}, "the input_file part: it needs file_data"),
        (
            "anthropic",
            {"type": "image", "source": {"type": "base64", "data": PNG64}},
            "the image part: media_type must be a non-empty string",
        ),
        (
            "anthropic",
            {"type": "document", "source": {"type": "ftp"}},
            "the document part: source of type 'ftp'",
        ),
    ],
)
def test_a_malformed_part_names_the_message(fmt: str, part: Any, fault: str) -> None:
    log = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    log.append({"role": "user", "content": [part]})
    if fmt == "openai-responses":
        log[2]["type"] = "message"
    with pytest.raises(ChatHistoryError) as raised:
        run_from_chat(log, format=fmt)
    assert raised.value.index == 2
    assert str(raised.value).startswith(f"message 2: {fault}")


SUITE = """\
from evalport.client import eval_case


@eval_case(conversations="logs/*.json")
async def receipts(ctx):
    parts = ctx.run.user_parts
    assert [part.type for part in parts] == ["text", "image", "file"]
    assert parts[1].data is None and parts[1].sha256
"""


def test_a_folder_of_logs_reads_parts_and_a_bad_part_is_that_file_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "logs").mkdir()
    for fmt, log in LOGS.items():
        (tmp_path / "logs" / f"{fmt}.json").write_text(json.dumps(log))
    bad = json.loads(json.dumps(OPENAI_CHAT))
    bad[0]["content"][1]["image_url"] = {"url": "data:image/png;base64,not base64!"}
    (tmp_path / "logs" / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "receipts_eval.py").write_text(SUITE)
    monkeypatch.chdir(tmp_path)
    code = main(["run", "receipts_eval.py", "--json", "out.json", "--out", "run-folder"])
    cases = {case["case_id"]: case for case in json.loads(Path("out.json").read_text())["cases"]}
    assert code == 1
    verdicts = {
        case_id.partition("[")[2].rstrip("]"): case["verdict"] for case_id, case in cases.items()
    }
    assert verdicts == {
        "anthropic.json": "passed",
        "bad.json": "error",
        "openai-chat.json": "passed",
        "openai-responses.json": "passed",
    }
    error = cases["receipts_eval::receipts[bad.json]"]["error"]
    assert "logs/bad.json: message 0: the image_url part: its base64 data does not decode" in error
