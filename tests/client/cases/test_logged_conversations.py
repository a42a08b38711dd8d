"""``evalport run`` over a folder of logged conversations (issue 19, item 4).

Each conversation file is a case of its own whose run is the logged conversation: every
assertion reads it, ``ctx.send`` is refused, a malformed file is that file's error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalport.client import cases_from, eval_case
from evalport.protocol._cli import main

CHAT = [
    {"role": "user", "content": "Refund A1050."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "refund_order", "arguments": '{"order_id": "A1050"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "refunded"},
    {"role": "assistant", "content": "Done: A1050 is refunded."},
]
RESPONSES = {
    "format": "openai-responses",
    "items": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Refund"}]},
        {"type": "function_call", "call_id": "fc", "name": "refund_order", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "fc", "output": "failed", "is_error": True},
        {"type": "message", "role": "assistant", "content": "I could not refund it."},
    ],
}
ANTHROPIC = [
    {"role": "user", "content": "Refund A1050."},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "refund_order", "input": {"order_id": "A1050"}}
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Refunded."}]},
]
MALFORMED = [CHAT[0], CHAT[1], {"role": "tool", "tool_call_id": "call_9", "content": "x"}]

SUITE = """\
from evalport.client import eval_case


@eval_case("refund conversation {file}", conversations="logs/**/*.json*")
async def refunds(ctx):
    ctx.called_tool("refund_order", {"order_id": "A1050"})
    ctx.no_failed_actions()
    ctx.tool_order(["refund_order"])
"""

SENDS = """\
from evalport.client import eval_case


