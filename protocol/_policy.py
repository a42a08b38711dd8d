"""Trace policies: what of a run's payloads stays readable, and what becomes a digest.

:meth:`TracePolicy.apply` never changes the run it is given; a redacted run shares parts
with it, so treat redacted runs as read-only. Rules: see ARCHITECTURE.md,
"Trace policy and digests".
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import msgspec

from ._digest import DEFAULT_PREVIEW_BYTES, compact_json, digest, is_digest, matches_digest
from ._models import AgentRun, Message, Step, StopReason, StopSignal, UserPart

_DIGEST_TEXT_PREFIX: Final = '{"hash":"sha256:'
_TOOL_CALL_PARTS: Final = frozenset(("tool_use", "tool_call", "function_call"))
_TOOL_RESULT_PARTS: Final = frozenset(("tool_result", "function_call_output"))
_BINARY_KEYS: Final = frozenset(("data", "base64", "file_data", "image_data"))
_URL_KEYS: Final = frozenset(("url", "image_url", "file_url"))


def _digest_of_text(text: str) -> dict[str, Any] | None:
    if not text.startswith(_DIGEST_TEXT_PREFIX):
        return None
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return value if is_digest(value) else None


def digest_text(text: str, preview_bytes: int = DEFAULT_PREVIEW_BYTES) -> str:
    """A line of error text as the compact JSON of its digest (a digest line is kept)."""
    if _digest_of_text(text) is not None:
        return text
    return compact_json(digest(text, preview_bytes)).decode()


def matches_digest_text(value: str, recorded: str) -> bool:
    """Whether the plain text ``value`` is what the line ``recorded`` holds."""
    recorded_digest = _digest_of_text(recorded)
    if recorded_digest is None:
        return value == recorded
    return matches_digest(value, recorded_digest)


@dataclass(frozen=True, slots=True)
class TracePolicy:
    """Which payloads of a run stay verbatim; everything else is digested.

    Build one with :meth:`safe` (the default) or :meth:`verbatim`; refine it with
    :meth:`allowing`.
    """

    verbatim_payloads: bool = False
    allowed_tools: frozenset[str] = field(default_factory=frozenset)
    allowed_argument_keys: frozenset[str] = field(default_factory=frozenset)
    preview_bytes: int = DEFAULT_PREVIEW_BYTES

    def __post_init__(self) -> None:
        if self.preview_bytes < 0:
            raise ValueError(f"preview_bytes must be >= 0, got {self.preview_bytes}")

    @classmethod
    def safe(
        cls,
        *,
        allow_tools: Iterable[str] = (),
        allow_argument_keys: Iterable[str] = (),
        preview_bytes: int = DEFAULT_PREVIEW_BYTES,
    ) -> TracePolicy:
        """Digest every payload except the allow-listed ones (the default everywhere)."""
        return cls(
            allowed_tools=frozenset(allow_tools),
            allowed_argument_keys=frozenset(allow_argument_keys),
            preview_bytes=preview_bytes,
        )

    @classmethod
    def verbatim(cls) -> TracePolicy:
        """Keep every payload verbatim. An explicit opt-in: runs may then hold secrets."""
        return cls(verbatim_payloads=True)

    def allowing(
        self, *, tools: Iterable[str] = (), argument_keys: Iterable[str] = ()
    ) -> TracePolicy:
        """This policy with more tools and argument keys kept verbatim."""
        return TracePolicy(
            verbatim_payloads=self.verbatim_payloads,
            allowed_tools=self.allowed_tools | frozenset(tools),
            allowed_argument_keys=self.allowed_argument_keys | frozenset(argument_keys),
            preview_bytes=self.preview_bytes,
        )

    def describe(self) -> str:
        """A short stable text for reports and provenance."""
        if self.verbatim_payloads:
            return "verbatim"
        parts = []
        if self.allowed_tools:
            parts.append("tools=" + ",".join(sorted(self.allowed_tools)))
        if self.allowed_argument_keys:
            parts.append("keys=" + ",".join(sorted(self.allowed_argument_keys)))
        if self.preview_bytes != DEFAULT_PREVIEW_BYTES:
            parts.append(f"preview={self.preview_bytes}")
        return "safe(" + ";".join(parts) + ")"

    def redact_value(self, value: Any, tool: str | None = None) -> Any:
        """One payload value (a result, an error) of ``tool`` as this policy keeps it."""
        if self.verbatim_payloads or (tool is not None and tool in self.allowed_tools):
            return value
        return _Redactor(self).value(value)

    def redact_error(self, error: Any, tool: str | None = None) -> Any:
        """A tool's error (a text or a value) of ``tool`` as this policy keeps it; ``None``
        and an empty text stay as they are."""
        if self.verbatim_payloads or (tool is not None and tool in self.allowed_tools):
            return error
        return _Redactor(self).error(error)

    def redact_arguments(self, arguments: Any, tool: str | None = None) -> Any:
        """An argument map of ``tool`` as this policy keeps it (keys stay in clear)."""
        if self.verbatim_payloads:
            return arguments
        return _Redactor(self).arguments(arguments, tool)

    def apply(self, run: AgentRun, *, in_place: bool = False) -> AgentRun:
        """The run as this policy lets it be seen.

        ``run`` itself is left unchanged unless ``in_place`` is set, which skips copying
        for a caller that owns the run alone (a client's freshly decoded response).
        """
        if self.verbatim_payloads:
            return run
        if not in_place:
            run = _copy_run(run)
        _Redactor(self).run(run)
        return run


_copy = msgspec.structs.replace


def _copy_message(message: Message) -> Message:
    if message.tool_calls:
        return _copy(message, tool_calls=[_copy(call) for call in message.tool_calls])
    return _copy(message)


def _copy_step(step: Step) -> Step:
    return _copy(
        step,
        output_messages=[_copy_message(message) for message in step.output_messages],
        requested_tool_calls=[_copy(call) for call in step.requested_tool_calls],
        tool_executions=[_copy(execution) for execution in step.tool_executions],
        errors=[_copy(info) for info in step.errors],
    )


def _copy_run(run: AgentRun) -> AgentRun:
    """A copy of every part of ``run`` a redaction may change; the rest is shared."""
    return _copy(
        run,
        steps=[_copy_step(step) for step in run.steps],
        tools=[_copy(record, tool_call=_copy(record.tool_call)) for record in run.tools],
        pending_approvals=[_copy(pending) for pending in run.pending_approvals],
        pending_interrupts=[_copy(pending) for pending in run.pending_interrupts],
        interrupts=[_copy(interrupt) for interrupt in run.interrupts],
        error_details=[_copy(info) for info in run.error_details],
        user_parts=[_copy(part) for part in run.user_parts] if run.user_parts else run.user_parts,
    )


class _Redactor:
    """One application of a safe policy to a run it may change in place."""

    def __init__(self, policy: TracePolicy) -> None:
        self.tools = policy.allowed_tools
        self.keys = policy.allowed_argument_keys
        self.preview = policy.preview_bytes
        # A payload recurs in a run (call, execution, message, ``tools``): this memo makes
        # decode + redact 1.6x faster (benchmarks/redaction.py's turn, 2026-12-03).
        self.digests: dict[bytes, Any] = {}

    def value(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            key = compact_json(value)
        except (TypeError, ValueError):
            return digest(value, self.preview)
        found = self.digests.get(key)
        if found is None:
            found = self.digests[key] = digest(value, self.preview)
        return found

    def error(self, value: Any) -> Any:
        return value if value is None or value == "" else self.value(value)

    def arguments(self, arguments: Any, tool: str | None) -> Any:
        """An argument map with each value digested (but allow-listed keys')."""
        if tool in self.tools:
            return arguments
        if type(arguments) is not dict:
            # A JSON string nobody parsed: its keys are unknown, so digest it whole.
            return self.value(arguments) if arguments else arguments
        if is_digest(arguments):
            return arguments
        return {
            name: item if name in self.keys else self.value(item)
            for name, item in arguments.items()
        }

    def stop_signal(self, signal: StopSignal) -> StopSignal:
        """An ``error`` stop signal's message is the error's text: it is digested too."""
        if signal.reason != StopReason.ERROR or not signal.message:
            return signal
        return _copy(signal, message=digest_text(signal.message, self.preview))

    def content_part(self, part: Any, tool_names: dict[str, str]) -> Any:
        """A content block of a message: tool-use and tool-result blocks are redacted."""
        if type(part) is not dict:
            return part
        kind = part.get("type")
        if kind in _TOOL_CALL_PARTS:
            name = part.get("name")
            return {
                key: (self.arguments(item, name) if key in ("input", "arguments") else item)
                for key, item in part.items()
            }
        if kind in _TOOL_RESULT_PARTS:
            call_id = str(part.get("tool_use_id", part.get("call_id")))
            if tool_names.get(call_id, "") in self.tools:
                return part
            return {
                key: (self.value(item) if key in ("content", "output") else item)
                for key, item in part.items()
            }
        return self.binary_block(part)

    def binary_block(self, part: dict[str, Any]) -> dict[str, Any]:
        """A content block with bytes in it (an image, a file) keeps only their digest."""
        changed: dict[str, Any] = {}
        for key, item in part.items():
            if type(item) is str and ((key in _BINARY_KEYS and item) or _is_data_url(item)):
                changed[key] = self.value(item)
            elif type(item) is str and key in _URL_KEYS:
                changed[key] = safe_url(item)
            elif type(item) is dict:
                changed[key] = self.binary_block(item)
        return {**part, **changed} if changed else part

    def messages(self, step: Step) -> None:
        names: dict[str, str] | None = None
        for message in step.output_messages:
            for call in message.tool_calls or ():
                call.arguments = self.arguments(call.arguments, call.name)
            content = message.content
            if content is None or content == "":
                continue
            if message.role == "tool" or message.tool_call_id is not None:
                name = message.name
                if name is None:
                    names = names if names is not None else _tool_names(step)
                    name = names.get(message.tool_call_id or "")
                if name is None or name not in self.tools:
                    message.content = self.value(content)
                    message.sync_instructor()
            elif type(content) is list:
                names = names if names is not None else _tool_names(step)
                message.content = [self.content_part(part, names) for part in content]

    def tool_run(self, name: str, record: Any, call: Any) -> None:
        """A tool execution (``call`` is itself) or a run's tool record (``call`` its
        ``tool_call``): arguments, result and error."""
        if name in self.tools:
            return
        call.arguments = self.arguments(call.arguments, None)
        record.result = self.value(record.result)
        record.error = self.error(record.error)

    def run(self, run: AgentRun) -> None:
        for step in run.steps:
            for call in step.requested_tool_calls:
                call.arguments = self.arguments(call.arguments, call.name)
            for execution in step.tool_executions:
                self.tool_run(execution.name, execution, execution)
            self.messages(step)
            for info in step.errors:
                info.message = self.error(info.message)
            if step.stop_signal is not None:
                step.stop_signal = self.stop_signal(step.stop_signal)
        for record in run.tools:
            self.tool_run(record.tool_call.name, record, record.tool_call)
        for pending in run.pending_approvals:
            pending.arguments = self.arguments(pending.arguments, pending.tool)
        for asked in run.pending_interrupts:
            asked.payload = self.arguments(asked.payload, None)
        for interrupt in run.interrupts:
            interrupt.payload = self.arguments(interrupt.payload, None)
            interrupt.answer = self.arguments(interrupt.answer, None)
        for info in run.error_details:
            info.message = self.error(info.message)
        if run.stop_signal is not None:
            run.stop_signal = self.stop_signal(run.stop_signal)
        for part in run.user_parts or ():
            _drop_bytes(part)
        if run.errors:
            run.errors = "\n".join(
                digest_text(line, self.preview) if line else line for line in run.errors.split("\n")
            )


def _drop_bytes(part: UserPart) -> None:
    """A recorded part without its bytes, keeping their sha256 and count."""
    data = part.data
    if data is None and part.url is not None and _is_data_url(part.url):
        data = part.url.encode()  # not base64: the URL's text is its content
        part.url = None
    if part.url is not None:
        part.url = safe_url(part.url)
    if data is not None:
        if part.sha256 is None:
            part.sha256 = hashlib.sha256(data).hexdigest()
            part.size = len(data)
        part.data = None


def _is_data_url(text: str) -> bool:
    """Whether ``text`` is a ``data:`` URL (the scheme in any case, spaces before it)."""
    return text.lstrip()[:5].lower() == "data:"


def safe_url(url: str) -> str:
    """A URL with a host (``scheme://``) with its query, fragment and user info replaced by
    a digest of the whole URL (ARCHITECTURE.md, "Trace policy and digests"); any other
    text is returned as it is."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
        if not parts.scheme or not host:
            raise ValueError("no scheme or no host")
    except ValueError:  # a malformed URL keeps nothing but its digest
        return "sha256:" + hashlib.sha256(url.encode()).hexdigest()
    if "@" not in parts.netloc and not parts.fragment:
        query = parts.query
        if not query or (query.startswith("sha256=") and len(query) == 71):
            return url
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    query = "sha256=" + hashlib.sha256(url.encode()).hexdigest()
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _tool_names(step: Step) -> dict[str, str]:
    """Call id -> tool name, so a tool-result message can be matched to its tool."""
    names: dict[str, str] = {}
    for call in step.requested_tool_calls:
        if call.id:
            names[call.id] = call.name
    for execution in step.tool_executions:
        if execution.tool_call_id:
            names[execution.tool_call_id] = execution.name
    for message in step.output_messages:
        for call in message.tool_calls or ():
            if call.id:
                names[call.id] = call.name
    return names
