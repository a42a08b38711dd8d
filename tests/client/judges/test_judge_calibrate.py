"""Calibration: agreement metrics, labels files, and the CLI against the fake server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evalport.client.judges import FakeJudge, JudgeError
from evalport.client.judges._calibrate import (
    best_threshold,
    calibrate,
    cohen_kappa,
    load_labels,
    spearman,
)
from evalport.protocol._cli import main as evalport_main
from judge_fake_server import FakeChatServer, status, verdict


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_cohen_kappa_known_values() -> None:
    # 2x2 table a=20 b=5 c=10 d=15 (n=50): po=0.7, pe=0.5 -> kappa 0.4
    first = [True] * 25 + [False] * 25
    second = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(first, second) == pytest.approx(0.4)
    assert cohen_kappa([True, False], [True, False]) == 1.0
    assert cohen_kappa([True, True], [True, True]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)


def test_spearman_with_ties() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks with ties: x=[1,2.5,2.5,4], y=[1,2,3,4] -> rho = 0.9487
    assert spearman([0.1, 0.5, 0.5, 0.9], [0, 0.3, 0.6, 1]) == pytest.approx(0.9486833)
    assert spearman([1, 1, 1], [1, 2, 3]) is None


def test_best_threshold_separates_the_labels() -> None:
    scores = [0.1, 0.3, 0.4, 0.8, 0.9]
    human = [False, False, False, True, True]
    threshold, accuracy, kappa = best_threshold(scores, human)
    assert threshold == pytest.approx(0.6) and accuracy == 1.0 and kappa == 1.0


def test_load_labels_names_the_line_and_field(tmp_path: Path) -> None:
    good = _write(
        tmp_path / "ok.jsonl",
        [
            {"output": "Paris", "label": True, "kind": "correctness", "expected": "Paris"},
            {"output": "x", "label": 0.5, "criteria": "Is it short?"},
            {"output": "y", "label": 0},
        ],
    )
    examples = load_labels(good, default_criterion="Is it good?")
    assert [e.criterion.name for e in examples] == ["correctness", "custom", "custom"]
    assert examples[2].criterion.instructions == "Is it good?"
    bad_cases = [
        ([{"output": "a"}], "ok.jsonl:1: field 'label'"),
        ([{"output": "a", "label": 2}], "field 'label'"),
        ([{"label": 1}], "field 'output'"),
        ([{"output": "a", "label": 1, "kind": "nope"}], "field 'kind'"),
        ([{"output": "a", "label": 1, "kind": "correctness"}], "'expected' is required"),
        ([{"output": "a", "label": 1, "kind": "sql", "reference": " "}], "reference query"),
    ]
    for rows, message in bad_cases:
        with pytest.raises(ValueError, match=message):
            load_labels(_write(tmp_path / "ok.jsonl", rows), default_criterion="c")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        (tmp_path / "bad.jsonl").write_text('{"output": "a", "label": 1}\n{oops\n')
        load_labels(tmp_path / "bad.jsonl", default_criterion="c")
    with pytest.raises(ValueError, match="add a 'criteria' field or pass --criterion"):
        load_labels(_write(tmp_path / "ok.jsonl", [{"output": "a", "label": 1}]))


async def test_calibrate_reports_agreement_and_errors(tmp_path: Path) -> None:
    rows = [
        {"output": "a", "label": 1.0},
        {"output": "b", "label": 0.75},
        {"output": "c", "label": 0.25},
        {"output": "d", "label": 0.0},
        {"output": "e", "label": 1.0},
    ]
    examples = load_labels(_write(tmp_path / "l.jsonl", rows), default_criterion="good?")
    scores = {"a": 0.9, "b": 0.6, "c": 0.4, "d": 0.1}

    def answer(request):
        if request.output == "e":
            raise JudgeError("no verdict")
        return scores[request.output]

    report = await calibrate(FakeJudge(default=answer), examples, threshold=0.7)
    assert report.examples == 5 and report.judged == 4
    assert report.errors == ["line 5: JudgeError: no verdict"]
    assert report.accuracy == pytest.approx(0.75)  # b (0.6) fails at 0.7, human says pass
    assert report.graded and report.spearman == pytest.approx(1.0)
    assert report.best_threshold == pytest.approx(0.5) and report.best_kappa == 1.0


async def test_cli_calibrate_against_the_fake_server(
    chat_server: FakeChatServer, tmp_path: Path, capsys
) -> None:
    labels = _write(
        tmp_path / "labels.jsonl",
        [
            {"output": "Paris", "label": True, "kind": "correctness", "expected": "Paris"},
            {"output": "Lyon", "label": False, "kind": "correctness", "expected": "Paris"},
        ],
    )
    chat_server.reset(verdict(1.0), verdict(0.0))
    args = ["judge", "calibrate", str(labels), "--model", "m", "--base-url"]
    args += [chat_server.base_url, "--api-key-env", "", "--json", "--concurrency", "1"]
    code = await _in_thread(evalport_main, args)
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["accuracy"] == 1.0 and out["kappa"] == 1.0 and out["judged"] == 2
    assert out["input_tokens"] == 22
    assert "Paris" in chat_server.requests[0]["messages"][1]["content"]


async def test_cli_calibrate_exit_codes(
    chat_server: FakeChatServer, tmp_path: Path, capsys
) -> None:
    missing = ["judge", "calibrate", str(tmp_path / "none.jsonl"), "--model", "m"]
    assert await _in_thread(evalport_main, missing) == 2
    assert "none.jsonl" in capsys.readouterr().err
    labels = _write(tmp_path / "l.jsonl", [{"output": "a", "label": 1, "criteria": "ok?"}])
    chat_server.reset(status(401, "no"))
    args = ["judge", "calibrate", str(labels), "--model", "m", "--base-url"]
    args += [chat_server.base_url, "--api-key-env", ""]
    assert await _in_thread(evalport_main, args) == 1
    assert "answered 401" in capsys.readouterr().out


async def _in_thread(function, args):
    """The CLI runs its own event loop, so call it from a worker thread."""
    import asyncio

    return await asyncio.to_thread(function, args)
