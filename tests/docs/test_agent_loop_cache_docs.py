"""The configuration's rules and the CI page say the same about the agent-loop judge's
verdicts: they are cached in ``judge-cache`` (tests/client/judges/test_judge_loop_cache.py
shows they are). Issue 40 item 11."""

from __future__ import annotations

from pathlib import Path

import evalport.client._core._config as config

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_config_and_ci_page_agree_that_agent_loop_verdicts_are_cached() -> None:
    rules = " ".join((config.__doc__ or "").split())
    page = " ".join((DOCS / "ci.md").read_text().split())
    assert "not cached" not in rules
    assert "go into ``judge-cache`` as the single-call judge's do" in rules
    assert "Its verdicts go into `judge-cache` as the single-call judge's do" in page
