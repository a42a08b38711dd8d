"""``evalport view`` in a real Chromium (Debian's, driven by Playwright) over two run
folders whose turns streamed: the run page's time to first token column and the compare
page's table of cases slower to first token render, at 1280 px, with no console message,
no uncaught exception and no request to anything but the viewer."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evalport.client.reports import write_run_folder
from first_token_data import DENIED, STREAMED, timed_report
from support.servers import free_port, running_process

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
EVALPORT = str(Path(sys.executable).with_name("evalport"))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    runs = tmp_path_factory.mktemp("timed")
    write_run_folder(timed_report(), runs / "base")
    write_run_folder(timed_report(scale=2.0), runs / "slower")  # refund_ok p95 0.42s -> 0.84s
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    command = [EVALPORT, "view", str(runs), "--port", str(port)]
    with running_process(command, health_url=address + "/", timeout=30):
        yield address


@pytest.fixture
def page(url: str) -> Iterator[Any]:
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(15_000)

        def route(route: Any) -> None:
            if route.request.url.startswith(url + "/"):
                route.continue_()
            else:
                problems.append(f"request to {route.request.url}")
                route.abort()

        context.route("**/*", route)
        opened = context.new_page()
        opened.on("console", lambda message: problems.append(f"console: {message.text}"))
        opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        yield opened
        overflow = opened.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0 and problems == []
        browser.close()


def _column(page: Any, head: str) -> list[str]:
    """The texts of one column of the cases table, by its heading."""
    table = page.locator("main > table").first
    heads = [text.strip() for text in table.locator("tr").first.locator("th").all_inner_texts()]
    at = heads.index(head)
    return [row.locator("td").nth(at).inner_text() for row in table.locator("tr").all()[1:]]


def test_the_run_page_shows_each_case_s_time_to_first_token(page: Any, url: str) -> None:
    page.goto(url + "/run/base")
    assert _column(page, "first token p50 / p95") == [
        "0.20s / 0.42s",
        "0.80s / 0.80s",
        "-",
        "-",
        "-",
    ]
    page.locator("details.case > summary").first.click()
    trials = page.locator("details.case").first.locator(".trial .muted").first.inner_text()
    assert trials.startswith("trial 0: 0.250s · first token 0.100s, 0.300s · session ")
    # filtered down to a case without one, the column stays, with a dash
    page.goto(url + "/run/base?verdict=error")
    assert _column(page, "first token p50 / p95") == ["-"]


def test_the_compare_page_lists_the_case_slower_to_first_token(page: Any, url: str) -> None:
    page.goto(url + "/compare?base=base&new=slower")
    assert page.locator("h2", has_text="Slower to first token").count() == 1
    rows = page.locator("table.slower tr").all_inner_texts()[1:]
    assert [row.split("\t") for row in rows] == [["slower", STREAMED, "0.42s", "0.84s", "+100%"]]
    assert DENIED not in "".join(rows)  # its time did not change
