"""The site as built, and what its pages state, against the code.

- The site builds with ``mkdocs build --strict`` (once per module, into a temporary
  folder), and no internal link or anchor of the built pages is broken.
- Every CLI option, every extra and every public name exists on both sides: in the code
  and in the documentation (options and extras on the pages, public names in the built
  API reference), and nothing the pages name is missing from the code.
- The Troubleshooting page covers every problem type, every CLI configuration error and
  every exception of the public packages.
- The protocol reference renders every operation and schema of ``openapi.yaml``.
- The benchmarks table lists every benchmark script; the performance figures carry a
  date and a machine.
- The README stays short, and ``evalport[server]`` never pulls the documentation's
  dependencies.
"""

from __future__ import annotations

import ast
import html
import importlib
import os
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from packaging.requirements import Requirement
from support.docs import DOCS, ROOT, blocks
from support.surface import cli_options, extras, faces

sys.path.insert(0, str(ROOT))
from mkdocs_hooks import reexported, render_openapi

sys.path.remove(str(ROOT))

SPEC = yaml.safe_load((ROOT / "openapi.yaml").read_text(encoding="utf-8"))


def site_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def site_text() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in site_pages())


# -- the built site -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    # not --quiet: it drops the warnings before --strict counts them
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
    return out


class Links(HTMLParser):
    """The ids of a page and the links it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        for name in ("href", "src"):
            linked = (tag, name) in (
                ("a", "href"),
                ("img", "src"),
                ("link", "href"),
                ("script", "src"),
            )
            if linked and values.get(name):
                self.links.append(str(values[name]))


def parse(page: Path) -> Links:
    links = Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


def test_no_internal_link_or_anchor_is_broken(site: Path) -> None:
    parsed = {page: parse(page) for page in site.rglob("*.html")}
    broken = []
    for page, links in parsed.items():
        for link in links.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                assert parts.scheme in ("http", "https"), f"{page}: {link}"
                continue  # external: the site must not need it (checked below)
            if parts.path.startswith("/"):  # the 404 page links from the site's root
                target = (site / unquote(parts.path).lstrip("/")).resolve()
            else:
                target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert not broken, "\n".join(broken)


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    for page in site.rglob("*.html"):
        for link in parse(page).links:
            if link.startswith(("http://", "https://")):
                assert not re.search(r"\.(js|css|woff2?)(\?|$)", link), f"{page}: loads {link}"


def test_every_public_name_has_an_entry_in_the_api_reference(site: Path) -> None:
    ids = parse(site / "api.html").ids
    again = set(reexported())
    missing = [
        f"{face}.{name}"
        for face, names in faces().items()
        for name in names
        if not name.startswith("__")
        and f"{face}.{name}" not in ids
        # the client's exports of the protocol's names are documented under the protocol
        and not (face == "evalport.client" and name in again and f"evalport.protocol.{name}" in ids)
    ]
    assert not missing, f"public names the API reference does not show: {missing}"


def test_the_protocol_reference_shows_every_operation_and_schema(site: Path) -> None:
    page = (site / "protocol.html").read_text(encoding="utf-8")
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    for path, item in SPEC["paths"].items():
        for method in ("get", "post", "delete"):
            if method in item:
                assert f"{method.upper()} {path}" in text, f"{method} {path} is not rendered"
    for name in SPEC["components"]["schemas"]:
        assert f"Schema {name}" in text, f"schema {name} is not rendered"


def test_the_rendered_examples_are_json() -> None:
    rendered = render_openapi(SPEC)
    examples = [code for language, code in blocks(rendered) if language == "json"]
    assert len(examples) >= 5
    import json

    for example in examples:
        json.loads(example)


# -- code and docs name the same things ---------------------------------------------------------


def test_every_cli_option_is_documented_and_every_documented_option_exists() -> None:
    text = site_text()
    options = cli_options()
    for command, names in options.items():
        for option in names:
            assert re.search(rf"{re.escape(option)}(?![\w-])", text), (
                f"`{command} {option}` is in the code but on no page"
            )
    known = set().union(*options.values())
    mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]+)", text))
    benchmarks = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "benchmarks").glob("*.py"))
    known |= set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", benchmarks))
    unknown = mentioned - known
    assert not unknown, f"options the pages name that no command has: {sorted(unknown)}"


def test_every_extra_is_documented_and_every_documented_extra_exists() -> None:
    text = site_text() + (ROOT / "README.md").read_text(encoding="utf-8")
    mentioned = {
        extra for group in re.findall(r"evalport\[([\w,-]+)\]", text) for extra in group.split(",")
    }
    assert extras() <= mentioned, f"extras on no page: {sorted(extras() - mentioned)}"
    assert mentioned <= extras(), f"extras that do not exist: {sorted(mentioned - extras())}"


THIRD_PARTY = {
    # names of other libraries the pages mention, and protocol fields written as types
    "ASGITransport",
    "AsyncClient",
    "BinaryContent",
    "DocumentUrl",
    "FileNotFoundError",
    "HumanMessage",
    "ImageUrl",
    "CORSMiddleware",
    "Command",
    "DeferredToolResults",
    "FastAPI",
    "HumanInTheLoopMiddleware",
    "HttpAgentTarget",
    "KeyError",
    "ModelRetry",
    "RunState",
    "RuntimeError",
    "Agent",  # pydantic-ai's and the Agents SDK's
    "NotImplementedError",
    "ScriptedChatModel",  # examples/frameworks/scripted_chat_model.py
    "ScriptedModel",
    "Starlette",
    "Router",  # Starlette's, with its middleware (docs/performance.md, the mounted p99)
    "ExceptionMiddleware",
    "ServerErrorMiddleware",
    "TestModel",
    "FunctionModel",
    "AGUIAdapter",  # pydantic-ai's AG-UI adapter (docs/deployed-agents.md)
    "RunAgentInput",  # the AG-UI SDK's run input
    "ToolDenied",
    "ToolFailed",
    "ToolNode",
    "TracerProvider",  # OpenTelemetry's (docs/tracing.md)
    "TraceIdRatioBased",  # OpenTelemetry's sampler (docs/tracing.md)
    "BatchSpanProcessor",  # OpenTelemetry SDK's (docs/performance.md, tracing cost)
    "OTLPSpanExporter",
    "ApprovalRequired",
    "Timeout",
    "TypeError",
    "ValueError",
    "TimeoutError",
    "ImportError",
    "Mode",
    "Subset",
    "EXPECTED_IN_ORDER",
    "ONLY_FROM_EXPECTED",
    "SlackSummary",
    "Support",
    "SupportAgent",
    "AgentRun",
    "CreateSessionRequest",
    "CreateSessionResponse",
    "TurnRequest",
    "ApprovalsRequest",
    "Health",
    "SessionStore",
    "MemoryStore",
    "RedisStore",
    "ApprovalRelay",
    "LIMIT",
    "Name",
    "True",
    "False",
    "ClassName",
}


def test_every_name_the_pages_give_as_code_exists() -> None:
    public = {name for names in faces().values() for name in names}
    for module in ("evalport.client.assertions.neuron", "evalport.client.judges.criteria"):
        public |= set(importlib.import_module(module).__all__)
    schemas = set(SPEC["components"]["schemas"])
    text = site_text()
    named = set(re.findall(r"`([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)(?:[(`.\[])", text))
    unknown = named - public - schemas - THIRD_PARTY
    assert not unknown, f"the pages name classes no package exports: {sorted(unknown)}"
    for dotted in set(re.findall(r"`(evalport(?:\.\w+)+)", text)):
        module, _, attribute = dotted.rpartition(".")
        try:
            importlib.import_module(dotted)
        except ImportError:
            assert hasattr(importlib.import_module(module), attribute), f"{dotted} does not exist"


# -- troubleshooting ------------------------------------------------------------------------------


TROUBLE = DOCS / "troubleshooting.md"


def test_every_problem_type_is_explained() -> None:
    text = TROUBLE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z-]+)` \| (\d{3}) \|", text, re.M))
    in_spec = {
        (uri.rsplit(":", 1)[1], str(status))
        for uri, status in SPEC["components"]["x-problem-types"].items()
    }
    assert documented == in_spec, (
        f"missing: {sorted(in_spec - documented)}, unknown: {sorted(documented - in_spec)}"
    )


def config_error_messages() -> list[tuple[str, int, str]]:
    """The fixed part of every CLI configuration error in the sources: ``ConfigError(...)``
    and ``evalport serve``'s ``_fail(...)``."""
    found = []
    for path in sorted([*ROOT.glob("client/**/*.py"), ROOT / "server" / "_cli.py"]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "id", None)
            if name != "ConfigError" and not (name == "_fail" and path.name == "_cli.py"):
                continue
            message = node.args[0]
            if isinstance(message, ast.Constant):
                parts = [str(message.value)]
            elif isinstance(message, ast.JoinedStr):
                parts = [str(v.value) for v in message.values if isinstance(v, ast.Constant)]
            else:
                continue  # the message of another error, passed on: documented there
            fixed = max((p.strip(" :,()") for p in parts), key=len)
            if len(fixed) >= 4:
                found.append((str(path.relative_to(ROOT)), node.lineno, fixed))
    return found


