"""Request and response bodies of the protocol routes (see ``openapi.yaml``).

Every request Struct is ``forbid_unknown_fields``: the server decodes requests strictly.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ._models import AgentRun

# Whole numbers that JSON may spell 2.0: decoded as numbers, made ints in __post_init__.
_Count = Annotated[float, Meta(ge=1, le=2**31 - 1, multiple_of=1)]  # turns, injections
_Seed = Annotated[float, Meta(ge=-(2**53 - 1), le=2**53 - 1, multiple_of=1)]  # exact as floats


class _Request(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Base of request bodies: strict."""


class _Response(msgspec.Struct, kw_only=True, rename="camel", gc=False):
    """Base of response bodies: unknown fields are ignored."""


class ToolFault(_Request):
    """A fault to inject into one tool's calls (evalport addition; rules in
    :mod:`evalport.protocol.runtime._faults`).

    Exactly one of ``error`` (the text of the exception the call raises) and ``result``
    (any JSON value, returned instead of running the tool; ``None`` is a result) is given;
    the other stays unset (left out on the wire). ``seed``, ``turns`` and ``times`` are
    whole numbers; JSON's ``2.0`` counts as ``2`` (they are ``int`` once decoded).
    """

    tool: Annotated[str, Meta(min_length=1)]
    error: Annotated[str, Meta(min_length=1)] | UnsetType = UNSET
    result: Any | UnsetType = UNSET
    rate: Annotated[float, Meta(ge=0, le=1)] = 1.0
    seed: _Seed | None = None
    turns: Annotated[list[_Count], Meta(min_length=1, max_length=1000)] | None = None
    times: _Count | None = None

    def __post_init__(self) -> None:
        # Decoding checks the annotated bounds first (naming the field's path); these
        # checks repeat them for faults built in Python, where nothing else would.
        if (self.error is UNSET) == (self.result is UNSET):
            given = "neither" if self.error is UNSET else "both"
            raise ValueError(f"a tool fault takes exactly one of error and result, not {given}")
        if not self.tool:
            raise ValueError("a tool fault needs the tool's name (tool)")
        if self.error is not UNSET and not self.error:
            raise ValueError("a tool fault's error text must not be empty")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"a tool fault's rate is between 0 and 1, not {self.rate}")
        if self.turns is not None:
            if not self.turns or not all(_whole(turn) and turn >= 1 for turn in self.turns):
                raise ValueError("a tool fault's turns lists turn numbers from 1")
            self.turns = [int(turn) for turn in self.turns]
        if self.times is not None:
            if not (_whole(self.times) and self.times >= 1):
                raise ValueError(f"a tool fault's times is a whole number from 1, not {self.times}")
            self.times = int(self.times)
        if self.seed is not None:
            if not _whole(self.seed):
                raise ValueError(f"a tool fault's seed is a whole number, not {self.seed}")
            self.seed = int(self.seed)


def _whole(number: float) -> bool:
    return isinstance(number, int) or (isinstance(number, float) and number.is_integer())


class CreateSessionRequest(_Request):
    """``POST /evals/sessions``. Every field is optional; Instructor sends nulls.

    ``faults`` (evalport addition) is left out on the wire unless set, so that a server
    that does not know it still accepts the request.
    """

    case_id: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    faults: Annotated[list[ToolFault], Meta(max_length=64)] | UnsetType | None = UNSET


CONTENT_PARTS_CAPABILITY: Final = "content-parts"
"""The ``/health`` capability of a server that takes :class:`TurnRequest` ``parts``."""

_Nonempty = Annotated[str, Meta(min_length=1)]


class TextPart(_Request, tag_field="type", tag="text"):
    """Text in a turn (evalport addition, ``content-parts``)."""

    text: str


class _Binary(_Request, tag_field="type"):
    """An image or a file: inline (``data``, raw bytes, base64 on the wire, with its
    ``media_type``) or by ``url``; exactly one of the two."""

    data: bytes | UnsetType = UNSET
    url: _Nonempty | UnsetType = UNSET
    media_type: _Nonempty | UnsetType = UNSET

    def __post_init__(self) -> None:
        kind = "an image" if isinstance(self, ImagePart) else "a file"
        if (self.data is UNSET) == (self.url is UNSET):
            given = "neither" if self.data is UNSET else "both"
            raise ValueError(f"{kind} part takes exactly one of data and url, not {given}")
        if self.data is not UNSET and not self.media_type:
            raise ValueError(f"{kind} part with inline data needs its mediaType")
        if self.url is not UNSET and not self.url:
            raise ValueError(f"{kind} part's url must not be empty")


class ImagePart(_Binary, tag="image"):
    """An image in a turn (evalport addition, ``content-parts``)."""


class FilePart(_Binary, tag="file"):
    """A document in a turn (evalport addition, ``content-parts``); ``name`` is its file
    name, when it has one."""

    name: _Nonempty | UnsetType = UNSET


ContentPart: TypeAlias = TextPart | ImagePart | FilePart
"""One part of a turn's content, tagged by ``type``."""


