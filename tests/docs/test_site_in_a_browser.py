"""The built documentation as a reader opens it, in real Chromium: from disk its links
lead to pages (not folder listings), and served as the README says, search finds pages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.servers import free_port, running_process

sync_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
SHOTS = Path(os.environ.get("EVALPORT_ARTIFACTS") or ROOT / "artifacts") / "screenshots"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        timeout=300,
    )
    return folder


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        opened = browser.new_page(viewport={"width": 1280, "height": 900})
        opened.set_default_timeout(TIMEOUT_MS)
        yield opened
        browser.close()


def test_opened_from_disk_a_link_leads_to_its_page(site: Path, page: Any) -> None:
    page.goto((site / "index.html").as_uri())
    page.click("nav.md-nav a:has-text('Write evals')")
    page.wait_for_load_state()
    assert page.url.endswith("/write-evals.html")
    assert page.locator("h1").first.inner_text().startswith("Write evals")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "docs-from-disk.png"))


def test_served_as_the_readme_says_search_finds_pages(site: Path, page: Any) -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make docs-serve" in readme
    port = free_port()
    served = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    url = f"http://127.0.0.1:{port}/"
    with running_process([*served, "--directory", str(site)], health_url=url):
        page.goto(url + "index.html")
        page.keyboard.press("/")
        page.keyboard.type("approval policy")
        results = page.locator(".md-search-result__item")
        results.first.wait_for()
        assert results.count() > 0
        page.screenshot(path=str(SHOTS / "docs-search.png"))