@eval_case(conversations="../logs/chat.json")
async def talks(ctx):
    await ctx.send("are you there?")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    logs = tmp_path / "logs"
    (logs / "older").mkdir(parents=True)
    (logs / "chat.json").write_text(json.dumps(CHAT))
    (logs / "responses.json").write_text(json.dumps(RESPONSES))
    (logs / "older" / "anthropic.jsonl").write_text("\n".join(map(json.dumps, ANTHROPIC)))
    (logs / "malformed.json").write_text(json.dumps(MALFORMED))
    (logs / "truncated.json").write_text('[{"role": "user", "content": "hi"')
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "logs_eval.py").write_text(SUITE.replace("logs/", "../logs/"))
    (tmp_path / "logs_eval.py").write_text(SUITE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> tuple[int, dict[str, dict]]:
    code = main(["run", *args, "--json", "out.json", "--out", "run-folder"])
    summary = json.loads(Path("out.json").read_text())
    return code, {case["case_id"]: case for case in summary["cases"]}


def test_each_file_is_a_case_and_a_bad_file_is_its_own_error(project, capsys) -> None:
    code, cases = run("logs_eval.py", "--trace-policy", "verbatim")
    out = capsys.readouterr().out
    assert code == 1  # failures and errors, but the run went through every file
    verdicts = {
        case_id.partition("[")[2].rstrip("]"): case["verdict"] for case_id, case in cases.items()
    }
    assert verdicts == {
        "chat.json": "passed",
        "older/anthropic.jsonl": "passed",
        "responses.json": "failed",  # the logged refund failed: no_failed_actions says so
        "malformed.json": "error",
        "truncated.json": "error",
    }
    assert "against conversation files (logged runs)" in out
    assert "refund conversation malformed.json" in json.dumps(cases)  # the description names it
    malformed = cases["logs_eval::refunds[malformed.json]"]
    assert malformed["error"].startswith(
        "could not open the logged conversation: logs/malformed.json: message 2: "
        "tool result for call id 'call_9' matches no earlier call"
    )
    truncated = cases["logs_eval::refunds[truncated.json]"]["error"]
    assert "logs/truncated.json: not JSON" in truncated


def test_the_safe_policy_applies_and_assertions_still_read_arguments(project) -> None:
    code, cases = run("logs_eval.py", "-k", "chat")
    assert code == 0 and list(cases) == ["logs_eval::refunds[chat.json]"]


def test_ctx_send_is_refused_naming_the_file(project) -> None:
    (project / "evals" / "logs_eval.py").write_text(SENDS)
    code, cases = run("evals")
    assert code == 1
    text = json.dumps(cases["logs_eval::talks[chat.json]"])
    assert "LoggedConversationError" in text
    assert "ctx.send('are you there?')" in text and "chat.json" in text
    assert "no agent answers a logged conversation" in text


def test_other_cases_still_need_a_target(project, capsys) -> None:
    (project / "evals" / "live_eval.py").write_text(
        "from evalport.client import eval_case\n\n\n@eval_case\nasync def live(ctx):\n"
        "    await ctx.send('hi')\n"
    )
    assert main(["run", "evals"]) == 2
    assert "give --target URL or --local" in capsys.readouterr().err
    # selecting only the logged cases needs none
    assert main(["run", "evals", "-k", "refunds", "--out", "rf", "-q"]) == 1


LIVE = """\
from evalport.client import eval_case


@eval_case("says hello")
async def hello(ctx):
    await ctx.send("hello")
"""


def test_the_run_cache_leaves_logged_conversations_out(project, capsys) -> None:
    agent = Path(__file__).resolve().parents[3] / "examples" / "support_agent.py"
    cache = ["--cache", "--cache-dir", "cache", "-v", "--out", "rf"]
    assert main(["run", "logs_eval.py", *cache]) == 1
    out = capsys.readouterr().out
    assert "run cache: no trial; 5 read logged conversation files, which are never cached" in out
    (project / "evals" / "live_eval.py").write_text(LIVE)
    live = ["run", "evals", "--local", f"{agent}:agent", *cache]
    for replayed in (0, 1):
        assert main(live) == 1
        out = capsys.readouterr().out
        assert (
            f"run cache: {replayed} of 1 trials replayed; 5 read logged conversation files, "
            "which are never cached"
        ) in out
    assert "not replayed" not in out


def test_declaration_rules(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="drop messages=, user= and dataset="):
        eval_case(conversations="*.json", messages=["hi"])(lambda ctx: None)

    @eval_case(conversations=str(tmp_path / "none" / "*.json"))
    def nothing(ctx):
        pass

    with pytest.raises(ValueError, match=r"matches no file"):
        cases_from(nothing)
    (tmp_path / "a.json").write_text(json.dumps(CHAT))

    @eval_case("log", conversations=str(tmp_path / "*.json"))
    def one(ctx):
        pass

    [case] = cases_from(one)
    assert case.id == "one[a.json]" and case.description == "log: a.json"
    assert case.conversation == tmp_path / "a.json"


def test_the_example_folder_runs(tmp_path, monkeypatch, capsys) -> None:
    root = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(root)
    code = main(["run", "examples/logged", "--out", str(tmp_path / "run"), "-q"])
    assert code == 0, capsys.readouterr()
    page = (root / "docs" / "write-evals.md").read_text()
    example = (root / "examples" / "logged" / "support_logs_eval.py").read_text()
    start = page.index('from evalport.client import eval_case\n\n\n@eval_case("logged')
    assert page[start : page.index("```", start)] in example  # the page shows the example


async def test_judges_read_the_logged_conversation(tmp_path: Path) -> None:
    from evalport.client import Runner, RunOptions
    from evalport.client._core._logged import LoggedConversations
    from evalport.client.judges import FakeJudge

    (tmp_path / "chat.json").write_text(json.dumps(CHAT))
    seen = []

    def grade(request):
        seen.append(request)
        return 0.9

    @eval_case(conversations=str(tmp_path / "*.json"))
    async def judged(ctx):
        ctx.judge().task_completion("get order A1050 refunded").gate()

    judge = FakeJudge([grade])
    report = await Runner(LoggedConversations(), RunOptions(), judge=judge).run(cases_from(judged))
    assert [case.verdict for case in report.summary.cases] == ["passed"]
    assert judge.calls == 1 and "refund_order" in str(seen[0])
