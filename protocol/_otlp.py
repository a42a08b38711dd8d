"""Span records sent over OTLP/HTTP by a worker process: evalport's own exporter.

Rules:

- :class:`OtlpExporter` (the sink of ``evalport run --otlp`` and ``evalport serve
  --otlp``) starts one worker process, ``python -m evalport.protocol._otlp_worker``
  (:mod:`~._otlp_worker`, with this interpreter), and hands it each trial's or turn's
  spans as they end: the records drawn so far and the run's JSON still to draw
  (:class:`~._otel.Draw`), as one JSON frame, written to the worker's stdin by a thread
  of the exporter every :data:`TICK` while spans come (asleep otherwise). The worker
  draws, encodes (protobuf) and sends, so the traced process pays for none of it. It
  binds nothing and ends when its stdin does: at :meth:`OtlpExporter.shutdown`, or when
  the traced process dies.
- Spans wait in bounded queues: at most ``queue`` handovers waiting for the worker's
  stdin here, at most ``queue`` spans waiting for export in the worker, sent in batches
  of at most 512 every ``OTEL_BSP_SCHEDULE_DELAY`` ms (5,000 by default) or as soon as
  a batch is full. Spans that find a queue full, spans that cannot be drawn or encoded
  and spans of an export that failed (a collector that is down, a timeout, an answer
  that is not HTTP) are dropped; the worker reports each loss on its stdout, and the
  exporter adds it to :attr:`OtlpExporter.dropped` and logs it on ``evalport.tracing``.
  A handover not yet drawn counts as one span. Handing spans over never raises and
  never waits.
- A worker that cannot start or dies (killed, out of memory) costs no trial or turn
  anything: it is logged once on ``evalport.tracing``, and the spans it held and every
  span handed over after are dropped (those it held uncounted, the rest counted).
- Nothing waits for a collector but :meth:`OtlpExporter.shutdown` (called at exit,
  too): the worker sends what is queued within one export timeout in all, then reports
  whatever is still queued or in flight as dropped, so a collector that swallows packets
  delays an exit by that timeout at most (and a worker that does not end by then, plus
  :data:`GRACE`, is killed).
- The standard variables apply as OpenTelemetry's SDK reads them, a ``_TRACES_`` one over
  its general one, read and checked here, at construction: ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES``, headers (``key=value`` pairs separated by commas, values
  percent-decoded), the timeout (seconds, 10 by default), a CA file and a client
  certificate and key for ``https``, ``gzip`` compression, and the protocol, which must
  be ``http/protobuf`` (another is a ``ValueError`` naming it). A base URL (``--otlp``,
  ``OTEL_EXPORTER_OTLP_ENDPOINT``) gets ``/v1/traces`` appended; the URL of
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import IO, Any, Final

import msgspec

from ._otel import Draw, OpenSpan, SpanEvent, SpanRecord, root_record
from ._otlp_worker import LENGTH, Report, Settings, Spans, tls_context

logger = logging.getLogger("evalport.tracing")

QUEUE_SIZE: Final = 2048
"""Spans waiting for export at most (a server's default); more are dropped and counted."""
GRACE: Final = 5.0
"""Seconds a worker has past the export timeout to end at shutdown before it is killed."""
WORKER: Final = "evalport.protocol._otlp_worker"
TICK: Final = 0.05
"""Seconds between writes to the worker while spans are handed over."""
PIPE_SIZE: Final = 1 << 20
"""Bytes the pipe to the worker holds, where Linux lets it grow (a tick's handovers)."""


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for ``endpoint``: a base URL gets ``/v1/traces`` (as the
    standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` does); a URL ending in it is kept."""
    url = endpoint.rstrip("/")
    return url if url.endswith("/v1/traces") else url + "/v1/traces"


def _pairs(value: str) -> Iterator[tuple[str, str]]:
    for item in value.split(","):
        key, equals, text = item.partition("=")
        if equals and key.strip():
            yield key.strip(), urllib.parse.unquote(text.strip())


def resource_attributes(service: str) -> dict[str, Any]:
    """The resource of the exported spans: ``OTEL_RESOURCE_ATTRIBUTES``, then the service
    name (``OTEL_SERVICE_NAME`` over ``service``)."""
    attributes: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "evalport",
    }
    attributes.update(_pairs(os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")))
    attributes["service.name"] = os.environ.get("OTEL_SERVICE_NAME") or service
    return attributes


def _standard(name: str) -> tuple[str, str]:
    """The variable that sets ``name`` and its value: ``OTEL_EXPORTER_OTLP_TRACES_<name>``
    over ``OTEL_EXPORTER_OTLP_<name>`` (``""`` when neither is set)."""
    for variable in (f"OTEL_EXPORTER_OTLP_TRACES_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = os.environ.get(variable, "").strip()
        if value:
            return variable, value
    return f"OTEL_EXPORTER_OTLP_{name}", ""


STANDARD_VARIABLES: Final = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_BSP_SCHEDULE_DELAY",
)
"""Every environment variable the exporter reads (docs/tracing.md lists each)."""


def configured_endpoint(option: str | None) -> tuple[str, bool] | None:
    """Where spans go, and whether that URL is used as it is: ``option`` (``--otlp``, a
    base URL), else ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (as it is), else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL); ``None`` when none is set."""
    if option:
        return option, False
    exact = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if exact:
        return exact, True
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return (base, False) if base else None


def _seconds(default: float) -> float:
    """The export timeout: ``default`` unless a positive number of seconds is set."""
    try:
        value = float(_standard("TIMEOUT")[1] or default)
    except ValueError:
        return default
    return value if value > 0 else default


def _delay() -> float:
    try:
        return float(os.environ.get("OTEL_BSP_SCHEDULE_DELAY", "") or 5000.0) / 1000
    except ValueError:
        return 5.0


def _protocol() -> None:
    variable, value = _standard("PROTOCOL")
    if value and value != "http/protobuf":
        raise ValueError(
            f"{variable}={value} is not supported: evalport sends http/protobuf only; set "
            "it to http/protobuf (or unset it) and give the collector's OTLP/HTTP URL "
            "(port 4318 by default)"
        )


def _compression() -> bool:
    """Whether requests are gzipped."""
    variable, value = _standard("COMPRESSION")
    if value not in ("", "none", "gzip"):
        raise ValueError(f"{variable}={value} is not supported: use gzip or none")
    return value == "gzip"


def _tls() -> tuple[str, str, str]:
    """The CA file, client certificate and key the certificate variables name (``""``
    for each not set), checked here: the worker process reads them again."""
    ca_variable, ca = _standard("CERTIFICATE")
    cert_variable, cert = _standard("CLIENT_CERTIFICATE")
    key = _standard("CLIENT_KEY")[1]
    if ca:
        try:
            ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(f"{ca_variable}={ca}: not a readable CA file ({error})") from None
    if cert:
        try:
            tls_context("", cert, key)
        except (OSError, ssl.SSLError) as error:
            raise ValueError(
                f"{cert_variable}={cert}: not a readable certificate and key ({error})"
            ) from None
    return ca, cert, key


_FRAME: Final = msgspec.json.Encoder(enc_hook=str)  # values JSON cannot carry: as text


def _clean(value: Any) -> Any:
    """``value`` with text UTF-8 cannot carry (a lone surrogate) made ``?``."""
    if isinstance(value, str):
        return value.encode(errors="replace").decode()
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {_clean(key): _clean(item) for key, item in value.items()}
    return value


def _cleaned(record: SpanRecord) -> SpanRecord:
    events = [
        SpanEvent(_clean(event.name), event.time, _clean(event.attributes))
        for event in record.events
    ]
    return msgspec.structs.replace(
        record, name=_clean(record.name), attributes=_clean(record.attributes), events=events
    )


def _frame(spans: Spans) -> bytes:
    try:
        body = _FRAME.encode(spans)
    except UnicodeEncodeError:  # rare: the slow way, text cleaned first
        spans = Spans([_cleaned(record) for record in spans.records], spans.draw)
        body = _FRAME.encode(spans)
    return LENGTH.pack(len(body)) + body


class OtlpExporter:
    """The OTLP/HTTP sink of :mod:`evalport.protocol._otel` (see the rules)."""

    def __init__(
        self,
        endpoint: str,
        service: str,
        *,
        queue: int = QUEUE_SIZE,
        scope: str = "evalport",
        exact: bool = False,
    ) -> None:
        """``endpoint``: a base URL (``/v1/traces`` appended) or, ``exact``, the whole
        traces URL. ``ValueError`` for a URL that is not http(s) or a standard variable
        evalport cannot honour."""
        self.url = endpoint.strip() if exact else traces_url(endpoint)
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"{endpoint!r} is not an http:// or https:// URL")
        _protocol()
        compressed = _compression()
        ca, cert, key = _tls()
        headers = {"Content-Type": "application/x-protobuf"}
        headers.update(_pairs(_standard("HEADERS")[1]))
        if compressed:
            headers["Content-Encoding"] = "gzip"
        self._timeout = _seconds(10.0)
        settings = Settings(
            self.url,
            headers,
            compressed,
            self._timeout,
            _delay(),
            resource_attributes(service),
            scope,
            queue,
            ca,
            cert,
            key,
        )
        self.dropped = 0
        """Spans dropped so far, here or in the worker (see the rules)."""
        self.pid: int | None = None
        """The worker process's id (``None`` if it could not start)."""
        self._queue_size = queue
        self._pending: collections.deque[tuple[bytes, int]] = collections.deque()
        self._overflow = 0
        self._awake = False
        self._closed = False
        self._dead = False  # the worker could not start or died: every span is dropped
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()  # set at shutdown: the tick under way ends at once
        self._pending.append((_frame_of(settings), 0))  # written as soon as the writer runs
        self._awake = True
        self._wake.set()
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", WORKER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
        except OSError as error:
            self._process = None
            self._died(f"the trace worker process could not start ({error})")
        else:
            self.pid = self._process.pid
            if sys.platform == "linux" and self._process.stdin is not None:
                import fcntl

                with contextlib.suppress(OSError):  # a limit on pipe sizes: keep the default
                    fcntl.fcntl(self._process.stdin, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self._writer = threading.Thread(target=self._write, name="evalport-otlp", daemon=True)
        self._reader = threading.Thread(
            target=self._read, name="evalport-otlp-reports", daemon=True
        )
        self._writer.start()
        self._reader.start()
        atexit.register(self.shutdown)

    # the sink

    def begin(
        self, name: str, kind: int, traceparent: str | None, attributes: dict[str, Any]
    ) -> OpenSpan:
        return OpenSpan(*root_record(name, kind, traceparent, attributes))

    def current(self, span: OpenSpan) -> None:
        return None  # no live span: nothing to make current

    def finish(
        self, span: OpenSpan, children: list[SpanRecord], material: Draw | None = None
    ) -> None:
        if span.sampled:
            records = [span.record, *children] if children else [span.record]
            self._hand(Spans(records, material), len(records) + (material is not None))

    # the queue

    def add(self, records: list[SpanRecord]) -> None:
        """Hand ``records`` over for export (or drop them, counted); never raises."""
        self._hand(Spans(records), len(records))

    def _hand(self, spans: Spans, count: int) -> None:
        try:
            frame = _frame(spans)
        except Exception as error:  # a value JSON cannot carry (enc_hook=str failed)
            logger.debug("spans could not be handed over: %r", error)
            self._lost(count, "a span could not be encoded: dropped")
            return
        if self._closed or self._dead:
            self._lost(count, "the exporter was shut down: dropped", log=not self._dead)
        elif len(self._pending) >= self._queue_size:
            with self._lock:
                self._overflow += count
        else:
            self._pending.append((frame, count))
            if not self._awake:  # one wake-up per burst, not per handover
                self._awake = True
                self._wake.set()

    def shutdown(self) -> None:
        """Let the worker send what is queued within one export timeout, then stop it (the
        exporter takes no more spans); what it could not send is counted as dropped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.shutdown)
        deadline = time.monotonic() + self._timeout + GRACE
        self._stop.set()
        self._wake.set()
        self._writer.join(max(0.0, deadline - time.monotonic()))
        process = self._process
        if process is not None:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self._died(f"the trace worker did not end within {self._timeout + GRACE:g} s")
        self._reader.join(GRACE)

    # the worker

    def _write(self) -> None:
        """Write what is handed over to the worker's stdin, every :data:`TICK` seconds
        while handovers come (asleep otherwise); close it once shut down."""
        process = self._process
        stdin: IO[bytes] | None = process.stdin if process is not None else None
        while True:
            self._wake.wait()
            while True:
                # a wake-up per handover costs each trial a thread switch, and short ticks
                # cost GIL handoffs (each 2x the rest of a trial's tracing in
                # benchmarks/runner.py workload 4): one write per TICK
                self._stop.wait(TICK)
                frames, count = [], 0
                while self._pending:
                    frame, spans = self._pending.popleft()
                    frames.append(frame)
                    count += spans
                if self._overflow:
                    with self._lock:
                        overflow, self._overflow = self._overflow, 0
                    self._lost(overflow, "the trace queue was full: dropped")
                if frames:
                    self._send(stdin, frames, count)
                if self._closed and not self._pending:
                    if stdin is not None:
                        with contextlib.suppress(OSError):
                            stdin.close()  # end of input: the worker sends what it has, ends
                    return
                if not frames:  # a tick with nothing: asleep until the next handover
                    self._awake = False
                    self._wake.clear()
                    if not self._pending:  # else one came meanwhile: go on
                        break
                    self._awake = True

    def _send(self, stdin: IO[bytes] | None, frames: list[bytes], count: int) -> None:
        if stdin is None or self._dead:
            self._lost(count, "the trace worker is gone: dropped", log=False)
            return
        try:
            stdin.write(b"".join(frames))
            stdin.flush()
        except (OSError, ValueError):  # a broken pipe: the worker died
            self._lost(count, "the trace worker is gone: dropped", log=False)
            self._died_unexpectedly()

    def _read(self) -> None:
        """Log and count what the worker reports; notice when it ends."""
        process = self._process
        if process is None or process.stdout is None:
            return
        decode = msgspec.json.Decoder(Report).decode
        with process.stdout:
            for line in process.stdout:
                try:
                    report = decode(line)
                except msgspec.DecodeError:
                    continue
                if report.count:
                    self._lost(report.count, report.why)
                else:
                    logger.warning("%s", report.why)
        if not self._closed:
            self._died_unexpectedly()

    def _died_unexpectedly(self) -> None:
        process = self._process
        code = process.poll() if process is not None else None
        if code is None and process is not None:
            try:
                code = process.wait(1)
            except subprocess.TimeoutExpired:
                code = None
        self._died(f"the trace worker process (pid {self.pid}) ended (exit code {code})")

    def _died(self, what: str) -> None:
        with self._lock:
            if self._dead:
                return
            self._dead = True
        logger.warning(
            "%s: the spans it held were lost, and spans from now on are dropped (counted)", what
        )
        left = sum(count for _, count in self._pending)
        self._pending.clear()
        if left:
            self._lost(left, "the trace worker is gone: dropped", log=False)

    def _lost(self, count: int, why: str, *, log: bool = True) -> None:
        with self._lock:
            self.dropped += count
            total = self.dropped
        if log:
            logger.warning("%s %d span(s); %d dropped so far", why, count, total)


def _frame_of(settings: Settings) -> bytes:
    body = _FRAME.encode(settings)
    return LENGTH.pack(len(body)) + body
