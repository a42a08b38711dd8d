"""The standard ``OTEL_*`` variables, read as OpenTelemetry's SDK reads them: a
``_TRACES_`` one over its general one; what evalport cannot honour is a usage error, a
number it cannot read falls back to its default with a warning."""

from __future__ import annotations

import logging
import re
import shutil
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from evalport.protocol._otel import SERVER, SpanRecord
from evalport.protocol._otlp import STANDARD_VARIABLES, OtlpExporter, configured_endpoint
from support.otlp import collector, received_spans

AGENT = """
async def agent(message, history, ctx):
    ctx.model_step(content="ok", finish_reason="stop")
    return "ok"
"""

EVALS = """
from evalport.client import eval_case


@eval_case()
async def hello(ctx):
    await ctx.send("hi")
"""


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STANDARD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The arguments of ``evalport run`` over one case against a local agent."""
    (tmp_path / "settings_agent.py").write_text(AGENT)
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "hello_eval.py").write_text(EVALS)
    monkeypatch.syspath_prepend(str(tmp_path))
    evals, out = str(tmp_path / "evals"), str(tmp_path / "out")
    return ["run", evals, "--local", "settings_agent:agent", "--out", out, "-q"]


def _one_span() -> list[SpanRecord]:
    return [SpanRecord(1, 2, 0, "one", SERVER, 5, 10, {})]


def _wait_for(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_traces_endpoint_is_used_as_it_is_and_traces_headers_win(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from evalport.protocol._cli import main

    args = _project(tmp_path, monkeypatch)
    requests: list[dict[str, str]] = []
    with collector(requests=requests) as (url, bodies):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # not used
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{url}/otlp/spans")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=general,x-other=1")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=traces%20only")
        assert main(args) == 0
    assert {request["path"] for request in requests} == {"/otlp/spans"}  # no /v1/traces
    assert requests[0]["x-team"] == "traces only" and "x-other" not in requests[0]
    assert "evalport.trial hello_eval::hello" in {span["name"] for span in received_spans(bodies)}


def test_an_endpoint_is_a_base_url_and_an_option_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    assert configured_endpoint(None) is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert configured_endpoint(None) == ("http://collector:4318/", False)
    assert OtlpExporter("http://collector:4318/", "svc").url == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/in")
    assert configured_endpoint(None) == ("http://traces:4318/in", True)
    assert configured_endpoint("http://option:4318") == ("http://option:4318", False)


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
def test_a_protocol_other_than_http_protobuf_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    variable: str,
) -> None:
    from evalport.protocol._cli import main

    args = _project(tmp_path, monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv(variable, "grpc")
    assert main([*args, "--otlp", "http://127.0.0.1:4317"]) == 2
    expected = f"{variable}=grpc is not supported: evalport sends http/protobuf only"
    assert expected in capsys.readouterr().err
    serve = ["serve", "nowhere:agent", "--insecure-no-auth", "--otlp", "http://127.0.0.1:4317"]
    assert main(serve) == 2
    assert expected in capsys.readouterr().err


def test_gzip_compression_is_sent_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    requests: list[dict[str, str]] = []
    with collector(requests=requests) as (url, bodies):
        exporter = OtlpExporter(url, "svc")
        exporter.add(_one_span())
        exporter.shutdown()
    assert requests[0]["content-encoding"] == "gzip"
    assert [span["name"] for span in received_spans(bodies)] == ["one"]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "zstd")
    with pytest.raises(ValueError, match=r"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION=zstd .* gzip"):
        OtlpExporter(url, "svc")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command makes the test certificate"
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
    names = ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    subprocess.run(
        [openssl, *request, "-keyout", str(key), "-out", str(cert), *names],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"]
)
def test_a_ca_file_lets_https_exports_through(
    monkeypatch: pytest.MonkeyPatch, certificate: tuple[Path, Path], variable: str
) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with collector(tls=tls) as (url, bodies):
        assert url.startswith("https://")
        untrusted = OtlpExporter(url, "svc")
        untrusted.add(_one_span())
        _wait_for(lambda: untrusted.dropped == 1)  # the certificate is not trusted
        untrusted.shutdown()
        monkeypatch.setenv(variable, str(cert))
        trusted = OtlpExporter(url, "svc")
        trusted.add(_one_span())
        trusted.shutdown()
    assert trusted.dropped == 0
    assert [span["name"] for span in received_spans(bodies)] == ["one"]
    monkeypatch.setenv(variable, str(cert.parent / "missing.pem"))
    with pytest.raises(ValueError, match=rf"{variable}=.*missing\.pem: not a readable CA file"):
        OtlpExporter(url, "svc")


def test_every_variable_read_is_listed_and_documented() -> None:
    root = Path(__file__).resolve().parents[2]
    modules = ("_otlp.py", "_sampling.py")
    source = "".join((root / "protocol" / name).read_text(encoding="utf-8") for name in modules)
    read = {name for name in re.findall(r"OTEL_[A-Z_]+", source) if not name.endswith("_")}
    assert read <= set(STANDARD_VARIABLES)
    docs = (root / "docs" / "tracing.md").read_text(encoding="utf-8")
    assert [name for name in STANDARD_VARIABLES if f"`{name}`" not in docs] == []


def test_a_client_certificate_answers_a_collector_that_asks_for_one(
    monkeypatch: pytest.MonkeyPatch, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: the collector trusts only this one
    tls.load_verify_locations(cert)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", str(cert))
    with collector(tls=tls) as (url, bodies):
        anonymous = OtlpExporter(url, "svc")
        anonymous.add(_one_span())
        _wait_for(lambda: anonymous.dropped == 1)
        anonymous.shutdown()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", str(cert))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", str(key))
        known = OtlpExporter(url, "svc")
        known.add(_one_span())
        known.shutdown()
    assert known.dropped == 0
    assert [span["name"] for span in received_spans(bodies)] == ["one"]


def test_sdk_disabled_runs_and_serves_untraced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalport.protocol._cli import main

    args = _project(tmp_path, monkeypatch)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "True")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")  # no exporter: never read
    with collector() as (url, bodies):
        assert main([*args, "--otlp", url]) == 0
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        assert main(args) == 0
    assert bodies == []
    err = capsys.readouterr().err
    assert err.count("evalport run: OTEL_SDK_DISABLED=true: trials are not traced") == 2
    serve = ["serve", "nowhere:agent", "--insecure-no-auth", "--otlp", "http://127.0.0.1:4318"]
    assert main(serve) == 2  # the agent cannot be loaded; --otlp was no error
    err = capsys.readouterr().err
    assert "evalport serve: OTEL_SDK_DISABLED=true: turns are not traced" in err
    assert "grpc" not in err
    monkeypatch.setenv("OTEL_SDK_DISABLED", "false")
    assert main(serve) == 2
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported" in capsys.readouterr().err


def test_the_queue_and_batch_variables_win_over_the_runs_own_sizes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from evalport.protocol._cli import main

    args = _project(tmp_path, monkeypatch)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")  # only a full batch or the end
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    with collector() as (url, bodies):
        assert main([*args, "--otlp", url]) == 0
        spans = received_spans(bodies)
        assert len(spans) >= 3  # the trial, its turn, the turn's step
        assert max(len(received_spans([body])) for body in bodies) == 2
        monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "1")  # the trial counts 2: dropped
        monkeypatch.delenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
        bodies.clear()
        assert main([*args, "--otlp", url]) == 0
    assert bodies == []


def test_a_full_batch_of_the_variables_size_wakes_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3")
    records = [SpanRecord(1, n + 1, 0, f"s{n}", SERVER, 5, 10, {}) for n in range(12)]
    with collector() as (url, bodies):
        exporter = OtlpExporter(url, "svc", queue=1000)  # the variable wins
        exporter.add(records[:2])
        time.sleep(0.3)
        assert bodies == []  # 2 of 3: the thread sleeps on
        exporter.add(records[2:3])
        _wait_for(lambda: len(bodies) == 1)  # 3: sent long before the minute's delay
        exporter.add(records[3:10])
        exporter.add(records[10:])  # 7 queued (or fewer, if sent): 2 more may not fit
        exporter.shutdown()
    assert all(len(received_spans([body])) <= 3 for body in bodies)
    assert len(received_spans(bodies)) + exporter.dropped == 12


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, "OTEL_BSP_MAX_QUEUE_SIZE=0 is not a positive number"),
        (
            {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "-4"},
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=-4 is not a positive number",
        ),
        ({"OTEL_BSP_SCHEDULE_DELAY": "0"}, "OTEL_BSP_SCHEDULE_DELAY=0 is not a positive number"),
        (
            {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "-1", "OTEL_EXPORTER_OTLP_TIMEOUT": "5"},
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=-1 is not a positive number",
        ),
        (
            {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4096"},
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=4096 is more than the 2048 spans the queue holds",
        ),
        (
            {"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "101"},
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=101 is more than the 100 spans the queue holds",
        ),
    ],
)
def test_a_number_evalport_cannot_honour_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], message: str
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=re.escape(message)):
        OtlpExporter("http://127.0.0.1:9", "svc")


def test_a_number_that_does_not_read_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "2.5k")
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", "soon")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "ten")
    with caplog.at_level(logging.WARNING, logger="evalport.tracing"):
        exporter = OtlpExporter("http://127.0.0.1:9", "svc", queue=5)
        exporter.shutdown()
    assert "OTEL_BSP_MAX_QUEUE_SIZE=2.5k is not a whole number: using 5, the default" in caplog.text
    assert "OTEL_BSP_EXPORT_TIMEOUT=soon is not a number: using 30000" in caplog.text
    assert "OTEL_EXPORTER_OTLP_TIMEOUT=ten is not a number: using 10" in caplog.text
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", "-1")  # read, used for nothing: no error
    OtlpExporter("http://127.0.0.1:9", "svc").shutdown()
