"""The documentation's `adapters` section and the three examples in examples/frameworks, run.

Each mount block of the README is executed with the example's agent built on its
framework's offline double; the README's evaluation case then runs over HTTP against the
app the block made. The pydantic-ai example is also served by real uvicorn on pydantic-ai's
``TestModel``.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("agents")
pytest.importorskip("langgraph")

from adapterfakes import chat_model, function_model, scripted_model
from adapterkit import TOKEN, Call, passed, trial
from evalport.client import EvalContext, HttpTarget, approve_all
from evalport.protocol import MissingExtraError
from support.docs import docs_text
from support.servers import running_server

ROOT = Path(__file__).parents[3]
_ORDER = re.compile(r"\b(A\d{4})\b")
_AMOUNT = re.compile(r"refund (\d+(?:\.\d+)?)", re.IGNORECASE)


def section_blocks(name: str) -> list[str]:
    text = docs_text()
    start = text.index(f"<!-- section:{name} -->")
    end = text.index(f"<!-- /section:{name} -->")
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.DOTALL)


def shop_plan(users: Sequence[str], results: Sequence[tuple[str, str]]) -> list[Call] | str:
    """The model behind the README's case: look the order up, refund what is asked."""
    orders = [order for text in users for order in _ORDER.findall(text)]
    order = orders[-1] if orders else "?"
    if results:
        return "; ".join(text for _, text in results)
    last = users[-1] if users else ""
    amount = _AMOUNT.search(last)
    if amount is not None:
        return [Call("refund_order", {"order_id": order, "amount": float(amount.group(1))})]
    if "where" in last.lower():
        return [Call("order_status", {"order_id": order})]
    return "How can I help?"


@pytest.fixture
def examples(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    monkeypatch.setenv("EVALPORT_TOKEN", TOKEN)
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "frameworks"))
    names = ("pydantic_ai_agent", "openai_agents_agent", "langgraph_agent")
    return {name: importlib.import_module(name) for name in names}


def built(framework: str, examples: dict[str, ModuleType]) -> dict[str, Any]:
    """The names a README mount block expects: ``agent`` (or ``graph``), and ``os``."""
    if framework == "pydantic-ai":
        return {"agent": examples["pydantic_ai_agent"].build_agent(function_model(shop_plan))}
    if framework == "openai-agents":
        return {"agent": examples["openai_agents_agent"].build_agent(scripted_model(shop_plan))}
    return {"graph": examples["langgraph_agent"].build_graph(chat_model(shop_plan))}


@pytest.mark.parametrize(
    ("index", "framework"), list(enumerate(["pydantic-ai", "openai-agents", "langgraph"]))
)
async def test_readme_mount_block_and_case_over_http(
    index: int, framework: str, examples: dict[str, ModuleType]
) -> None:
    blocks = section_blocks("adapters")
    assert len(blocks) == 7
    namespace: dict[str, Any] = {"os": os, **built(framework, examples)}
    exec(compile(blocks[index], "README.md", "exec"), namespace)
    case_namespace: dict[str, Any] = {"EvalContext": EvalContext}
    exec(compile(blocks[3], "README.md", "exec"), case_namespace)
    async with HttpTarget(
        "http://shop.test",
        token=TOKEN,
        transport=httpx.ASGITransport(app=namespace["app"]),
    ) as target:
        result = await trial(target, case_namespace["refund"], approval_policy=approve_all())
    passed(result)
    assert result.run["reply"] == "refunded 20.00 for order A1049"
    assert [tool["tool_call"]["name"] for tool in result.run["tools"]] == [
        "order_status",
        "refund_order",
    ]


