"""Reports of a run: console progress, the JSON run folder, JUnit XML, Markdown, HTML.

Every reporter implements some hooks of :class:`Reporter`; custom reporters are named in
configuration (``reporters = ["package.module:Name"]``) and loaded with
:func:`load_reporter`. All of them read the same :class:`RunSummary`, so the numbers agree
across reports. ``evalport merge`` and the run browser ``evalport view`` live here too.
"""

from ._analytics import Analytics, Durations, TrialSummary
from ._base import Reporter, Reporters, RunPlan, RunReport, agent_label, load_reporter
from ._compare import TTFT_FLOOR, TTFT_TOLERANCE, Change, Comparison, Slower, compare, merge
from ._console import ConsoleReporter
from ._files import JsonReporter, RunFolderReporter, load_summary, write_run_folder
from ._html import HtmlReporter, html_report
from ._junit import JUnitReporter, junit_xml
from ._markdown import MarkdownReporter, markdown_summary
from ._summary import CaseSummary, Provenance, RunSummary, TagSummary, summarize, summarize_case

__all__ = [
    "TTFT_FLOOR",
    "TTFT_TOLERANCE",
    "Analytics",
    "CaseSummary",
    "Change",
    "Comparison",
    "ConsoleReporter",
    "Durations",
    "HtmlReporter",
    "JUnitReporter",
    "JsonReporter",
    "MarkdownReporter",
    "Provenance",
    "Reporter",
    "Reporters",
    "RunFolderReporter",
    "RunPlan",
    "RunReport",
    "RunSummary",
    "Slower",
    "TagSummary",
    "TrialSummary",
    "agent_label",
    "compare",
    "html_report",
    "junit_xml",
    "load_reporter",
    "load_summary",
    "markdown_summary",
    "merge",
    "summarize",
    "summarize_case",
    "write_run_folder",
]
