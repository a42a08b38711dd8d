"""``evalport check URL``: protocol conformance of a live server, one line per check, in the
order of :meth:`_Checker.plan`. A check that is not run is skipped with its reason and
fails nothing; exit codes are ``evalport run``'s for the same mistakes. See
ARCHITECTURE.md, "evalport check".
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import msgspec
from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    DEFAULT_TOKEN_ENV,
    DELTA_CAPABILITY,
    INTERRUPTS_CAPABILITY,
    STREAMING_CAPABILITY,
    AgentRun,
    ProblemType,
    ProtocolError,
    RunStatus,
)

from .._core import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    ConfigError,
    Settings,
    describe_error,
    fail,
    run_errors,
)
from ..reports import agent_label
from ._check_answers import CheckFailed, enveloped_run, expect, problem, validate_run
from ._check_capabilities import content_parts, delta, interrupts, streaming
from ._check_protocols import main as check_protocol
from ._check_protocols import named_by_protocol
from ._targets import (
    add_server_options,
    not_here,
    read_token,
    token_refused,
    without_credentials,
)

HELP = "check a server's protocol conformance"

Step = Callable[[], Awaitable[str]]


def _runs() -> str:
    """The reason not to run a check that always runs (once those it needs passed)."""
    return ""


MAX_DECISIONS = 10
REJECTION = "rejected by evalport check"
# The optional operations' capabilities in /health (the spec lists them; protocol/ names
# no constant for them).
ATTACH, DELETE, APPROVALS = "attach", "delete", "approvals"
NO_TOKEN = "no token given: whether the server refuses requests without one is not checked"


@dataclass(slots=True)
class CheckResult:
    """One check's line. A skipped check (``ok`` false) was not run: ``detail`` says why
    (a capability ``/health`` does not list, or a check it builds on did not pass)."""

    name: str
    ok: bool
    detail: str = ""
    skipped: bool = False


class Unreachable(Exception):
    """The server could not be reached at all."""


class AgentFailedTurn(Exception):
    """The agent failed the turn (status ``failed``): its check fails, naming the error's
    type, and the protocol checks after it go on (the wire answered as it should)."""


def bearer(token: str) -> Callable[[httpx.Request], httpx.Request]:
    """httpx auth that sends ``token`` as the bearer token."""

    def sign(request: httpx.Request) -> httpx.Request:
        request.headers["Authorization"] = f"Bearer {token}"
        return request

    return sign


@dataclass
class _Checker:
    client: httpx.AsyncClient
    token: str | None
    message: str
    timeout: float | None = None
    token_env: str = DEFAULT_TOKEN_ENV
    approve: bool = False
    results: list[CheckResult] = field(default_factory=list)
    session_id: str | None = None
    run: AgentRun | None = None
    first: AgentRun | None = None  # the run of the first turn
    capabilities: set[str] = field(default_factory=set)

    async def check(self, name: str, step: Step) -> bool:
        try:
            async with asyncio.timeout(self.timeout):
                detail = await step()
        except TimeoutError:
            if name == "health":
                raise Unreachable(f"no answer to GET /health within {self.timeout:g} s") from None
            self.results.append(CheckResult(name, False, f"no answer within {self.timeout:g} s"))
            return False
        except CheckFailed as failure:
            self.results.append(CheckResult(name, False, str(failure)))
            return False
        except AgentFailedTurn as failure:
            self.results.append(CheckResult(name, False, str(failure)))
            return True
        except (httpx.HTTPError, ProtocolError) as error:
            self.results.append(CheckResult(name, False, f"{type(error).__name__}: {error}"))
            return False
        self.results.append(CheckResult(name, True, detail or ""))
        return True

    async def health(self) -> str:
        try:
            response = await self.client.get("health")
        except httpx.TransportError as error:
            raise Unreachable(f"{type(error).__name__}: {error}") from None
        if response.status_code in (401, 403):
            raise CheckFailed(
                f"HTTP {response.status_code}: "
                + token_refused(
                    without_credentials(str(self.client.base_url)),
                    self.token_env,
                    bool(self.token),
                )
            )
        if response.status_code == 404:
            raise CheckFailed(f"/health answered 404: {await not_here(str(self.client.base_url))}")
        if response.status_code >= 500:  # as evalport run: the server is not available
            raise Unreachable(f"GET /health answered HTTP {response.status_code}")
        if response.status_code != 200:
            raise CheckFailed(f"HTTP {response.status_code}: {response.text[:200]}")
        body = response.json()
        if not isinstance(body, dict) or body.get("status") != "ok":
            raise CheckFailed(f'expected {{"status": "ok", ...}}, got {response.text[:200]}')
        if body.get("protocol") != "1":
            raise CheckFailed(f"protocol is {body.get('protocol')!r}, expected '1'")
        agent = body.get("agent")
        if not isinstance(agent, dict) or not all(
            isinstance(agent.get(key), str) for key in ("name", "version")
        ):
            raise CheckFailed("agent must carry a name and a version")
        capabilities = body.get("capabilities")
        self.capabilities = set(capabilities) if isinstance(capabilities, list) else set()
        # named as evalport run names it: "name version", or "name, unversioned"
        return agent_label({"agent_name": agent["name"], "agent_version": agent["version"]})

    async def auth(self) -> str:
        url = "evals/sessions"
        missing = await self.client.post(url, json={}, auth=httpx.Auth())  # no token
        if missing.status_code < 400:
            raise CheckFailed(
                f"HTTP {missing.status_code} without a token, although ${self.token_env} holds "
                "one: the server serves without auth (or does not check it)"
            )
        problem(missing, 401, ProblemType.UNAUTHORIZED)
        wrong = await self.client.post(url, json={}, auth=bearer("wrong-" + "x" * 16))
        problem(wrong, 401, ProblemType.UNAUTHORIZED)
        return "no token and a wrong token are refused"

    async def create(self) -> str:
        body = {"caseId": "evalport-check", "description": "protocol conformance check"}
        response = expect(await self.client.post("evals/sessions", json=body), 201)
        session_id = response.json().get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise CheckFailed("sessionId must be a non-empty string")
        self.session_id = session_id
        return session_id

    def session_url(self, session_id: str | None = None) -> str:
        return "evals/sessions/" + quote(session_id or self.session_id or "", safe="")

    async def turn(self, number: int) -> str:
        body = {"message": self.message}
        response = expect(await self.client.post(self.session_url() + "/turns", json=body), 200)
        run = enveloped_run(response)
        validate_run(run, number)
        run, decided = await self.decide(run, number)
        self.run = run
        if number == 1:
            self.first = run
        summary = f"status {run.status}, {len(run.steps)} steps, {len(run.tools)} tool calls"
        if decided:
            verdict = "approved" if self.approve else "rejected"
            summary += f"; {decided} pending call(s) {verdict}"
        if run.status == RunStatus.FAILED:
            errors = run_errors(msgspec.to_builtins(run))
            cause = describe_error(errors[-1]) if errors else "no error recorded"
            raise AgentFailedTurn(f"{summary}; the agent failed the turn: {cause}")
        return summary

    async def decide(self, run: AgentRun, number: int) -> tuple[AgentRun, int]:
        """Answer a suspended turn's pending calls until it ends; returns the run and count."""
        decided = 0
        for _ in range(MAX_DECISIONS):
            if run.pending_interrupts:
                kinds = ", ".join(sorted({asked.kind or "?" for asked in run.pending_interrupts}))
                raise CheckFailed(
                    f"the turn waits for an answer to {len(run.pending_interrupts)} "
                    f"interrupt(s) ({kinds}), which evalport check cannot give; check with a "
                    "--message that the agent answers without interrupting"
                )
            if run.status != RunStatus.IN_PROGRESS or not run.pending_approvals:
                return run, decided
            answer: dict[str, Any] = (
                {"decision": "approve"}
                if self.approve
                else {"decision": "reject", "reason": REJECTION}
            )
            decisions = {pending.call_id: answer for pending in run.pending_approvals}
            response = await self.client.post(
                self.session_url() + "/approvals", json={"decisions": decisions}
            )
            expect(response, 200, f"deciding {len(decisions)} pending call(s): ")
            decided += len(decisions)
            run = enveloped_run(response)
            validate_run(run, number)
        if run.pending_approvals:
            raise CheckFailed(f"the turn still suspends after {MAX_DECISIONS} rounds of decisions")
        return run, decided

    async def attach(self) -> str:
        response = expect(await self.client.get(self.session_url()), 200)
        run = enveloped_run(response)
        validate_run(run, 2)
        if self.run is not None and msgspec.to_builtins(run) != msgspec.to_builtins(self.run):
            raise CheckFailed("the attached run differs from the run of the last turn")
        return "same accumulated run"

    async def malformed(self) -> str:
        response = await self.client.post(
            self.session_url() + "/turns",
            content=b'{"message": ',
            headers={"Content-Type": "application/json"},
        )
        problem(response, 400, ProblemType.MALFORMED_JSON)
        return "400 problem"

    async def invalid(self) -> str:
        response = await self.client.post(self.session_url() + "/turns", json={"msg": 1})
        body = problem(response, 422, ProblemType.INVALID_BODY)
        if not body.get("errors"):
            raise CheckFailed("a 422 problem should list the invalid fields in errors")
        return "422 problem naming " + ", ".join(str(e.get("path")) for e in body["errors"])

    async def unknown(self) -> str:
        response = await self.client.post(
            self.session_url("no-such-session-" + uuid.uuid4().hex) + "/turns",
            json={"message": "hi"},
        )
        problem(response, 404, ProblemType.SESSION_NOT_FOUND)
        return "404 problem"

    async def approvals(self) -> str:
        decisions = {"decisions": {"evalport-check": {"decision": "approve"}}}
        response = await self.client.post(self.session_url() + "/approvals", json=decisions)
        problem(response, 409, ProblemType.NOT_SUSPENDED)
        return "409 problem: nothing is waiting for approval"

    async def delete(self) -> str:
        expect(await self.client.delete(self.session_url()), 204)
        # A turn, not an attach: a server may serve delete without attach.
        after = await self.client.post(self.session_url() + "/turns", json={"message": "hi"})
        problem(after, 404, ProblemType.SESSION_NOT_FOUND)
        return "204, then 404"

    def plan(self) -> list[tuple[str, Step, tuple[str, ...], Callable[[], str]]]:
        """Every check in order: its name, its step, the checks it builds on, and why it
        is not run here ("" when it is; asked once the checks before it ran)."""

        def unlisted(*capabilities: str) -> Callable[[], str]:
            return lambda: self.missing(*capabilities)

        return [
            ("health", self.health, (), _runs),
            ("auth", self.auth, ("health",), self.tokenless),
            ("create", self.create, ("health",), _runs),
            ("turn", lambda: self.turn(1), ("create",), _runs),
            ("second turn", lambda: self.turn(2), ("turn",), _runs),
            ("attach", self.attach, ("second turn",), unlisted(ATTACH)),
            # ?since= is read by attach
            ("delta", lambda: delta(self), ("second turn",), unlisted(DELTA_CAPABILITY, ATTACH)),
            (
                "content parts",
                lambda: content_parts(self),
                ("second turn",),
                unlisted(CONTENT_PARTS_CAPABILITY),
            ),
            # its turns are numbered after those of the checks before it
            (
                "streaming",
                lambda: streaming(self),
                ("second turn", "content parts"),
                unlisted(STREAMING_CAPABILITY),
            ),
            ("malformed JSON", self.malformed, ("create",), _runs),
            ("invalid body", self.invalid, ("create",), _runs),
            ("unknown session", self.unknown, ("health",), _runs),
            ("approvals", self.approvals, ("create",), unlisted(APPROVALS)),
            ("interrupts", lambda: interrupts(self), ("create",), unlisted(INTERRUPTS_CAPABILITY)),
            ("delete", self.delete, ("create",), unlisted(DELETE)),
        ]

    def missing(self, *capabilities: str) -> str:
        """Why a check that needs ``capabilities`` is not run ("" when /health lists them)."""
        absent = [name for name in capabilities if name not in self.capabilities]
        return f"/health does not list {absent[0]!r}" if absent else ""

    def tokenless(self) -> str:
        return "" if self.token else NO_TOKEN

    async def run_all(self) -> list[CheckResult]:
        # The checks whose dependents cannot run: "failed" or "was skipped". A check skipped
        # for a capability the server does not list breaks nothing after it.
        broken: dict[str, str] = {}
        for name, step, needs, unavailable in self.plan():
            after = next((need for need in needs if need in broken), None)
            if after is not None:
                reason = f"needs {after!r}, which {broken[after]}"
                broken[name] = "was skipped"
            else:
                reason = unavailable()
            if reason:
                self.results.append(CheckResult(name, False, reason, skipped=True))
            elif not await self.check(name, step):
                broken[name] = "failed"
        return self.results


