"""Until the package is published, the README and Get started install from a clone; the
streaming guide is a page of its own in the nav; ``make docs-serve`` takes a port."""

from __future__ import annotations

import re
import subprocess

import yaml
from support.docs import ROOT

CLONE = "pip install -e '.[server,client]'"


def test_the_readme_and_get_started_install_from_a_clone() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "get-started.md"):
        text = page.read_text(encoding="utf-8")
        first = re.search(r"pip install [^\n`]+", text)
        assert first is not None and first.group(0).split("#")[0].strip() == CLONE, page.name


def test_streaming_has_a_page_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!", ""))
    pages = re.findall(r"([\w-]+\.md)", str(config["nav"]))
    assert "streaming.md" in pages
    text = (ROOT / "docs" / "streaming.md").read_text(encoding="utf-8")
    assert text.startswith("# Streaming")


def test_make_docs_serve_takes_a_port() -> None:
    done = subprocess.run(
        ["make", "-n", "docs-serve", "PORT=8123"], cwd=ROOT, capture_output=True, text=True
    )
    assert "8123" in done.stdout, done.stdout + done.stderr
