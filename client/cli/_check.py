"""``evalport check URL``: protocol conformance of a live server, one line per check.

What is checked, in order (later checks use the session the earlier ones opened):

- ``health``: 200 JSON with ``status: "ok"``, ``protocol: "1"`` and the agent's name and
  version;
- ``auth`` (when a token is given): no token and a wrong token are 401 problems;
- ``create``: 201 with a non-empty ``sessionId``;
- ``turn`` and ``second turn``: 200 runs that decode, with valid status, UUID step and
  tool ids, known stop reasons, and ``turns`` counting 1 then 2 (accumulated runs). A
  turn that suspends on approvals (``in_progress`` with ``pendingApprovals``) is decided
  through ``/approvals``: every pending call rejected (``--approve``: approved), again
  while it suspends, up to :data:`MAX_DECISIONS` rounds; the run it ends with is the
  turn's run, which the later checks use. The line counts the pending calls decided;
  the tool calls it counts are those of the turn's run once decided;
- ``attach``: ``GET`` returns the same accumulated run;
- ``delta`` (when ``/health`` lists the capability): ``GET ?since=`` the first turn's
  settled turns answers a delta that, applied to the first turn's run, gives the run of
  the second (:func:`~evalport.protocol.apply_delta`);
- ``content parts`` (when ``/health`` lists ``content-parts``): a third turn with a text
  part and a small inline PNG is a 200 run whose ``userParts`` record both for that turn,
  the image with its media type, byte count and sha256 (and, if the server kept them,
  its bytes); an image part without its ``mediaType`` is a 422 problem naming
  ``$.parts[0]``;
- ``malformed JSON`` (400), ``invalid body`` (422 with field errors), ``unknown session``
  (404): each an RFC 9457 problem (``application/problem+json``, ``type``, ``title``,
  ``status`` equal to the HTTP status, no stack trace);
- ``approvals`` (when ``/health`` lists the capability): decisions posted while nothing
  is pending are a 409 ``not-suspended`` problem;
- ``delete``: 204, after which the session is a 404 problem.

Exit ``0`` when everything passed, ``1`` when a check failed, ``3`` when the server cannot
be reached or does not answer ``/health`` in time, ``2`` for usage errors.

Waits are bounded as in ``evalport run``: ``--timeout`` bounds each check (all its
requests together), ``--connect-timeout`` and ``--read-timeout`` each request. The token
is read as ``run`` reads it (``--token-env``, else ``EVALPORT_TOKEN`` when set), and a
refused token names the variable it came from, or says that none was sent.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import math
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import msgspec
from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    DEFAULT_TOKEN_ENV,
    DELTA_CAPABILITY,
    PROBLEM_CONTENT_TYPE,
    AgentRun,
    ProblemType,
    ProtocolError,
    RunDelta,
    RunStatus,
    StopReason,
    apply_delta,
    decode_answer,
    decode_run,
    settled_turns,
)

from .._config import ConfigError
from ._common import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, fail
from ._targets import read_token, token_refused, without_credentials

HELP = "check a server's protocol conformance"

MAX_DECISIONS = 10
REJECTION = "rejected by evalport check"


@dataclass(slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


class Unreachable(Exception):
    """The server could not be reached at all."""


class _Failed(Exception):
    pass


def _uuid_or_empty(value: str, where: str) -> None:
    if value:
        try:
            uuid.UUID(value)
        except ValueError:
            raise _Failed(f"{where} is {value!r}, not a UUID") from None


def _validate_run(run: AgentRun, turns: int) -> None:
    if run.turns != turns:
        raise _Failed(f"run.turns is {run.turns}, expected {turns} (runs are accumulated)")
    if run.status not in RunStatus.ALL:
        raise _Failed(f"run.status {run.status!r} is not one of {', '.join(RunStatus.ALL)}")
    for index, step in enumerate(run.steps):
        _uuid_or_empty(step.id, f"steps[{index}].id")
        for position, execution in enumerate(step.tool_executions):
            _uuid_or_empty(execution.id, f"steps[{index}].toolExecutions[{position}].id")
        if step.stop_signal and step.stop_signal.reason not in StopReason.ALL:
            raise _Failed(f"steps[{index}].stopSignal.reason {step.stop_signal.reason!r}")
    for index, record in enumerate(run.tools):
        _uuid_or_empty(record.id, f"tools[{index}].id")
    if run.stop_signal and run.stop_signal.reason not in StopReason.ALL:
        raise _Failed(f"stopSignal.reason {run.stop_signal.reason!r} is not a known reason")


def _problem(response: httpx.Response, status: int, kind: str | None = None) -> dict[str, Any]:
    if response.status_code != status:
        raise _Failed(f"HTTP {response.status_code}, expected {status}: {response.text[:200]}")
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith(PROBLEM_CONTENT_TYPE):
        raise _Failed(f"content-type {content_type!r}, expected {PROBLEM_CONTENT_TYPE}")
    if "Traceback" in response.text:
        raise _Failed("the problem body contains a stack trace")
    try:
        body = response.json()
    except ValueError:
        raise _Failed("the problem body is not JSON") from None
    if not isinstance(body, dict) or not {"type", "title", "status"} <= body.keys():
        raise _Failed(f"a problem needs type, title and status: {response.text[:200]}")
    if body["status"] != status:
        raise _Failed(f"problem status {body['status']} differs from HTTP {status}")
    if kind is not None and body["type"] != kind:
        raise _Failed(f"problem type {body['type']!r}, expected {kind!r}")
    return body


class _Checker:
    def __init__(
        self,
        client: httpx.AsyncClient,
        token: str | None,
        message: str,
        *,
        timeout: float | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        approve: bool = False,
    ) -> None:
        self.client = client
        self.token = token
        self.message = message
        self.timeout = timeout
        self.token_env = token_env
        self.approve = approve
        self.results: list[CheckResult] = []
        self.session_id: str | None = None
        self.run: AgentRun | None = None
        self.first: AgentRun | None = None  # the run of the first turn
        self.capabilities: set[str] = set()

    def headers(self, token: str | None = None) -> dict[str, str]:
        token = self.token if token is None else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def check(self, name: str, step: Any) -> bool:
        try:
            async with asyncio.timeout(self.timeout):
                detail = await step()
        except TimeoutError:
            if name == "health":
                raise Unreachable(f"no answer to GET /health within {self.timeout:g} s") from None
            self.results.append(CheckResult(name, False, f"no answer within {self.timeout:g} s"))
            return False
        except _Failed as failure:
            self.results.append(CheckResult(name, False, str(failure)))
            return False
        except (httpx.HTTPError, ProtocolError) as error:
            self.results.append(CheckResult(name, False, f"{type(error).__name__}: {error}"))
            return False
        self.results.append(CheckResult(name, True, detail or ""))
        return True

    async def health(self) -> str:
        try:
            response = await self.client.get("health", headers=self.headers())
        except httpx.TransportError as error:
            raise Unreachable(f"{type(error).__name__}: {error}") from None
        if response.status_code in (401, 403):
            raise _Failed(
                f"HTTP {response.status_code}: "
                + token_refused(
                    without_credentials(str(self.client.base_url)),
                    self.token_env,
                    bool(self.token),
                )
            )
        if response.status_code != 200:
            raise _Failed(f"HTTP {response.status_code}: {response.text[:200]}")
        body = response.json()
        if not isinstance(body, dict) or body.get("status") != "ok":
            raise _Failed(f'expected {{"status": "ok", ...}}, got {response.text[:200]}')
        if body.get("protocol") != "1":
            raise _Failed(f"protocol is {body.get('protocol')!r}, expected '1'")
        agent = body.get("agent")
        if not isinstance(agent, dict) or not all(
            isinstance(agent.get(key), str) for key in ("name", "version")
        ):
            raise _Failed("agent must carry a name and a version")
        capabilities = body.get("capabilities")
        self.capabilities = set(capabilities) if isinstance(capabilities, list) else set()
        return f"{agent['name']} {agent['version']}"

    async def auth(self) -> str:
        url = "evals/sessions"
        missing = await self.client.post(url, json={})
        if missing.status_code < 400:
            raise _Failed(
                f"HTTP {missing.status_code} without a token, although ${self.token_env} holds "
                "one: the server serves without auth (or does not check it)"
            )
        _problem(missing, 401, ProblemType.UNAUTHORIZED)
        wrong = await self.client.post(url, json={}, headers=self.headers("wrong-" + "x" * 16))
        _problem(wrong, 401, ProblemType.UNAUTHORIZED)
        return "no token and a wrong token are refused"

    async def create(self) -> str:
        body = {"caseId": "evalport-check", "description": "protocol conformance check"}
        response = await self.client.post("evals/sessions", json=body, headers=self.headers())
        if response.status_code != 201:
            raise _Failed(f"HTTP {response.status_code}, expected 201: {response.text[:200]}")
        session_id = response.json().get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise _Failed("sessionId must be a non-empty string")
        self.session_id = session_id
        return session_id

    def _session_url(self, session_id: str | None = None) -> str:
        return "evals/sessions/" + quote(session_id or self.session_id or "", safe="")

    async def turn(self, number: int) -> str:
        response = await self.client.post(
            self._session_url() + "/turns", json={"message": self.message}, headers=self.headers()
        )
        if response.status_code != 200:
            raise _Failed(f"HTTP {response.status_code}, expected 200: {response.text[:200]}")
        run = decode_run(response.content)
        _validate_run(run, number)
        run, decided = await self._decide(run, number)
        self.run = run
        if number == 1:
            self.first = run
        summary = f"status {run.status}, {len(run.steps)} steps, {len(run.tools)} tool calls"
        if decided:
            verdict = "approved" if self.approve else "rejected"
            summary += f"; {decided} pending call(s) {verdict}"
        return summary

    async def _decide(self, run: AgentRun, number: int) -> tuple[AgentRun, int]:
        """Answer a suspended turn's pending calls until it ends; returns the run and count."""
        decided = 0
        for _ in range(MAX_DECISIONS):
            if run.status != RunStatus.IN_PROGRESS or not run.pending_approvals:
                return run, decided
            answer: dict[str, Any] = (
                {"decision": "approve"}
                if self.approve
                else {"decision": "reject", "reason": REJECTION}
            )
            decisions = {pending.call_id: answer for pending in run.pending_approvals}
            response = await self.client.post(
                self._session_url() + "/approvals",
                json={"decisions": decisions},
                headers=self.headers(),
            )
            if response.status_code != 200:
                raise _Failed(
                    f"deciding {len(decisions)} pending call(s): HTTP {response.status_code}, "
                    f"expected 200: {response.text[:200]}"
                )
            decided += len(decisions)
            run = decode_run(response.content)
            _validate_run(run, number)
        if run.pending_approvals:
            raise _Failed(f"the turn still suspends after {MAX_DECISIONS} rounds of decisions")
        return run, decided

    async def attach(self) -> str:
        response = await self.client.get(self._session_url(), headers=self.headers())
        if response.status_code != 200:
            raise _Failed(f"HTTP {response.status_code}, expected 200: {response.text[:200]}")
        run = decode_run(response.content)
        _validate_run(run, 2)
        if self.run is not None and msgspec.to_builtins(run) != msgspec.to_builtins(self.run):
            raise _Failed("the attached run differs from the run of the last turn")
        return "same accumulated run"

    async def delta(self) -> str:
        first, last = self.first, self.run
        assert first is not None and last is not None  # (the turns passed)
        since = settled_turns(first)
        url = f"{self._session_url()}?since={since}"
        response = await self.client.get(url, headers=self.headers())
        if response.status_code != 200:
            raise _Failed(f"HTTP {response.status_code}, expected 200: {response.text[:200]}")
        answer = decode_answer(response.content)
        if not isinstance(answer, RunDelta):
            raise _Failed(f"/health lists 'delta' but ?since={since} answered the whole run")
        try:
            run = apply_delta(first, answer)
        except ProtocolError as error:
            raise _Failed(str(error)) from None
        if msgspec.to_builtins(run) != msgspec.to_builtins(last):
            raise _Failed("the first turn's run with the delta differs from the second's")
        return f"since={since}: {len(response.content)} bytes, reassembled run equal"

    async def malformed(self) -> str:
        response = await self.client.post(
            self._session_url() + "/turns",
            content=b'{"message": ',
            headers={**self.headers(), "Content-Type": "application/json"},
        )
        _problem(response, 400, ProblemType.MALFORMED_JSON)
        return "400 problem"

    async def invalid(self) -> str:
        response = await self.client.post(
            self._session_url() + "/turns", json={"msg": 1}, headers=self.headers()
        )
        body = _problem(response, 422, ProblemType.INVALID_BODY)
        if not body.get("errors"):
            raise _Failed("a 422 problem should list the invalid fields in errors")
        return "422 problem naming " + ", ".join(str(e.get("path")) for e in body["errors"])

    async def unknown(self) -> str:
        response = await self.client.post(
            self._session_url("no-such-session-" + uuid.uuid4().hex) + "/turns",
            json={"message": "hi"},
            headers=self.headers(),
        )
        _problem(response, 404, ProblemType.SESSION_NOT_FOUND)
        return "404 problem"

    async def content_parts(self) -> str:
        url = self._session_url() + "/turns"
        image = {"type": "image", "mediaType": "image/png", "data": _b64(CHECK_PNG)}
        body = {"message": self.message, "parts": [image]}
        response = await self.client.post(url, json=body, headers=self.headers())
        if response.status_code != 200:
            raise _Failed(f"HTTP {response.status_code}, expected 200: {response.text[:200]}")
        run = decode_run(response.content)
        _validate_run(run, 3)
        recorded = [part for part in run.user_parts or () if part.turn == 3]
        if [part.type for part in recorded] != ["text", "image"]:
            raise _Failed(f"userParts of turn 3 should be text, image: {recorded!r}"[:300])
        png = recorded[1]
        if png.media_type != "image/png" or png.size != len(CHECK_PNG):
            raise _Failed(f"the image part is recorded as {png.media_type}, {png.size} bytes")
        if png.sha256 != hashlib.sha256(CHECK_PNG).hexdigest() or png.data not in (None, CHECK_PNG):
            raise _Failed("the image part's sha256 or bytes differ from those sent")
        self.run, _ = await self._decide(run, 3)
        bad = {"parts": [{"type": "image", "data": _b64(CHECK_PNG)}]}
        refused = await self.client.post(url, json=bad, headers=self.headers())
        problem = _problem(refused, 422, ProblemType.INVALID_BODY)
        if "$.parts[0]" not in [error.get("path") for error in problem.get("errors") or []]:
            raise _Failed("a part without its mediaType should be a 422 naming $.parts[0]")
        return "an inline image recorded with its sha256; a bad part is a 422 naming it"

    async def approvals(self) -> str:
        decisions = {"decisions": {"evalport-check": {"decision": "approve"}}}
        response = await self.client.post(
            self._session_url() + "/approvals", json=decisions, headers=self.headers()
        )
        _problem(response, 409, ProblemType.NOT_SUSPENDED)
        return "409 problem: nothing is waiting for approval"

    async def delete(self) -> str:
        response = await self.client.delete(self._session_url(), headers=self.headers())
        if response.status_code != 204:
            raise _Failed(f"HTTP {response.status_code}, expected 204: {response.text[:200]}")
        after = await self.client.get(self._session_url(), headers=self.headers())
        _problem(after, 404, ProblemType.SESSION_NOT_FOUND)
        return "204, then 404"

    async def run_all(self) -> list[CheckResult]:
        if not await self.check("health", self.health):
            return self.results
        if self.token:
            await self.check("auth", self.auth)
        if await self.check("create", self.create):
            if await self.check("turn", lambda: self.turn(1)):
                await self.check("second turn", lambda: self.turn(2))
                await self.check("attach", self.attach)
                if DELTA_CAPABILITY in self.capabilities:
                    await self.check("delta", self.delta)
                if CONTENT_PARTS_CAPABILITY in self.capabilities:
                    await self.check("content parts", self.content_parts)
            await self.check("malformed JSON", self.malformed)
            await self.check("invalid body", self.invalid)
            await self.check("unknown session", self.unknown)
            if "approvals" in self.capabilities:
                await self.check("approvals", self.approvals)
            await self.check("delete", self.delete)
        return self.results


