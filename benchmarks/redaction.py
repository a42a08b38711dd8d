"""Benchmark: the tuned redaction of ``TracePolicy.safe()`` against a plain one.

``protocol/_digest.py`` and ``protocol/_policy.py`` digest payloads with a few
micro-optimisations (a memo keyed by msgspec's encoding, shape tables for strings,
``type(x) is`` dispatch, a string memo, a walk that skips plain messages). The project
keeps such code only where a benchmark shows it buys at least 5% on a product path; this
is that benchmark. The plain reference below writes the same rules as simply as possible
(every value through :func:`canonical_json`, ``isinstance`` dispatch, one memo by JSON) and
must give byte-identical runs, which the benchmark checks before timing.

The product path is HttpTarget's: ``decode_run`` of a turn response, then
``TracePolicy.safe().apply(run, in_place=True)``. The body is the one ``benchmarks/client.py``
records (800 model steps, every third, or with ``--every 1`` every one, a tool step).
Rounds interleave both paths; it prints the median over rounds of the time ratio
plain / tuned. It never gates CI. Run: ``python benchmarks/redaction.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from typing import Any

import msgspec
from evalport.protocol import (
    AgentRun,
    RunEnvelope,
    TracePolicy,
    canonical_json,
    compact_json,
    decode_run,
    encode,
)

from client import turn_response

_DIGEST_KEYS = frozenset(("hash", "bytes", "preview"))


def is_digest(value: Any) -> bool:
    return isinstance(value, dict) and value.keys() == _DIGEST_KEYS


def shape(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return f"<string:{len(value.encode())}>"
    if value is None:
        return "<null>"
    if isinstance(value, bool):
        return "<bool>"
    if isinstance(value, int):
        return "<int>"
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, list | tuple):
        return f"<array:{len(value)}>"
    if isinstance(value, dict):
        if depth >= 6:
            return f"<object:{len(value)}>"
        return {str(key): shape(item, depth + 1) for key, item in value.items()}
    return f"<{type(value).__name__}>"


class PlainRedactor:
    """The safe policy's payload rules (no allow-lists), written plainly."""

    def __init__(self, preview: int = 120) -> None:
        self.preview = preview
        self.memo: dict[bytes, Any] = {}

    def value(self, value: Any) -> Any:
        if value is None or is_digest(value):
            return value
        data = compact_json(value)
        found = self.memo.get(data)
        if found is None:
            preview = msgspec.json.encode(shape(value))[: self.preview]
            canonical = canonical_json(value)
            found = self.memo[data] = {
                "hash": "sha256:" + hashlib.sha256(canonical).hexdigest(),
                "bytes": len(canonical),
                "preview": preview.decode(errors="ignore"),
            }
        return found

    def arguments(self, arguments: Any) -> Any:
        if not isinstance(arguments, dict):
            return self.value(arguments) if arguments else arguments
        if is_digest(arguments):
            return arguments
        return {name: self.value(item) for name, item in arguments.items()}

    def run(self, run: AgentRun) -> AgentRun:
        for step in run.steps:
            for call in step.requested_tool_calls:
                call.arguments = self.arguments(call.arguments)
            for execution in step.tool_executions:
                execution.arguments = self.arguments(execution.arguments)
                execution.result = self.value(execution.result)
            for message in step.output_messages:
                for call in message.tool_calls or ():
                    call.arguments = self.arguments(call.arguments)
        for record in run.tools:
            record.tool_call.arguments = self.arguments(record.tool_call.arguments)
            record.result = self.value(record.result)
        return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=3, help="a tool step every N steps")
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    body = turn_response(every=args.every)
    policy = TracePolicy.safe()
    tuned = encode(RunEnvelope(run=policy.apply(decode_run(body), in_place=True)))
    plain = encode(RunEnvelope(run=PlainRedactor().run(decode_run(body))))
    assert tuned == plain, "the plain reference must redact exactly as the policy does"
    ratios = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        policy.apply(decode_run(body), in_place=True)
        middle = time.perf_counter()
        PlainRedactor().run(decode_run(body))
        end = time.perf_counter()
        ratios.append((end - middle) / (middle - start))
    print(
        f"{len(body) / 1024:.0f} KiB turn response, a tool step every {args.every}: "
        f"decode + redact, plain / tuned time: {statistics.median(ratios):.2f}x "
        f"(median of {args.rounds} interleaved rounds)"
    )


if __name__ == "__main__":
    main()