async def check_server(
    url: str,
    *,
    token: str | None = None,
    message: str = "Hello from evalport check",
    transport: httpx.AsyncBaseTransport | None = None,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    read_timeout: float | None = None,
    token_env: str = DEFAULT_TOKEN_ENV,
    approve: bool = False,
) -> list[CheckResult]:
    """Run every check against the server at ``url``; raises :class:`Unreachable`.

    ``timeout`` bounds each check, ``connect_timeout`` and ``read_timeout`` (default
    ``timeout``) each request; ``token_env`` only names the token's variable in messages;
    ``approve``: a turn that suspends has its pending calls approved, not rejected."""
    base = url if url.endswith("/") else url + "/"
    limits = httpx.Timeout(30.0, connect=connect_timeout, read=read_timeout or timeout)
    auth = bearer(token) if token else None
    async with httpx.AsyncClient(
        base_url=base, transport=transport, timeout=limits, auth=auth
    ) as client:
        checker = _Checker(
            client, token, message, timeout=timeout, token_env=token_env, approve=approve
        )
        return await checker.run_all()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL", help="base URL where the protocol is mounted")
    parser.add_argument("--message", default="Hello from evalport check", help="turn message")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per check (default 30)"
    )
    add_server_options(parser.add_argument, connect_default=5.0)
    parser.add_argument(
        "--approve",
        action="store_true",
        help="approve the calls a turn suspends on (default: reject them)",
    )


