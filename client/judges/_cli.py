"""``evalport judge``: work with judges from the command line.

``evalport judge calibrate LABELS.jsonl --model M [--base-url URL] [--api-key-env VAR]``
runs a judge over human-labelled examples and prints its agreement with the labels
(ARCHITECTURE.md, "Judge calibration"). Exit codes: 0 done, 1 no example could be judged, 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import msgspec

from ._calibrate import calibrate, format_report, load_labels
from ._openai import OpenAIJudge

HELP = "calibrate judges against human labels"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="judge_command", metavar="ACTION", required=True)
    cal = commands.add_parser("calibrate", help="measure a judge's agreement with human labels")
    cal.add_argument("labels", help="JSONL file: one {output, label, ...} object per line")
    cal.add_argument("--model", required=True, help="the judge model name")
    cal.add_argument("--base-url", default="https://api.openai.com/v1", help="chat API base URL")
    cal.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key ('' for none)",
    )
    cal.add_argument("--criterion", help="criterion text for rows without 'criteria'")
    cal.add_argument("--threshold", type=float, default=0.7, help="judge pass threshold")
    cal.add_argument("--concurrency", type=int, default=4, help="judge calls at once")
    cal.add_argument("--cache-dir", help="judge cache directory")
    cal.add_argument("--json", action="store_true", help="print the report as JSON")


async def _calibrate(args: argparse.Namespace) -> int:
    try:
        examples = load_labels(args.labels, default_criterion=args.criterion)
    except (OSError, ValueError) as error:
        print(f"evalport judge calibrate: {error}", file=sys.stderr)
        return 2
    async with OpenAIJudge(
        args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env or None,
        cache=args.cache_dir,
    ) as judge:
        report = await calibrate(
            judge, examples, threshold=args.threshold, concurrency=args.concurrency
        )
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        print(format_report(report))
    return 0 if report.judged else 1


def main(args: argparse.Namespace) -> int:
    if not 0.0 <= args.threshold <= 1.0:
        print("evalport judge calibrate: --threshold must be within [0, 1]", file=sys.stderr)
        return 2
    return asyncio.run(_calibrate(args))
