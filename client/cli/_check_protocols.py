"""``evalport check agui+URL`` (any target named by a protocol prefix): what that target
can and cannot evaluate, learned from one real turn. See ARCHITECTURE.md, "evalport
check".
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from typing import Any, Final

import httpx
from evalport.protocol import (
    AgentRun,
    AuthFailed,
    MissingExtraError,
    RunStatus,
    TargetError,
    TargetUnavailable,
)

from .._core import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, ConfigError, fail
from ._targets import read_token, token_refused, without_credentials

MAX_DECISIONS: Final = 10
REJECTION: Final = "rejected by evalport check"

# What a run may carry, as the report names it; the key is the run's ``unreported`` key.
CARRIED: Final[Mapping[str, str]] = {
    "steps": "steps (max_steps, step_count)",
    "tools": "tool calls with their arguments and results (called_tool, tool_order...)",
    "usage": "token usage (tokens_at_most, total_tokens_at_most)",
    "events": "the agent's events (event, event_order)",
}


def named_by_protocol(url: str) -> bool:
    """Whether ``url`` names a target by a protocol prefix (``agui+https://...``)."""
    scheme, sep, _ = url.partition("://")
    return bool(sep) and "+" in scheme


class AgentUnreachable(Exception):
    """The agent could not be reached."""


async def check_target(
    url: str,
    *,
    token: str | None = None,
    message: str = "Hello from evalport check",
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    read_timeout: float | None = None,
    approve: bool = False,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[bool, list[str]]:
    """One turn through the target ``url`` names; whether it passed, and the lines to
    print (see ARCHITECTURE.md, "evalport check"). Raises :class:`AgentUnreachable`, :class:`ValueError`
    for an unknown prefix, :class:`MissingExtraError` without the target's extra."""
    from evalport.client import target_for

    waits = httpx.Timeout(30.0, connect=connect_timeout, read=read_timeout or timeout)
    options: dict[str, Any] = {"token": token, "timeout": waits}
    if transport is not None:
        options["transport"] = transport
    target = target_for(url, **options)
    prefix, _, address = url.partition("+")
    protocol = getattr(target, "protocol", prefix.upper())
    where = getattr(target, "base_url", address)
    lines = [f"{protocol} agent at {without_credentials(where)}"]
    try:
        try:
            async with asyncio.timeout(timeout):
                run, detail = await _turn(target, message, approve)
        except TimeoutError:
            raise AgentUnreachable(f"no answer to a turn within {timeout:g} s") from None
        except TargetUnavailable as error:
            raise AgentUnreachable(str(error)) from None
        except AuthFailed as error:
            lines.append(f"FAIL  turn: {error}")
            return False, lines
        except TargetError as error:
            lines.append(f"FAIL  turn: {type(error).__name__}: {error}")
            return False, lines
    finally:
        await target.aclose()
    passed = run.status in (RunStatus.COMPLETED, RunStatus.STOPPED)
    lines.append(f"{'PASS' if passed else 'FAIL'}  turn: {detail}")
    lines.append("CAN     replies and run status (contains, succeeded, failed, judges...)")
    for key, what in CARRIED.items():
        why = run.not_reported(key)
        if not why:
            lines.append(f"CAN     {what}")
    for key, what in CARRIED.items():
        why = run.not_reported(key)
        if why:
            lines.append(f"CANNOT  {what}: {why}")
    for feature, why in getattr(target, "lacks", {}).items():
        lines.append(f"CANNOT  {feature}: {why}")
    return passed, lines


async def _turn(target: Any, message: str, approve: bool) -> tuple[AgentRun, str]:
    """The turn's run once its approvals are decided, and the line that describes it."""
    session = await target.open()
    try:
        turn = await session.send(message)
        decided = 0
        while turn.run.pending_approvals and decided < MAX_DECISIONS:
            decision = "approve" if approve else ("reject", REJECTION)
            turn = await session.decide(
                {item.call_id: decision for item in turn.run.pending_approvals}
            )
            decided += 1
    finally:
        await session.close()
    run, timing = turn.run, turn.timing
    parts = [f"status {run.status}"]
    if run.status == RunStatus.FAILED:
        kinds = {info.type or info.error_class or "error" for info in run.error_details}
        parts.append(f"the agent failed ({', '.join(sorted(map(str, kinds)))})")
    if run.pending_interrupts:
        asked = sorted({item.kind for item in run.pending_interrupts})
        parts.append(
            f"it waits on interrupts ({', '.join(asked)}) the check cannot answer: "
            "choose another --message"
        )
    if not run.not_reported("steps"):
        parts.append(f"{len(run.steps)} step(s)")
    if not run.not_reported("tools"):
        parts.append(f"{len(run.tools)} tool call(s)")
    if decided:
        parts.append(f"{decided} round(s) of approvals decided")
    if timing is not None:
        if timing.first_event is not None:
            parts.append(f"first event after {timing.first_event:.3f} s")
        if timing.first_token is not None:
            parts.append(f"first token after {timing.first_token:.3f} s")
    return run, ", ".join(parts)


def main(args: argparse.Namespace) -> int:
    """``evalport check`` for a URL with a protocol prefix (``_check.py`` hands it here)."""
    url = without_credentials(args.url)
    try:
        token, token_env = read_token(args.token_env)
    except ConfigError as error:
        return fail("check", str(error))
    try:
        passed, lines = asyncio.run(
            check_target(
                args.url,
                token=token,
                message=args.message,
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
                read_timeout=args.read_timeout,
                approve=args.approve,
            )
        )
    except (ValueError, MissingExtraError) as error:
        return fail("check", f"{url}: {error}")
    except AgentUnreachable as error:
        return fail(
            "check", f"{url} is unreachable: {without_credentials(str(error))}", EXIT_UNREACHABLE
        )
    for line in lines:
        if line.startswith("FAIL") and "credentials" in line:
            line += f" ({token_refused(url, token_env, token is not None)})"
        print(without_credentials(line))
    return EXIT_OK if passed else EXIT_FAILED