class TurnRequest(_Request):
    """``POST /evals/sessions/{id}/turns``.

    ``message`` alone is protocol 1.0's turn. ``parts`` (evalport addition, the
    ``content-parts`` capability) adds content parts; when both are given, ``message`` is
    the turn's first text part, before ``parts``. At least one is given.
    """

    message: str | UnsetType = UNSET
    parts: Annotated[list[ContentPart], Meta(min_length=1, max_length=64)] | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.message is UNSET and not self.parts:
            raise ValueError("a turn takes a message, or parts (at least one)")

    def content(self) -> list[ContentPart]:
        """The turn's parts in order: ``message`` (unless unset or empty) first."""
        parts: list[ContentPart] = list(self.parts) if self.parts else []
        if self.message:
            parts.insert(0, TextPart(text=self.message))
        return parts

    def text(self) -> str:
        """The turn's message text, as the agent receives it: ``message`` without parts,
        else every text part (``message`` first) joined by a newline."""
        if not self.parts:
            return "" if self.message is UNSET else self.message
        return "\n".join(part.text for part in self.content() if isinstance(part, TextPart))


class ApprovalDecision(_Request):
    """A decision on one pending tool call, or the answer to one pending interrupt
    (``decision="answer"`` with ``answer``, any JSON value; evalport addition, left out
    on the wire unless set, so that a 1.0 server still accepts a decision). ``answer``
    is required exactly when ``decision`` is ``"answer"`` (``null`` is an answer; a
    missing one is an error, never ``None``). A rejection's reason and an answer reach
    the agent."""

    decision: Literal["approve", "reject", "answer"]
    reason: str | None = None
    answer: Any | UnsetType = UNSET

    def __post_init__(self) -> None:
        if self.decision == "answer" and self.answer is UNSET:
            raise ValueError("an answer decision needs its answer (null is one)")
        if self.decision != "answer" and self.answer is not UNSET:
            raise ValueError(f"a {self.decision} decision takes no answer")


INTERRUPTS_CAPABILITY: Final = "interrupts"
"""The ``/health`` capability of a server whose agents may ask :class:`Interrupt`
questions, answered by an :class:`ApprovalDecision` of ``decision="answer"``."""


class ApprovalsRequest(_Request):
    """``POST /evals/sessions/{id}/approvals``: a decision for every pending call id."""

    decisions: dict[str, ApprovalDecision]


class AgentInfo(_Response):
    """Who answers: the agent's name and version, as the service declares them."""

    name: str = "agent"
    version: str = "0"


class LoopHold(_Response):
    """The longest time a turn held the server's event loop (evalport addition): while it
    did, the server answered nothing else. ``seconds`` is how long, ``at`` when it ended;
    ``session_id`` is absent where ``/health`` answers without a token."""

    turn: int
    seconds: float
    at: str
    session_id: str | msgspec.UnsetType = msgspec.UNSET


class Health(_Response):
    """``GET /health``. ``loopHeld`` (evalport addition) is absent until a turn holds the
    server's event loop longer than the server tolerates."""

    status: str = "ok"
    protocol: str = "1"
    agent: AgentInfo = msgspec.field(default_factory=AgentInfo)
    capabilities: list[str] = msgspec.field(default_factory=list)
    evalport_version: str | None = None  # the serving evalport's version, as --version says
    loop_held: LoopHold | msgspec.UnsetType = msgspec.UNSET
    # The tools the agent declares (evalport addition); absent when it declares none.
    tools: list[str] | msgspec.UnsetType = msgspec.UNSET


class CreateSessionResponse(_Response):
    """201 from ``POST /evals/sessions``."""

    session_id: str
    expires_at: str | None = None


class RunEnvelope(_Response):
    """200 from a turn, an attach or an approvals call: the accumulated run."""

    run: AgentRun


class RunDelta(_Response, kw_only=True):
    """What a run gained since the client's copy of it (evalport addition; the rules of
    the cut and of the reassembly are in :mod:`evalport.protocol._delta`).

    ``since`` is the base the client named (its settled turns); ``kept`` says, for each
    tail list of the run (by its wire name), how many of the base's items stay;
    ``lastStepId`` is the id of the last step that stays (``None`` when none does);
    ``run`` holds the tails of those lists and every other field of the run whole.
    """

    since: int
    kept: dict[str, int]
    last_step_id: str | None = None
    run: AgentRun


class DeltaEnvelope(_Response):
    """200 from a turn or an attach that asked for a delta (``?since=N``)."""

    delta: RunDelta


class FieldError(_Response):
    """One invalid field of a request: a JSON path (``$.message``) and what is wrong."""

    path: str
    message: str


class Problem(_Response, omit_defaults=True):
    """An RFC 9457 problem document (``application/problem+json``)."""

    type: str = "about:blank"
    title: str = ""
    status: int = 500
    detail: str | None = None
    instance: str | None = None
    errors: list[FieldError] | None = None
    retry_after: int | None = None
