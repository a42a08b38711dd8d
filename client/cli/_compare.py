"""``evalport compare BASE NEW``: flipped cases, pass-rate changes and cases slower to first
token between two saved runs. With ``--fail-on-regression``, exit ``1`` when a case that
passed in BASE does not pass in NEW or is gone; a slower case alone fails nothing. See
ARCHITECTURE.md, "Comparing and merging runs".
"""

from __future__ import annotations

import argparse

from .._core import EXIT_FAILED, EXIT_OK, ConfigError, fail
from ..reports import TTFT_FLOOR, TTFT_TOLERANCE, compare, load_summary

HELP = "compare two runs' results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE.json", help="results of the baseline run")
    parser.add_argument("new", metavar="NEW.json", help="results of the new run")
    parser.add_argument(
        "--alpha", type=float, default=0.05, help="significance level (default 0.05)"
    )
    parser.add_argument(
        "--ttft-tolerance",
        type=float,
        default=TTFT_TOLERANCE,
        metavar="F",
        help="list a case as slower when its time to first token (p95) grew by more than "
        f"this share of BASE's (default {TTFT_TOLERANCE:g}) and by more than "
        f"{TTFT_FLOOR * 1000:g} ms",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a case that passed in BASE does not pass in NEW (or is gone)",
    )


def main(args: argparse.Namespace) -> int:
    try:
        base, new = load_summary(args.base), load_summary(args.new)
    except ConfigError as error:
        return fail("compare", str(error))
    comparison = compare(base, new, alpha=args.alpha, ttft_tolerance=args.ttft_tolerance)
    print("\n".join(comparison.lines()))
    if args.fail_on_regression and (comparison.regressions or comparison.removed_passing):
        return EXIT_FAILED
    return EXIT_OK
