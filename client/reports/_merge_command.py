"""``evalport merge SHARD...``: join the results of a sharded run (``--shard I/N``), and
re-gate them with ``--pass-rate`` without running anything. See ARCHITECTURE.md,
"Comparing and merging runs".
"""

from __future__ import annotations

import argparse

import msgspec

from .._core import EXIT_FAILED, EXIT_OK, ConfigError, case_verdict, fail, required_passes
from . import (
    JsonReporter,
    JUnitReporter,
    MarkdownReporter,
    RunReport,
    RunSummary,
    load_summary,
    merge,
    summarize,
)
from ._console import summary_lines

HELP = "merge the results of sharded runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shards", nargs="+", metavar="RESULTS", help="--json files or run folders")
    parser.add_argument("-o", "--output", metavar="F", help="write the merged summary here")
    parser.add_argument("--junit", metavar="F", help="write JUnit XML")
    parser.add_argument("--md", metavar="F", help="write a Markdown summary")
    parser.add_argument(
        "--pass-rate", type=float, metavar="R", help="re-gate every case at this pass rate"
    )


def regate(summary: RunSummary, pass_rate: float) -> RunSummary:
    """The same results judged again at ``pass_rate`` (from the saved trial verdicts)."""
    cases = [
        msgspec.structs.replace(
            case,
            verdict=case_verdict(case.trial_verdicts, pass_rate),
            pass_rate=pass_rate,
            required=required_passes(len(case.trial_verdicts), pass_rate),
        )
        for case in summary.cases
    ]
    provenance = msgspec.structs.replace(summary.provenance, pass_rate=pass_rate)
    return summarize(cases, provenance, duration=summary.duration, load_errors=summary.load_errors)


def main(args: argparse.Namespace) -> int:
    if args.pass_rate is not None and not 0.0 <= args.pass_rate <= 1.0:
        return fail("merge", f"--pass-rate must be within [0, 1], got {args.pass_rate}")
    try:
        merged = merge([load_summary(path) for path in args.shards])
    except ConfigError as error:
        return fail("merge", str(error))
    if args.pass_rate is not None:
        merged = regate(merged, args.pass_rate)
    report = RunReport(summary=merged)
    if args.output:
        JsonReporter(args.output).finish(report)
    if args.junit:
        JUnitReporter(args.junit).finish(report)
    if args.md:
        MarkdownReporter(args.md).finish(report)
    print("\n".join(summary_lines(merged)))
    return EXIT_OK if merged.ok else EXIT_FAILED
