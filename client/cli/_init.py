"""``evalport init``: an example eval, ``[tool.evalport]`` and a CI workflow for a project.
See ARCHITECTURE.md, "evalport init and evalport new".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._core import EXIT_OK, EXIT_USAGE, fail
from ._scaffold import (
    DEFAULT_AGENT,
    EVALS,
    PORT,
    WORKFLOW,
    Planned,
    ScaffoldError,
    case_file,
    check_agent,
    gitignore_plan,
    pyproject_plan,
    shown,
    write,
)

INTRO = "An example eval written by ``evalport init``: edit the case, or copy it for another."

HELP = "write an example eval, [tool.evalport] and a CI workflow into this project"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="TARGET",
        default=DEFAULT_AGENT,
        help=f"your agent, module:attr or path.py:attr (default {DEFAULT_AGENT}, to edit)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="overwrite the example eval and the workflow (an existing [tool.evalport] is kept)",
    )


def main(args: argparse.Namespace) -> int:
    try:
        check_agent(args.agent)
    except ScaffoldError as error:
        return fail("init", str(error))
    root = Path.cwd()
    eval_file = root / EVALS / "example_eval.py"
    workflow = root / ".github" / "workflows" / "evals.yml"
    planned = [
        Planned(
            eval_file,
            case_file("example", EVALS, "replies to a greeting", INTRO, until_edited=False),
            "wrote",
        ),
        Planned(workflow, WORKFLOW.format(agent=args.agent, port=PORT, folder=EVALS), "wrote"),
    ]
    problems = []
    if not args.force:
        problems = [
            f"{shown(item.path, root)} exists: move it away, or pass --force to overwrite it"
            for item in planned
            if item.path.exists()
        ]
    try:
        section = pyproject_plan(root, args.agent)
    except ScaffoldError as error:
        problems.append(str(error))
        section = None
    else:
        if section is None and not args.force:
            problems.append(
                "pyproject.toml has a [tool.evalport] section already: edit it by hand, "
                "or pass --force to keep it and write the other files"
            )
    if problems:
        for line in problems:
            fail("init", line)
        fail("init", "nothing was written")
        return EXIT_USAGE
    if section is not None:
        planned.insert(1, section)
    ignore = gitignore_plan(root)
    if ignore is not None:
        planned.append(ignore)
    for line in write(planned, root):
        print(line)
    if section is None:
        print("kept pyproject.toml's [tool.evalport] as it is")
    print(
        f"next: point local in [tool.evalport] at your agent (now {args.agent}), "
        "then run `evalport run`"
    )
    return EXIT_OK
