"""What ``evalport init`` and ``evalport new case`` write, and how: nothing is written when
one file exists, and ``pyproject.toml`` is never rewritten. See ARCHITECTURE.md,
"evalport init and evalport new".
"""

from __future__ import annotations

import keyword
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_AGENT = "agent.py:agent"
"""The placeholder ``init`` writes when ``--agent`` is not given."""

EVALS = "evals"
PORT = 8765

CASE = '''\
"""{doc}

Run it with ``evalport run`` (the agent and the folder come from ``[tool.evalport]`` in
pyproject.toml), or ``evalport run {folder} --local module:attr`` for another agent.
"""

from evalport.client import eval_case


@eval_case("{description}", tags=["smoke"])
async def {name}(ctx):
    await ctx.send("Hello!")  # edit: what a user of your agent would write
    ctx.succeeded()  # the turn completed: the agent did not raise or stop
{check}    # edit: what the reply must say, and the tools the agent must (not) call, e.g.
    # ctx.contains("Hi")
    # ctx.called_tool("search_orders", {{"query": "ada@example.com"}})
    # ctx.max_steps(5)
    # every assertion is listed on the "Write evals" page of evalport's documentation
'''

SECTION = """\
[tool.evalport]
# evalport run reads these; an option on the command line wins
path = "{folder}"
local = "{agent}"  # your agent in-process (module:attr or path.py:attr); --target URL runs it over HTTP
token-env = "EVALPORT_TOKEN"  # the variable holding the bearer token of a --target
"""

WORKFLOW = """\
name: evals
on: [push, pull_request]
jobs:
  evals:
    runs-on: ubuntu-latest
    env:
      EVALPORT_TOKEN: ci-only-token
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - run: pip install 'evalport[server,client]'
      - name: install the agent's dependencies
        run: if [ -f requirements.txt ]; then pip install -r requirements.txt; fi
      - run: evalport serve {agent} --port {port} &
      - name: wait for the agent
        run: |
          for i in $(seq 30); do
            curl -sf -H "Authorization: Bearer $EVALPORT_TOKEN" http://127.0.0.1:{port}/health && break
            sleep 1
          done
      - run: evalport check http://127.0.0.1:{port} --token-env EVALPORT_TOKEN
      - run: evalport run {folder} --target http://127.0.0.1:{port} --token-env EVALPORT_TOKEN --junit junit.xml --md "$GITHUB_STEP_SUMMARY"
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: eval-reports
          path: junit.xml
"""


class ScaffoldError(ValueError):
    """Scaffolding cannot go ahead; the message names a file (or the input) and the fix."""


@dataclass(frozen=True)
class Planned:
    """One file to write: its path, its whole new text, and what the console says."""

    path: Path
    text: str
    action: str  # "wrote", "appended [tool.evalport] to"


GREEN = "    ctx.length_between(1, 10_000)  # and it replied\n"
"""``init``'s check: any agent that replies passes it, so the first run is green."""

UNTIL_EDITED = '    ctx.contains("EDIT ME: what the reply must say")  # fails until you write it\n'
"""``new case``'s check: it fails until edited, so a new case never passes for any agent."""


def case_file(
    name: str,
    folder: str = EVALS,
    description: str | None = None,
    doc: str | None = None,
    *,
    until_edited: bool = True,
) -> str:
    """An eval file with one case, the function ``name``; ``until_edited``: its check fails
    until it is edited (``new case``), else any replying agent passes it (``init``)."""
    return CASE.format(
        doc=doc or f"Evals of {name.replace('_', ' ')}: edit the case, or copy it for another.",
        description=description or name.replace("_", " "),
        name=name,
        folder=folder,
        check=UNTIL_EDITED if until_edited else GREEN,
    )


def check_name(name: str) -> str:
    """``name`` as the case function's name; raises :class:`ScaffoldError` otherwise."""
    if not name.isidentifier() or keyword.iskeyword(name) or not name.isascii():
        raise ScaffoldError(
            f"{name!r} is not a valid case name: use letters, digits and underscores, "
            "not starting with a digit (e.g. refund_flow)"
        )
    return name


AGENT = re.compile(r"[^\s\"'\\]+:[A-Za-z_][\w.]*")


def check_agent(agent: str) -> str:
    """``agent`` as ``module:attr`` or ``path.py:attr``, safe to write into TOML and YAML."""
    if not AGENT.fullmatch(agent):
        raise ScaffoldError(
            f"--agent {agent!r} is not module:attr or path.py:attr "
            "(no spaces or quotes), e.g. my_agent/app.py:agent"
        )
    return agent


def eval_path(folder: Path, name: str) -> Path:
    """``folder/NAME_eval.py`` (a name that already ends in ``_eval`` keeps it once)."""
    stem = name if name.endswith("_eval") else f"{name}_eval"
    return folder / f"{stem}.py"


def pyproject_plan(root: Path, agent: str) -> Planned | None:
    """The pyproject.toml with the section; ``None`` when the section exists already."""
    path = root / "pyproject.toml"
    section = SECTION.format(folder=EVALS, agent=agent)
    if not path.exists():
        return Planned(path, section, "wrote")
    text = path.read_text(encoding="utf-8")
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScaffoldError(f"{path}: cannot read it as TOML ({error}); fix it first") from None
    if "evalport" in document.get("tool", {}):
        return None
    joined = text + ("" if text.endswith("\n") or not text else "\n") + "\n" + section
    try:
        tomllib.loads(joined)
    except tomllib.TOMLDecodeError:  # e.g. `tool = {...}` as an inline table
        raise ScaffoldError(
            f"{path}: a [tool.evalport] section cannot be appended to it; add it by hand"
        ) from None
    return Planned(path, joined, "appended [tool.evalport] to")


IGNORED = ".evalport/"
"""What a run writes into the project (runs, the cache), which git should not track."""


def gitignore_plan(root: Path) -> Planned | None:
    """``.gitignore`` with :data:`IGNORED` added, or ``None`` when it is there already."""
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if any(
        line.strip() in (IGNORED, IGNORED.rstrip("/"), "/" + IGNORED) for line in text.splitlines()
    ):
        return None
    prefix = "" if not text or text.endswith("\n") else "\n"
    return Planned(path, f"{text}{prefix}{IGNORED}\n", f"added {IGNORED} to")


def write(planned: list[Planned], root: Path) -> list[str]:
    """Write every file (folders created); returns the console's lines."""
    lines = []
    for item in planned:
        item.path.parent.mkdir(parents=True, exist_ok=True)
        item.path.write_text(item.text, encoding="utf-8")
        lines.append(f"{item.action} {shown(item.path, root)}")
    return lines


def shown(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it is below it."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
