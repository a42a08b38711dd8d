"""Datasets, @eval_case expansion, discovery of eval files, class-based evaluators."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from evalport.client import (
    Case,
    Dataset,
    DatasetError,
    DuplicateCaseError,
    Verdict,
    cases_from,
    discover,
    eval_case,
    run_trial,
)
from fake_target import FakeTarget, shop_agent

ROWS = [{"id": "late parcel", "prompt": "Where is A1?"}, {"prompt": "refund A1 40"}]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "rows.json",
            '[{"id": "late parcel", "prompt": "Where is A1?"}, {"prompt": "refund A1 40"}]',
        ),
        (
            "rows.jsonl",
            '{"id": "late parcel", "prompt": "Where is A1?"}\n\n{"prompt": "refund A1 40"}\n',
        ),
        ("rows.yaml", "- id: late parcel\n  prompt: Where is A1?\n- prompt: refund A1 40\n"),
    ],
)
def test_every_format_loads_the_same_rows(tmp_path: Path, name: str, text: str) -> None:
    dataset = Dataset.load(write(tmp_path / name, text))
    assert [row.id for row in dataset] == ["late-parcel", "0001"]
    assert [row.to_dict() for row in dataset] == ROWS
    assert dataset[1].string("prompt") == "refund A1 40" and dataset[0].value("id") == "late parcel"


def test_dataset_errors_name_file_row_and_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"bad\.jsonl: line 2: invalid JSON"):
        Dataset.load(write(tmp_path / "bad.jsonl", '{"a": 1}\n{oops\n'))
    with pytest.raises(DatasetError, match="line 1: each line must be a JSON object"):
        Dataset.load(write(tmp_path / "list.jsonl", "[1]\n"))
    with pytest.raises(DatasetError, match="root must be a list"):
        Dataset.load(write(tmp_path / "obj.json", '{"a": 1}'))
    with pytest.raises(DatasetError, match="row 1 must be an object"):
        Dataset.load(write(tmp_path / "mixed.yaml", "- a: 1\n- just text\n"))
    with pytest.raises(DatasetError, match="invalid YAML"):
        Dataset.load(write(tmp_path / "broken.yaml", "- a: [1\n"))
    with pytest.raises(DatasetError, match="not found"):
        Dataset.load(tmp_path / "missing.json")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        Dataset.load(write(tmp_path / "rows.csv", "a,b\n"))
    with pytest.raises(DatasetError, match="rows 0 and 1 share the id 'x'"):
        Dataset.from_list([{"id": "x"}, {"id": "x"}])
    row = Dataset.from_list([{"n": 1}])[0]
    with pytest.raises(DatasetError, match="field 'n' must be a string"):
        row.string("n")
    with pytest.raises(KeyError, match="has no field 'm'"):
        row["m"]


def test_eval_case_bare_and_with_options() -> None:
    @eval_case
    async def plain(ctx) -> None:
        """Greets back."""

    @eval_case("refund: {prompt}", tags=["smoke"], timeout=5, dataset=ROWS, id="refunds")
    def rows(ctx, row) -> None: ...

    (case,) = cases_from(plain)
    assert case.id == "plain" and case.description == "Greets back." and case.is_async
    assert plain.__name__ == "plain"  # the function is returned unchanged
    expanded = cases_from(rows, prefix="suite::")
    assert [c.id for c in expanded] == ["suite::refunds[late-parcel]", "suite::refunds[0001]"]
    assert expanded[0].description == "refund: Where is A1?"
    assert expanded[1].tags == ("smoke",) and expanded[1].timeout == 5 and not expanded[1].is_async
    assert expanded[1].row is not None and expanded[1].row["prompt"] == "refund A1 40"
    with pytest.raises(TypeError, match="tags takes a list"):
        eval_case(tags="smoke")
    with pytest.raises(ValueError, match="timeout must be positive"):
        eval_case(timeout=0)
    with pytest.raises(TypeError, match="not marked"):
        cases_from(lambda ctx: None)


async def test_dataset_rows_reach_the_case_function() -> None:
    target = FakeTarget(shop_agent)

    @eval_case(
        dataset=[
            {"id": "hi", "message": "hello", "expect": "Hello"},
            {"id": "echo", "message": "ping", "expect": "You said: ping"},
        ]
    )
    async def replies(ctx, row) -> None:
        await ctx.send(row.string("message"))
        ctx.contains(row["expect"])

    results = [await run_trial(case, target) for case in cases_from(replies)]
    await target.aclose()
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.PASSED]
    assert [r.case_id for r in results] == ["replies[hi]", "replies[echo]"]


SUITE = {
    "support/refund_eval.py": """
        from evalport.client._core._cases import eval_case
        from helpers import GREETING

        @eval_case(tags=["smoke"])
        async def greets(ctx):
            await ctx.send("hello")
            ctx.contains(GREETING)

        @eval_case(dataset="amounts.yaml")
        async def refunds(ctx, row):
            await ctx.send(f"refund A1 {row['amount']}")
            ctx.called_tool("refund", {"amount": row["amount"]})

        def not_a_case(ctx):
            pass
    """,
    "support/helpers.py": 'GREETING = "Hello"\n',
    "support/amounts.yaml": "- id: small\n  amount: 10\n- id: medium\n  amount: 40\n",
    "eval_smoke.py": """
        from evalport.client._core._cases import eval_case
        from shared import shared_case  # defined elsewhere: not collected here

        @eval_case
        def echoes(ctx):
            ctx.send("ping")
            ctx.contains("ping")
    """,
    "broken_eval.py": "import no_such_module_anywhere\n",
    "bad_dataset_eval.py": """
        from evalport.client._core._cases import eval_case

        @eval_case(dataset="missing.json")
        async def uses_missing(ctx, row):
            pass
    """,
    "notes_evaluation.py": "raise RuntimeError('never imported')\n",
    "shared.py": "from evalport.client._core._cases import eval_case\n\n@eval_case\ndef shared_case(ctx):\n    pass\n",
    ".hidden/x_eval.py": "raise RuntimeError('never imported')\n",
}


def make_suite(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        write(root / name, text)


async def test_discovery_collects_ids_reports_broken_files_and_runs_the_rest(
    tmp_path: Path,
) -> None:
    make_suite(tmp_path, SUITE)
    cases, errors = discover(tmp_path)
    assert [c.id for c in cases] == [
        "eval_smoke::echoes",
        "support/refund_eval::greets",
        "support/refund_eval::refunds[small]",
        "support/refund_eval::refunds[medium]",
    ]
    assert sorted(Path(e.path).name for e in errors) == ["bad_dataset_eval.py", "broken_eval.py"]
    broken = next(e for e in errors if e.path.endswith("broken_eval.py"))
    assert broken.error_type == "ModuleNotFoundError" and "no_such_module_anywhere" in broken.error
    assert "broken_eval.py" in str(broken)
    assert cases[1].tags == ("smoke",) and cases[1].source.endswith("refund_eval.py:5")
    target = FakeTarget(shop_agent)
    results = [await run_trial(case, target) for case in cases]
    await target.aclose()
    assert [r.verdict for r in results] == [Verdict.PASSED] * 4, [r.error for r in results]


def test_discovering_a_single_file_and_stable_ids(tmp_path: Path) -> None:
    write(
        tmp_path / "deep" / "one_eval.py",
        SUITE["eval_smoke.py"].replace(
            "from shared import shared_case  # defined elsewhere: not collected here", ""
        ),
    )
    cases, errors = discover(tmp_path / "deep" / "one_eval.py")
    assert [c.id for c in cases] == ["one_eval::echoes"] and errors == []
    again, _ = discover(tmp_path)
    assert [c.id for c in again] == ["deep/one_eval::echoes"]
    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "nope")


def test_duplicate_ids_name_both_places(tmp_path: Path) -> None:
    write(
        tmp_path / "dup_eval.py",
        """
        from evalport.client._core._cases import eval_case

        @eval_case(id="same")
        def first(ctx):
            pass

        @eval_case(id="same")
        def second(ctx):
            pass
    """,
    )
    with pytest.raises(DuplicateCaseError) as raised:
        discover(tmp_path)
    message = str(raised.value)
    assert "'dup_eval::same'" in message
    assert "dup_eval.py:4" in message and "dup_eval.py:8" in message


def test_case_model_fields() -> None:
    case = Case(id="x", func=lambda ctx: None)
    assert case.arguments("ctx") == ("ctx",) and case.row is None and case.tags == ()