def test_every_cli_configuration_error_is_explained() -> None:
    text = TROUBLE.read_text(encoding="utf-8")
    messages = config_error_messages()
    assert len(messages) >= 25
    missing = [f"{file}:{line}: {fixed!r}" for file, line, fixed in messages if fixed not in text]
    assert not missing, "CLI errors without an entry in troubleshooting.md:\n" + "\n".join(missing)


def test_every_public_exception_is_explained() -> None:
    text = TROUBLE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(\w+)` \| ", text, re.M))
    exceptions = set()
    for face, names in faces().items():
        module = importlib.import_module(face)
        for name in names:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                exceptions.add(name)
    missing = exceptions - documented
    assert not missing, f"exceptions without an entry in troubleshooting.md: {sorted(missing)}"
    problems = {uri.rsplit(":", 1)[1] for uri in SPEC["components"]["x-problem-types"]}
    unknown = documented - exceptions - problems
    assert not unknown, f"troubleshooting.md explains exceptions that do not exist: {unknown}"


# -- performance, README, extras ------------------------------------------------------------------


def test_the_benchmarks_section_lists_every_benchmark_with_date_and_machine() -> None:
    from support.docs import section

    table = section("benchmarks")
    listed = set(re.findall(r"^\| `benchmarks/(\w+\.py)`", table, re.M))
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert listed == scripts, f"missing: {scripts - listed}, unknown: {listed - scripts}"
    page = (DOCS / "performance.md").read_text(encoding="utf-8")
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", table), "the figures carry no date"
    assert re.search(r"\d+ cores?|\d+-core", table), "the figures name no machine"
    assert "## How to run them" in page


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"


def test_the_server_extra_never_pulls_the_docs_tooling() -> None:
    def closure(extra: str) -> set[str]:
        names: set[str] = set()
        todo = [("evalport", extra)]
        while todo:
            dist, wanted = todo.pop()
            try:
                lines = metadata.requires(dist) or []
            except metadata.PackageNotFoundError:
                continue  # not installed here, so not in this environment's closure
            for line in lines:
                requirement = Requirement(line)
                if requirement.marker and not requirement.marker.evaluate({"extra": wanted}):
                    continue
                key = requirement.name.lower()
                if key == "evalport":
                    todo += [("evalport", e) for e in requirement.extras]
                elif key not in names:
                    names.add(key)
                    todo.append((requirement.name, ""))
        return names

    docs_tools = {"mkdocs", "mkdocs-material", "mkdocstrings"}
    assert docs_tools <= {name.replace("_", "-") for name in closure("docs")}
    # mkdocstrings formats signatures with ruff or black: without one --strict fails
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {Requirement(line).name for line in project["optional-dependencies"]["docs"]}
    assert {"ruff", "black"} & declared, "evalport[docs] alone cannot build the site"
    for extra in ("server", "client", "all"):
        pulled = {name.replace("_", "-") for name in closure(extra)}
        assert not pulled & docs_tools, f"evalport[{extra}] pulls {pulled & docs_tools}"
