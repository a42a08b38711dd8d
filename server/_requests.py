"""What the adapter reads of a request: its few headers, its body, its query; each decoded as
strictly as the protocol says (a bad one is a 4xx problem naming the field)."""

from __future__ import annotations

from typing import Final, TypeVar
from urllib.parse import parse_qs

from evalport.protocol import (
    CONTENT_PARTS_CAPABILITY,
    FieldError,
    ProblemType,
    RequestError,
    decode_request,
)
from starlette.types import Receive

from ._oversize import part_at_cut
from ._problems import HTTPProblem

T = TypeVar("T")
Headers = dict[bytes, str]

JSON: Final = "application/json"
MAX_KEY: Final = 255
WANTED: Final = frozenset(
    (
        b"accept",
        b"authorization",
        b"content-length",
        b"content-type",
        b"idempotency-key",
        b"last-event-id",
        b"traceparent",
    )
)


def headers_of(raw: list[tuple[bytes, bytes]]) -> Headers:
    """The few request headers the adapter reads, in one pass (first value wins)."""
    found: Headers = {}
    for name, value in raw:
        name = name.lower()
        if name in WANTED and name not in found:
            found[name] = value.decode("latin-1")
    return found


def idempotency_key(headers: Headers) -> str | None:
    key = headers.get(b"idempotency-key")
    if key is not None and not 0 < len(key) <= MAX_KEY:
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            f"The Idempotency-Key header must have 1 to {MAX_KEY} characters.",
            errors=[FieldError(path="header:Idempotency-Key", message="1 to 255 characters")],
        )
    return key


async def read_body(
    receive: Receive, headers: Headers, limit: int, *, parts: bool = False
) -> bytes:
    """The body, up to ``limit`` bytes, of a JSON ``Content-Type``; a turn's (``parts``) is
    read to the limit, so that its 413 names the part it was cut in."""
    declared = headers.get(b"content-length")
    if (
        not parts  # a turn's body is read to the limit, to name the part it is cut in
        and declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > limit
    ):
        raise too_large(limit)
    content_type = headers.get(b"content-type")
    if content_type is not None and content_type != JSON and not _is_json(content_type):
        raise HTTPProblem(
            ProblemType.UNSUPPORTED_MEDIA_TYPE,
            f"Send application/json, not {content_type.split(';')[0].strip()!r}.",
        )
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise HTTPProblem(ProblemType.MALFORMED_JSON, "The client went away mid-body.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            cut = b"".join([*chunks, chunk])[:limit] if parts else b""
            raise too_large(limit, part_at_cut(cut) if parts else None)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decoded(body: bytes, kind: type[T]) -> T:
    try:
        return decode_request(body, kind)
    except RequestError as error:
        errors = None
        if error.path:
            message = error.detail.removesuffix(f" at {error.path}").removesuffix(
                f" - at `{error.path}`"
            )
            errors = [FieldError(path=error.path, message=message)]
        raise HTTPProblem(error.problem_type, error.detail, errors=errors) from None


_MAX_SINCE: Final = 2**31 - 1


def query_of(query: bytes, known: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    """A request's query parameters; 422 naming any not in ``known`` (query parameters
    are decoded as strictly as bodies)."""
    parameters = parse_qs(query.decode("latin-1"), keep_blank_values=True)
    unknown = sorted(parameters.keys() - known)
    if unknown:
        allowed = (
            f"the only one is {', '.join(sorted(known))}" if known else "this route takes none"
        )
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            f"Unknown query parameter {unknown[0]!r}; {allowed}.",
            errors=[FieldError(path=f"query:{name}", message="unknown") for name in unknown],
        )
    return parameters


def since_of(query: bytes) -> int | None:
    """The ``since`` of a request's query string (``None`` without one); 422 unless it
    is one whole number from 0, or when the query holds any other parameter."""
    if not query:
        return None
    values = query_of(query, frozenset({"since"})).get("since")
    if values is None:
        return None
    text = values[0]
    well_formed = text.isascii() and text.isdigit() and len(text) <= len(str(_MAX_SINCE))
    if len(values) > 1 or not well_formed or int(text) > _MAX_SINCE:
        raise HTTPProblem(
            ProblemType.INVALID_BODY,
            "The query parameter since must be given once, as the number of settled turns "
            f"of the client's copy of the run (0 to {_MAX_SINCE}).",
            errors=[FieldError(path="query:since", message="a whole number from 0, once")],
        )
    return int(text)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON or (media.startswith("application/") and media.endswith("+json"))


def faults_disabled() -> HTTPProblem:
    return HTTPProblem(
        ProblemType.FAULTS_DISABLED,
        "This server does not inject tool faults; start it with `evalport serve "
        "--allow-faults` or build the adapter with `EvalAdapter(..., faults=True)`.",
        errors=[FieldError(path="$.faults", message="tool faults are disabled on this server")],
    )


def content_parts_unsupported() -> HTTPProblem:
    return HTTPProblem(
        ProblemType.CONTENT_PARTS_UNSUPPORTED,
        f"This server does not take content parts (the `{CONTENT_PARTS_CAPABILITY}` "
        "capability); send the turn as a plain `message`.",
        errors=[FieldError(path="$.parts", message="content parts are not supported here")],
    )


def too_large(limit: int, part: tuple[int, str | None] | None = None) -> HTTPProblem:
    if part is None:
        return HTTPProblem(ProblemType.PAYLOAD_TOO_LARGE, f"The body exceeds {limit} bytes.")
    index, kind = part
    named = f"part {index}" + (f" ({kind})" if kind else "")
    return HTTPProblem(
        ProblemType.PAYLOAD_TOO_LARGE,
        f"The body exceeds {limit} bytes, in {named}.",
        errors=[
            FieldError(
                path=f"$.parts[{index}]",
                message=f"the body passed {limit} bytes in this {kind or 'content'} part",
            )
        ],
    )