@pytest.mark.e2e
async def test_pydantic_ai_example_on_test_model_served_by_uvicorn(
    examples: dict[str, ModuleType],
) -> None:
    from pydantic_ai import models

    allowed, models.ALLOW_MODEL_REQUESTS = models.ALLOW_MODEL_REQUESTS, False
    try:
        app = examples["pydantic_ai_agent"].create_app("test")  # pydantic-ai's TestModel

        async def every_tool(ctx: EvalContext) -> None:
            # TestModel calls every tool once with made-up arguments ("a", 0.0)
            await ctx.send("Where is order A1049?")
            ctx.called_tool("order_status", {"order_id": "a"}, is_error=True)
            ctx.tool_was_approved("refund_order", {"order_id": "a", "amount": 0.0})
            ctx.called_tool("refund_order", is_error=True)
            ctx.event_seen("approval.decided")
            ctx.succeeded()

        with running_server(app) as url:
            async with HttpTarget(url, token=TOKEN) as target:
                health = await target.check()
                assert health.agent.name == "shop-support"
                result = await trial(target, every_tool, approval_policy=approve_all())
        passed(result)
        assert result.run["usage"]["input"] > 0 and result.run["usage"]["output"] > 0
    finally:
        models.ALLOW_MODEL_REQUESTS = allowed


def test_the_package_imports_no_framework_until_a_name_is_used() -> None:
    code = (
        "import sys, evalport.server.adapters as a\n"
        "assert not {'pydantic_ai', 'agents', 'langgraph'} & set(sys.modules), sys.modules\n"
        "assert 'PydanticAIAgent' in dir(a)\n"
        "a.PydanticAIAgent\n"
        "assert 'pydantic_ai' in sys.modules and 'agents' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    import evalport.server.adapters as adapters

    assert adapters.__all__ == ["LangGraphAgent", "OpenAIAgentsAgent", "PydanticAIAgent"]
    with pytest.raises(AttributeError, match="no attribute 'CrewAIAgent'"):
        adapters.CrewAIAgent  # noqa: B018


@pytest.mark.parametrize(
    ("name", "framework", "extra"),
    [
        ("PydanticAIAgent", "pydantic_ai", "pydantic-ai"),
        ("OpenAIAgentsAgent", "agents", "openai-agents"),
        ("LangGraphAgent", "langgraph", "langgraph"),
    ],
)
def test_a_missing_framework_names_the_extra_to_install(
    name: str, framework: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalport.server.adapters as adapters

    module = adapters._MODULES[name]
    monkeypatch.setitem(sys.modules, framework, None)  # makes its import fail
    monkeypatch.delitem(sys.modules, f"evalport.server.adapters{module}", raising=False)
    with pytest.raises(MissingExtraError, match=re.escape(f"pip install 'evalport[{extra}]'")):
        getattr(adapters, name)


@pytest.mark.parametrize("module", ["pydantic_ai_agent", "openai_agents_agent", "langgraph_agent"])
async def test_every_example_app_serves_its_agent(
    module: str, examples: dict[str, ModuleType]
) -> None:
    models = {
        "pydantic_ai_agent": lambda: function_model(shop_plan),
        "openai_agents_agent": lambda: scripted_model(shop_plan),
        "langgraph_agent": lambda: chat_model(shop_plan),
    }
    app = examples[module].create_app(models[module]())
    async with HttpTarget(
        "http://shop.test", token=TOKEN, transport=httpx.ASGITransport(app=app)
    ) as target:
        health = await target.check()
        assert health.agent.name == "shop-support" and "approvals" in health.capabilities
        session = await target.open()
        turn = await session.send("Where is order A1049?")
        await session.close()
    assert "shipped" in turn.run.reply and "DHL" in turn.run.reply
    assert [tool.tool_call.name for tool in turn.run.tools] == ["order_status"]


@pytest.mark.parametrize(
    ("index", "framework"), list(enumerate(["pydantic-ai", "openai-agents", "langgraph"], 4))
)
def test_readme_examples_on_fake_models_run_as_scripts(
    index: int, framework: str, tmp_path: Path
) -> None:
    script = tmp_path / "example.py"
    script.write_text(section_blocks("adapters")[index])
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "examples" / "frameworks"),
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Order A1 is shipped. [('order_status', 'shipped')]"