def main(args: argparse.Namespace) -> int:
    url = without_credentials(args.url)
    waits = {name: getattr(args, name) for name in ("timeout", "connect_timeout", "read_timeout")}
    try:
        Settings(**waits).validate("command line")  # bounded as evalport run bounds them
        token, token_env = read_token(args.token_env)
    except ConfigError as error:
        return fail("check", str(error))
    if named_by_protocol(args.url):  # agui+, a2a+: what that target can evaluate
        return check_protocol(args)
    if not args.url.lower().startswith(("http://", "https://")):  # as run --target says
        return fail("check", f"{url}: the URL needs its scheme, http:// or https://")
    try:
        results = asyncio.run(
            check_server(
                args.url,
                token=token,
                message=args.message,
                token_env=token_env,
                approve=args.approve,
                **waits,
            )
        )
    except Unreachable as error:
        reason = without_credentials(str(error))
        return fail("check", f"{url} is unreachable: {reason}", EXIT_UNREACHABLE)
    if results and results[0].name == "health" and not results[0].ok:
        # the server answered, but not as the protocol at this address with this token:
        # a configuration error, as evalport run calls it
        detail = without_credentials(results[0].detail)
        return fail("check", f"{url} is not the adapter's address: {detail}")
    for result in results:
        detail = without_credentials(result.detail)
        verdict = "SKIP" if result.skipped else "PASS" if result.ok else "FAIL"
        print(f"{verdict}  {result.name}: {detail}")
    passed = sum(result.ok for result in results)
    skipped = sum(result.skipped for result in results)
    failed = [result for result in results if not result.ok and not result.skipped]
    print(f"{passed} passed, {len(failed)} failed, {skipped} skipped")
    return EXIT_FAILED if failed else EXIT_OK
