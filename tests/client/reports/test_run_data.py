"""RunData: a trial's run kept as JSON text reads like the builtins it replaced, and every
report path that writes runs gives the same bytes as before."""

import gc
import json

import msgspec
import pytest
from evalport.client import CaseResult, RunData, TrialResult
from evalport.client._core._results import enc_hook
from evalport.client.reports import summarize_case
from evalport.client.reports._files import write_json
from evalport.client.reports._summary import to_builtins, trial_tokens
from evalport.protocol import AgentRun, Usage


def a_run() -> AgentRun:
    return AgentRun(
        reply="done",
        status="completed",
        turns=2,
        user_messages=["hi", "refund A1"],
        usage=Usage(input=90, output=10),
    )


def test_reads_like_the_builtins_of_the_run():
    run = a_run()
    plain = msgspec.to_builtins(run)
    data = RunData.of(run)
    assert data == plain and plain == data and data == RunData.of(run)
    assert data["turns"] == 2 and data.get("userMessages") == ["hi", "refund A1"]
    assert data.get("missing") is None and "reply" in data and len(data) == len(plain)
    assert dict(data) == plain and list(data) == list(plain)
    assert data != {"turns": 2} and data != None  # noqa: E711 - equality with None is False
    with pytest.raises(TypeError):
        data["turns"] = 3  # type: ignore[index]
    assert repr(data).startswith("RunData({'reply': 'done'")


def test_usage_is_read_without_decoding_the_rest():
    data = RunData.of(a_run())
    assert data.usage()["input"] == 90
    assert data._data is None  # nothing else was decoded
    assert data["usage"]["output"] == 10 and data.usage()["output"] == 10


def test_results_are_invisible_to_the_collector():
    data = RunData.of(a_run())
    result = TrialResult(case_id="c", run=data)
    assert not gc.is_tracked(result)  # the result Structs are gc=False


def test_not_an_object_is_refused_on_read():
    with pytest.raises(TypeError, match="JSON object"):
        RunData(b"[1, 2]")["x"]


def test_tokens_from_run_data_and_from_a_plain_dict_agree():
    run = a_run()
    as_data = TrialResult(case_id="c", run=RunData.of(run))
    as_dict = TrialResult(case_id="c", run=msgspec.to_builtins(run))
    assert trial_tokens(as_data) == trial_tokens(as_dict) == 100
    assert trial_tokens(TrialResult(case_id="c", run=None)) == 0
    case = CaseResult(case_id="c", trials=[as_data])
    assert summarize_case(case).target_tokens == 100


def test_results_holding_runs_encode_like_before(tmp_path):
    run = a_run()
    before = TrialResult(case_id="c", run=msgspec.to_builtins(run))
    after = TrialResult(case_id="c", run=RunData.of(run))
    assert msgspec.json.encode(after, enc_hook=enc_hook) == msgspec.json.encode(before)
    assert to_builtins(CaseResult(case_id="c", trials=[after])) == to_builtins(
        CaseResult(case_id="c", trials=[before])
    )
    write_json(tmp_path / "before.json", before)
    write_json(tmp_path / "after.json", after)
    assert (tmp_path / "after.json").read_bytes() == (tmp_path / "before.json").read_bytes()
    assert json.loads((tmp_path / "after.json").read_text())["run"]["turns"] == 2
    with pytest.raises(NotImplementedError):
        enc_hook(object())
