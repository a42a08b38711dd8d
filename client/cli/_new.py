"""``evalport new case NAME``: a new eval file, ``NAME_eval.py``, from a template that fails
until edited. See ARCHITECTURE.md, "evalport init and evalport new".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .._core import EXIT_OK, ConfigError, fail, find_pyproject, load_settings
from ._scaffold import EVALS, ScaffoldError, case_file, check_name, eval_path, shown

HELP = "add an eval file from a template (evalport new case NAME)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", required=True)
    case = kinds.add_parser("case", help="an eval file with one case, NAME_eval.py")
    case.add_argument("name", metavar="NAME", help="the case's function name, e.g. refund_flow")
    case.add_argument(
        "--dir",
        metavar="DIR",
        help="folder of the file (default: path of [tool.evalport] when a folder, else evals)",
    )
    case.add_argument("--description", metavar="TEXT", help="the case's description")
    case.add_argument("--force", action="store_true", help="overwrite the file if it exists")


def _folder(args: argparse.Namespace) -> Path:
    if args.dir:
        return Path(args.dir)
    configured = load_settings().path
    if configured and not configured.endswith(".py"):
        return Path(configured)
    return Path(EVALS)


def main(args: argparse.Namespace) -> int:
    try:
        name = check_name(args.name)
        folder = _folder(args)
    except (ScaffoldError, ConfigError) as error:
        return fail("new", str(error))
    path = eval_path(folder, name)
    root = Path.cwd()
    if path.exists() and not args.force:
        return fail(
            "new",
            f"{shown(path.resolve(), root)} exists: choose another NAME, "
            "or pass --force to overwrite it",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    project = find_pyproject(root)  # the file names its folder from the project's root
    base = project.parent if project is not None else root
    written = shown(folder.resolve(), base.resolve())  # never this machine's absolute path
    path.write_text(case_file(name, written, args.description), encoding="utf-8")
    print(f"wrote {shown(path.resolve(), root)}")
    return EXIT_OK
