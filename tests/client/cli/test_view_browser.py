"""``evalport view`` in a real Chromium (Debian's, driven by Playwright), over two real runs.

The viewer runs as a real process (uvicorn on a free loopback port) over a passing and a
regressed run of the example suite. One browser serves the whole module. Every page is
checked at 1280 px: no horizontal overflow, no console message of level warning or error,
no uncaught exception, and no request to anything but the viewer (others are aborted and
fail the test). Screenshots land in ``artifacts/screenshots/`` at the repository root
(git-ignored; ``$EVALPORT_ARTIFACTS`` moves them); the test prints where.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_support import ROOT, files_and_times, make_runs, viewing

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")

SHOTS = Path(os.environ.get("EVALPORT_ARTIFACTS") or ROOT / "artifacts") / "screenshots"
WIDTH = 1280
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    make_runs(folder)
    return folder


@pytest.fixture(scope="module")
def url(runs: Path) -> Iterator[str]:
    before = files_and_times(runs)
    with viewing(runs) as address:
        yield address
    assert files_and_times(runs) == before  # browsing wrote nothing


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


class Watched:
    """A page at 1280 px whose console, errors and requests are recorded."""

    def __init__(self, browser: Any, url: str) -> None:
        self.context = browser.new_context(viewport={"width": WIDTH, "height": 900})
        self.context.set_default_timeout(TIMEOUT_MS)
        self.problems: list[str] = []
        self.url = url

        def route(route: Any) -> None:
            if route.request.url.startswith(url + "/"):
                route.continue_()
            else:
                self.problems.append(f"request to {route.request.url}")
                route.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on(
            "console",
            lambda message: (
                message.type in ("error", "warning")
                and self.problems.append(f"console {message.type}: {message.text}")
            ),
        )
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))

    def check(self, shot: str) -> None:
        """No overflow, no problem so far; a full-page screenshot named ``shot``."""
        overflow = self.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{shot}: {overflow}px wider than the viewport"
        assert self.problems == []
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"view-{shot}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")

    def texts(self, selector: str) -> list[str]:
        return [text.strip() for text in self.page.locator(selector).all_inner_texts()]


@pytest.fixture
def watched(browser: Any, url: str) -> Iterator[Watched]:
    page = Watched(browser, url)
    yield page
    page.context.close()


def case_rows(page: Watched) -> list[tuple[str, str]]:
    rows = page.page.locator("main > table").first.locator("tr").all()[1:]
    return [
        (row.locator("td").nth(0).inner_text(), row.locator("td").nth(1).inner_text())
        for row in rows
    ]


def test_the_runs_list_shows_pass_rates_targets_and_dates(watched: Watched) -> None:
    watched.page.goto(watched.url + "/")
    rows = watched.texts("main table tr")[1:]
    assert rows[0].startswith("regressed") and rows[1].startswith("passing")  # newest first
    assert "56% (5/9)" in rows[0] and "100% (9/9)" in rows[1]
    assert "support_agent_regressed.py:agent" in rows[0] and "support-agent 1.0.0" in rows[0]
    assert rows[0].split("\t")[1].startswith("20")  # the start time
    watched.check("runs")


def test_open_a_run_and_filter_by_verdict_and_tag(watched: Watched) -> None:
    page = watched.page
    page.goto(watched.url + "/")
    page.get_by_role("link", name="regressed").click()
    assert page.locator("h1").inner_text() == "regressed"
    assert len(case_rows(watched)) == 9
    watched.check("run")

    page.get_by_label("verdict").select_option("failed")
    page.get_by_role("button", name="apply").click()
    failed = case_rows(watched)
    assert [case for case, _ in failed] == [
        "support_eval::order_status[shipped]",
        "support_eval::order_status[delivered]",
        "support_eval::order_status[processing]",
        "support_eval::receipt_status",
    ]
    assert {verdict for _, verdict in failed} == {"failed"}
    assert page.locator("details.case").count() == 4
    watched.check("run-failed")

    page.locator("details.case > summary").first.click()  # a case's trials, as the report shows
    opened = page.locator("details.case").first
    assert opened.locator(".msg.user").first.inner_text() == "user Hi, where is my order A1049?"
    assert "was never called" in opened.locator("table.assertions").first.inner_text()
    watched.check("run-case")

    page.get_by_label("verdict").select_option("")
    page.get_by_label("tag").select_option("refund")
    page.get_by_role("button", name="apply").click()
    refunds = [case for case, _ in case_rows(watched)]
    assert len(refunds) == 4 and "support_eval::small_refund" in refunds
    assert page.locator(".shown").inner_text() == "4 of 9 cases"

    page.get_by_label("verdict").select_option("failed")
    page.get_by_role("button", name="apply").click()
    assert page.locator("main").inner_text().count("no case matches these filters") == 1
    watched.check("run-failed-refund")


def test_search_finds_cases_by_their_transcripts(watched: Watched) -> None:
    page = watched.page
    page.goto(watched.url + "/run/regressed")
    page.get_by_role("searchbox").fill("DHL")  # said only by the agent, in one order's reply
    page.get_by_role("button", name="apply").click()
    assert [case for case, _ in case_rows(watched)] == [
        "support_eval::order_status[shipped]",
        "support_eval::receipt_status",  # the receipt's order is A1049, shipped with DHL
    ]
    hits = watched.texts(".hits code")
    assert hits and all("dhl" in hit.lower() for hit in hits)
    assert any(hit.startswith("agent:") for hit in hits)
    assert page.locator(".hits mark").first.inner_text() == "DHL"
    watched.check("run-search")


def test_compare_two_runs_puts_the_changed_cases_first_with_diffed_transcripts(
    watched: Watched,
) -> None:
    page = watched.page
    page.goto(watched.url + "/")
    assert page.get_by_label("base").input_value() == "passing"
    assert page.get_by_label("new").input_value() == "regressed"
    page.get_by_role("button", name="compare").click()
    changed = watched.texts("main > table.changes tr")[1:]  # the verdicts' table only
    assert len(changed) == 4 and all(row.startswith("regression") for row in changed)
    assert "order_status[shipped]" in changed[0]
    sections = page.locator("details.case")
    assert sections.count() == 9
    first = sections.first
    assert first.get_attribute("open") is not None  # changed cases open, the rest folded
    assert sections.nth(4).get_attribute("open") is None
    gone = [text for text in first.locator("td.gone").all_inner_texts()]
    came = [text for text in first.locator("td.came").all_inner_texts()]
    assert any("order_status" in line for line in gone)  # the tool call the regression dropped
    assert any(line.startswith("FAILED called_tool(order_status") for line in came)
    # a changed line is marked changed, never green: a regression's failure is no good news
    shades = first.locator("td.came").first.evaluate("c => getComputedStyle(c).backgroundColor")
    red, green, blue = (int(part) for part in shades[4:-1].split(","))
    assert not (green > red and green > blue), shades
    watched.check("compare")
