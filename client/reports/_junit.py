"""JUnit XML for CI: one ``testcase`` per case, its statistics as properties.

Rule: every text is written ``printable``, so agent text never makes the document one XML
cannot parse. See ARCHITECTURE.md, "JUnit XML".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from .._core import CaseResult, Verdict, printable
from ._base import Reporter, RunReport
from ._markdown import recorded_outputs
from ._summary import CaseSummary, RunSummary


def _split(case_id: str) -> tuple[str, str]:
    if "::" in case_id:
        module, _, name = case_id.partition("::")
        return module.removesuffix(".py").replace("/", ".").replace("\\", "."), name
    return "evalport", case_id


def _properties(parent: ET.Element, values: dict[str, object]) -> None:
    properties = ET.SubElement(parent, "properties")
    for name, value in values.items():
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=str(value))


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.4f}"


def _outputs(result: CaseResult | None) -> str:
    """``recorded output (×2): …`` lines of what the case's trials recorded, or ``""``."""
    if result is None:
        return ""
    shown, more = recorded_outputs(result)
    lines = [
        f"recorded output{f' (×{trials})' if trials > 1 else ''}: {text}" for text, trials in shown
    ]
    if more:
        lines.append(f"and {more} more distinct outputs")
    return "\n".join(lines)


def _testcase(
    suite: ET.Element, case: CaseSummary, strict: bool, result: CaseResult | None = None
) -> None:
    classname, name = _split(case.case_id)
    element = ET.SubElement(
        suite, "testcase", classname=classname, name=name, time=f"{case.duration:.3f}"
    )
    _properties(
        element,
        {
            "verdict": case.verdict,
            "passes": case.passes,
            "trials": case.trials,
            "required": case.required,
            "pass_rate": f"{case.passes / case.samples:.4f}" if case.samples else None,
            "required_pass_rate": case.pass_rate,
            "wilson_low": f"{case.wilson_low:.4f}",
            "wilson_high": f"{case.wilson_high:.4f}",
            "flaky": str(case.flaky).lower(),
            "cached_trials": case.cached_trials,
            "judge_mean": None if case.judge_mean is None else f"{case.judge_mean:.4f}",
            "first_token_p50": _seconds(case.first_token.p50),
            "first_token_p95": _seconds(case.first_token.p95),
            "tags": ",".join(case.tags) or None,
        },
    )
    outputs = _outputs(result)
    detail = "\n".join([*case.failures, *([outputs] if outputs else [])])
    summary = f"{case.passes}/{case.samples} trials passed (needed {case.required})"
    if case.verdict == Verdict.FAILED or (case.verdict == Verdict.SCORED and strict):
        ET.SubElement(element, "failure", message=summary, type=case.verdict).text = detail
    elif case.verdict == Verdict.ERROR:
        ET.SubElement(element, "error", message=case.error or summary, type="error").text = detail
    elif case.verdict == Verdict.SKIPPED:
        ET.SubElement(element, "skipped", message=case.error or "skipped")
    if outputs:
        ET.SubElement(element, "system-out").text = outputs


def junit_xml(summary: RunSummary, *, results: Sequence[CaseResult] = ()) -> bytes:
    """The JUnit XML document of a run; with the case ``results``, what each case recorded
    as its output."""
    strict = summary.provenance.strict
    counts = summary.counts
    failures = counts.get(Verdict.FAILED, 0) + (counts.get(Verdict.SCORED, 0) if strict else 0)
    suites = ET.Element("testsuites", name="evalport")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="evalport",
        tests=str(summary.total + len(summary.load_errors)),
        failures=str(failures),
        errors=str(counts.get(Verdict.ERROR, 0) + len(summary.load_errors)),
        skipped=str(counts.get(Verdict.SKIPPED, 0)),
        time=f"{summary.duration:.3f}",
        timestamp=summary.provenance.started_at,
    )
    provenance = summary.provenance
    _properties(
        suite,
        {
            "evalport_version": provenance.evalport_version,
            "git_sha": provenance.git_sha,
            "target": provenance.target.get("location"),
            "agent": "{}@{}".format(
                provenance.target.get("agent_name", "?"),
                provenance.target.get("agent_version", "?"),
            ),
            "trace_policy": provenance.trace_policy,
            "judge_model": provenance.judge_model,
            "repeat": provenance.repeat,
            "pass_rate": provenance.pass_rate,
            "cached_trials": summary.cached_trials,
        },
    )
    by_id = {result.case_id: result for result in results}
    for case in summary.cases:
        _testcase(suite, case, strict, by_id.get(case.case_id))
    for error in summary.load_errors:
        element = ET.SubElement(suite, "testcase", classname="evalport", name="load error")
        ET.SubElement(element, "error", message=error.splitlines()[0], type="load").text = error
    for element in suites.iter():
        if element.text:
            element.text = printable(element.text)
        for name, value in element.attrib.items():
            element.set(name, printable(value))
    ET.indent(suites)
    document: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


class JUnitReporter(Reporter):
    """Writes JUnit XML when the run finishes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def finish(self, report: RunReport) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(junit_xml(report.summary, results=report.results))