# A 1x1 PNG: what the content parts check sends inline.
CHECK_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGNgAAAAAgABSK+kcQAAAABJRU5ErkJggg=="
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


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
    async with httpx.AsyncClient(base_url=base, transport=transport, timeout=limits) as client:
        checker = _Checker(
            client, token, message, timeout=timeout, token_env=token_env, approve=approve
        )
        return await checker.run_all()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL", help="base URL where the protocol is mounted")
    parser.add_argument("--token-env", metavar="VAR", help="environment variable with the token")
    parser.add_argument("--message", default="Hello from evalport check", help="turn message")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds per check (default 30)"
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds to connect, each request (default 5)",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        metavar="S",
        help="seconds to wait for each answer (default: --timeout)",
    )
    parser.add_argument(
        "--approve",
        action="store_true",
        help="approve the calls a turn suspends on (default: reject them)",
    )


def main(args: argparse.Namespace) -> int:
    url = without_credentials(args.url)
    for name in ("timeout", "connect_timeout", "read_timeout"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            option = "--" + name.replace("_", "-")
            return fail("check", f"{option} must be a positive number of seconds, got {value}")
    try:
        token, token_env = read_token(args.token_env)
    except ConfigError as error:
        return fail("check", str(error))
    try:
        results = asyncio.run(
            check_server(
                args.url,
                token=token,
                message=args.message,
                timeout=args.timeout,
                connect_timeout=args.connect_timeout,
                read_timeout=args.read_timeout,
                token_env=token_env,
                approve=args.approve,
            )
        )
    except Unreachable as error:
        reason = without_credentials(str(error))
        return fail("check", f"{url} is unreachable: {reason}", EXIT_UNREACHABLE)
    for result in results:
        detail = without_credentials(result.detail)
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name}: {detail}")
    failed = [result for result in results if not result.ok]
    print(f"{len(results) - len(failed)} of {len(results)} checks passed")
    return EXIT_FAILED if failed else EXIT_OK
