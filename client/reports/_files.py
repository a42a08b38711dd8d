"""JSON artifacts: the run folder, the ``--json`` summary file, and reading them back. What
is read back is decoded leniently, bounded in size, and every error names its file.
See ARCHITECTURE.md, "Reporters and run folders".
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from pathlib import Path
from typing import TextIO

import msgspec
from evalport.protocol import ProtocolError, decode_run

from .._core import CaseResult, ConfigError, RunData, enc_hook
from ._base import Reporter, RunReport
from ._summary import RunSummary

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

MAX_FILE_BYTES = 1 << 30
"""The largest results file read back (1 GiB)."""


class _Trace(msgspec.Struct):
    """The part of a trial file read back: its run, decoded later as the client decodes
    an agent's answer."""

    run: msgspec.Raw = msgspec.Raw(b"null")


_TRACE = msgspec.json.Decoder(_Trace)


def case_slug(case_id: str) -> str:
    """A folder name for a case: readable, filesystem-safe, unique per id."""
    readable = _UNSAFE.sub("_", case_id).strip("._")[:60] or "case"
    return f"{readable}-{hashlib.sha256(case_id.encode()).hexdigest()[:8]}"


def _indented(value: object) -> bytes:
    """``value`` (a Struct or plain data) as indented JSON, with a final newline."""
    return msgspec.json.format(msgspec.json.encode(value, enc_hook=enc_hook), indent=2) + b"\n"


def write_json(path: Path, value: object) -> None:
    """Write ``value`` as indented JSON, creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_indented(value))


def write_run_folder(report: RunReport, folder: Path) -> Path:
    """Write the whole run folder; returns it. A ``cases/`` folder left by an earlier run
    in the same place is replaced, so traces of different runs never mix."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder / "cases", ignore_errors=True)
    write_json(folder / "summary.json", report.summary)
    encoder = msgspec.json.Encoder()
    with (folder / "results.jsonl").open("wb") as lines:
        for result in report.results:
            light = msgspec.structs.replace(
                result,
                trials=[msgspec.structs.replace(trial, run=None) for trial in result.trials],
            )
            lines.write(encoder.encode(light) + b"\n")
    for result in report.results:
        _write_case(folder / "cases" / case_slug(result.case_id), result)
    return folder


def _write_case(folder: Path, result: CaseResult) -> None:
    judges = []
    for trial in result.trials:
        write_json(
            folder / f"trial-{trial.trial}.json",
            {
                "caseId": result.case_id,
                "trial": trial.trial,
                "verdict": trial.verdict,
                "cached": trial.cached,
                "sessionId": trial.session_id,
                "error": trial.error,
                "errorType": trial.error_type,
                "traceback": trial.traceback,
                "assertions": trial.assertions,
                "logs": trial.logs,
                "output": trial.output,
                "run": trial.run.raw if isinstance(trial.run, RunData) else trial.run,
            },
        )
        judges.append({"trial": trial.trial, "judges": trial.judges})
    write_json(folder / "judges.json", judges)


class RunFolderReporter(Reporter):
    """Writes the run folder when the run finishes."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def finish(self, report: RunReport) -> None:
        write_run_folder(report, self.folder)


class JsonReporter(Reporter):
    """Writes the run summary (``summary.json``'s content) to one file, or to ``stream``
    (``--json -`` passes stdout) when no path is given."""

    def __init__(self, path: str | Path | None = None, *, stream: TextIO | None = None) -> None:
        if (path is None) == (stream is None):
            raise ValueError("JsonReporter takes a path or a stream, exactly one")
        self.path = None if path is None else Path(path)
        self.stream = stream

    def finish(self, report: RunReport) -> None:
        if self.path is not None:
            write_json(self.path, report.summary)
        elif self.stream is not None:
            self.stream.write(_indented(report.summary).decode())
            self.stream.flush()


def _read(file: Path, within: Path | None) -> bytes:
    """The bytes of a results file: a regular file of at most :data:`MAX_FILE_BYTES`, inside
    ``within`` when given."""
    if within is not None and not file.resolve().is_relative_to(within.resolve()):
        raise ConfigError(f"{file} leads outside {within}: not read")
    try:
        with open(os.open(file, os.O_RDONLY | os.O_NONBLOCK), "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise ConfigError(f"{file}: not a regular file: not read")
            data = stream.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"{file}: cannot read results: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{file}: larger than {MAX_FILE_BYTES:,} bytes: not read")
    return data


def load_summary(path: str | Path, *, within: Path | None = None) -> RunSummary:
    """Read a summary written by ``--json`` or a run folder (its ``summary.json``); with
    ``within``, only from there."""
    file = Path(path)
    if file.is_dir():
        file = file / "summary.json"
    try:
        return msgspec.json.decode(_read(file, within), type=RunSummary)
    except msgspec.DecodeError as error:
        raise ConfigError(
            f"{file}: not an evalport results file ({error}); "
            "pass the file written by --json or a run folder"
        ) from None


def load_run_folder(folder: str | Path, *, within: Path | None = None) -> RunReport:
    """A run folder read back: its summary, and each case's result from ``results.jsonl``
    with each trial's run from its trace file. Reads only; names the file in errors; with
    ``within``, reads nothing from elsewhere."""
    folder = Path(folder)
    summary = load_summary(folder, within=within)
    lines = folder / "results.jsonl"
    data = _read(lines, within)
    decoder = msgspec.json.Decoder(CaseResult)
    results: list[CaseResult] = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            results.append(decoder.decode(line))
        except msgspec.DecodeError as error:
            raise ConfigError(f"{lines}:{number}: not a case result ({error})") from None
    for result in results:
        for trial in result.trials:
            trace = folder / "cases" / case_slug(result.case_id) / f"trial-{trial.trial}.json"
            if not trace.exists():
                continue
            try:
                saved = _TRACE.decode(_read(trace, within))
            except msgspec.DecodeError as error:
                raise ConfigError(f"{trace}: not a trial trace ({error})") from None
            if bytes(saved.run) == b"null":
                continue
            try:
                trial.run = RunData.of(decode_run(bytes(saved.run)))
            except ProtocolError as error:
                raise ConfigError(f"{trace}: its run is unreadable ({error})") from None
    return RunReport(summary=summary, results=results)
