"""Traces in a real Arize Phoenix: ``evalport run --otlp`` against ``evalport serve --otlp``.

One Phoenix per test session (:mod:`support.phoenix`; it takes seconds to start). The
agent looks a secret up with one tool and passes it to two others; the reply never
holds it. Under the safe policy no span may carry it, on either side of the wire.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.phoenix import Phoenix, listening_addresses, running_phoenix, spans
from support.servers import free_port, running_process

pytestmark = pytest.mark.e2e

SECRET = "planted-secret-7f3a9c51"

AGENT = f'''
from evalport.protocol import ToolCall, Usage
from evalport.protocol.runtime import TurnContext, tool

SECRET = "{SECRET}"


@tool
def vault(name: str) -> dict:
    return {{"api_key": SECRET}}


@tool
def charge(api_key: str, amount: float) -> dict:
    return {{"receipt": "R-1", "key": api_key}}


@tool
def audit(api_key: str) -> None:
    raise PermissionError(f"audit refused {{api_key}}")


async def agent(message: str, history: list, ctx: TurnContext) -> str:
    ctx.llm_profile(driver="fake", model="fake-model-1")
    ctx.model_step(
        tool_calls=[ToolCall(id="call_vault", name="vault", arguments={{"name": "stripe"}})],
        usage=Usage(input=11, output=3),
    )
    key = vault("stripe")["api_key"]
    ctx.model_step(
        tool_calls=[
            ToolCall(id="call_charge", name="charge", arguments={{"api_key": key, "amount": 5}}),
            ToolCall(id="call_audit", name="audit", arguments={{"api_key": key}}),
        ],
        usage=Usage(input=13, output=5),
    )
    charge(key, 5)
    try:
        audit(key)
    except PermissionError:
        pass
    ctx.model_step(content="charged", finish_reason="stop", usage=Usage(input=17, output=2))
    return "charged"
'''

EVALS = """
from evalport.client import eval_case


@eval_case()
async def charges_twice(ctx):
    await ctx.send("charge my card")
    await ctx.send("once more")
    ctx.called_tool("charge", count=2)
    ctx.contains("charged")
"""


@pytest.fixture(scope="session")
def phoenix() -> Iterator[Phoenix]:
    with running_phoenix() as server:
        print(f"Phoenix answered after {server.startup:.1f} s")
        yield server


def _by_name(found: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [span for span in found if span["name"].startswith(prefix)]


def test_phoenix_listens_on_loopback_only(phoenix: Phoenix) -> None:
    listening = listening_addresses(phoenix.pid)
    loopback = ipaddress.ip_address("127.0.0.1")
    assert (loopback, int(phoenix.url.rsplit(":", 1)[1])) in listening, listening
    assert (loopback, phoenix.grpc_port) in listening, listening
    outside = {(address, port) for address, port in listening if not address.is_loopback}
    assert not outside, f"Phoenix listens beyond loopback: {outside}"


def test_one_trace_per_trial_across_the_wire(phoenix: Phoenix, tmp_path: Path) -> None:
    url = phoenix.url

    project = f"evalport-{uuid.uuid4().hex[:8]}"
    (tmp_path / "secret_agent.py").write_text(AGENT)
    evals = tmp_path / "evals"
    evals.mkdir()
    (evals / "charge_eval.py").write_text(EVALS)
    env = {
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "EVALPORT_TOKEN": "t0ken-for-tracing",
    }
    agent_port = free_port()
    base = f"http://127.0.0.1:{agent_port}"
    serve = [sys.executable, "-m", "evalport.protocol._cli", "serve", "secret_agent:agent"]
    serve += ["--port", str(agent_port), "--otlp", url, "--log-level", "warning"]
    with running_process(serve, health_url=f"{base}/health", env=env, cwd=str(tmp_path)):
        command = [sys.executable, "-m", "evalport.protocol._cli", "run", "evals"]
        command += ["--target", base, "--repeat", "2", "--otlp", url, "--out", "out", "-q"]
        run = subprocess.run(
            command,
            cwd=tmp_path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stdout + run.stderr
    # the server exported its spans when it stopped; the runner before it exited
    found = spans(url, project, expected=2 * (1 + 2 * (1 + 3 + 3) * 2))

    trials = _by_name(found, "evalport.trial ")
    assert len(trials) == 2
    traces = {span["context"]["trace_id"] for span in trials}
    assert len(traces) == 2, "one trace per trial"
    assert {span["context"]["trace_id"] for span in found} == traces
    assert sorted(span["attributes"]["evalport.trial.index"] for span in trials) == [0, 1]
    for trial in trials:
        assert trial["parent_id"] is None
        assert trial["attributes"]["evalport.case.id"] == "charge_eval::charges_twice"
        assert trial["attributes"]["evalport.verdict"] == "passed"
        events = [event for event in trial["events"] if event["name"] == "evalport.assertion"]
        assert [event["attributes"]["evalport.assertion.score"] for event in events] == [1.0, 1.0]

    turns = _by_name(found, "invoke_agent ")
    served = [span for span in turns if "http.route" in span["attributes"]]
    ran = [span for span in turns if "http.route" not in span["attributes"]]
    assert len(served) == len(ran) == 4  # two turns in each of two trials, on each side
    trial_of = {span["context"]["trace_id"]: span["context"]["span_id"] for span in trials}
    for span in served + ran:  # the server's turn continues the runner's trial span
        assert span["parent_id"] == trial_of[span["context"]["trace_id"]]
    assert sorted(span["attributes"]["evalport.turn"] for span in served) == [1, 1, 2, 2]

    server_ids = {span["context"]["span_id"] for span in served}
    tools = _by_name(found, "execute_tool ")
    chats = _by_name(found, "chat ")
    assert len(tools) == len(chats) == 2 * 3 * 4  # the runner's and the server's copies
    assert sum(span["parent_id"] in server_ids for span in tools) == 12
    audit = [span for span in tools if span["attributes"]["gen_ai.tool.name"] == "audit"]
    assert {span["attributes"]["error.type"] for span in audit} == {"tool_error"}
    failed_steps = [span for span in chats if "error.type" in span["attributes"]]
    assert {span["attributes"]["error.type"] for span in failed_steps} == {"PermissionError"}
    assert len(failed_steps) == 8  # the step that ran audit, in each turn, on each side
    assert {span["attributes"]["gen_ai.tool.call.id"] for span in audit} == {"call_audit"}
    assert {span["attributes"]["gen_ai.usage.input_tokens"] for span in chats} == {11, 13, 17}
    assert {span["attributes"]["gen_ai.request.model"] for span in chats} == {"fake-model-1"}

    charges = [span for span in tools if span["attributes"]["gen_ai.tool.name"] == "charge"]
    for span in charges:  # digests, not values: keys in clear, each value a digest
        arguments = json.loads(span["attributes"]["gen_ai.tool.call.arguments"])
        assert arguments["api_key"]["hash"].startswith("sha256:")
        assert json.loads(span["attributes"]["gen_ai.tool.call.result"])["hash"].startswith(
            "sha256:"
        )
    assert SECRET not in json.dumps(found), "a planted secret reached the collector"
