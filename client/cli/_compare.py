"""``evalport compare BASE NEW``: flipped cases and pass-rate changes between two runs.

Both arguments are files written by ``--json`` or run folders. The output lists
regressions, fixes, other verdict changes and pass-rate changes with Fisher p-values, and
the McNemar p-value over the flips. Exit ``0``; with ``--fail-on-regression``, ``1`` when a
case that passed in BASE does not pass in NEW.
"""

from __future__ import annotations

import argparse

from .._core import EXIT_FAILED, EXIT_OK, ConfigError, fail
from ..reports import compare, load_summary

HELP = "compare two runs' results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE.json", help="results of the baseline run")
    parser.add_argument("new", metavar="NEW.json", help="results of the new run")
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="significance level (default 0.05)"
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case that passed in BASE does not pass in NEW",
    )


def main(args: argparse.Namespace) -> int:
    try:
        base, new = load_summary(args.base), load_summary(args.new)
    except ConfigError as error:
        return fail("compare", str(error))
    comparison = compare(base, new, alpha=args.alpha)
    print("\n".join(comparison.lines()))
    if args.fail_on_regression and comparison.regressions:
        return EXIT_FAILED
    return EXIT_OK
