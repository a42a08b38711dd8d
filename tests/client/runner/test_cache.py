import msgspec
from evalport.client import RunCache, Runner, RunOptions, TargetIdentity, Verdict
from evalport.protocol import ApprovalDecision
from runner_memory import MemoryTarget, SimpleCase, simple_trial


def cached_runner(target, tmp_path, *, fresh=False, repeat=1):
    cache = RunCache(tmp_path / "cache", fresh=fresh)
    return Runner(target, RunOptions(repeat=repeat), cache=cache, trial_function=simple_trial)


async def test_second_run_is_answered_from_the_recording(tmp_path):
    cases = [SimpleCase(id="a", messages=["hi", "more"]), SimpleCase(id="b", messages=["x"])]
    first_target = MemoryTarget()
    first = await cached_runner(first_target, tmp_path, repeat=2).run(cases)
    assert first.summary.cached_trials == 0 and len(first_target.sends) == 6

    second_target = MemoryTarget()
    second = await cached_runner(second_target, tmp_path, repeat=2).run(cases)
    assert second_target.sends == [] and second_target.opened == []
    assert second.summary.cached_trials == 4
    assert all(trial.cached for result in second.results for trial in result.trials)
    assert second.results[0].trials[0].run == first.results[0].trials[0].run
    assert second.summary.counts[Verdict.PASSED] == 2


async def test_assertions_run_again_on_cached_trials(tmp_path):
    await cached_runner(MemoryTarget(), tmp_path).run([SimpleCase(id="a", messages=["hi"])])
    # same messages, different expectation: the recording is valid, the verdict is new
    report = await cached_runner(MemoryTarget(), tmp_path).run(
        [SimpleCase(id="a", messages=["hi"], expect="never")]
    )
    assert report.results[0].trials[0].cached
    assert report.summary.cases[0].verdict == Verdict.FAILED


async def test_a_changed_message_goes_live_from_a_fresh_session(tmp_path):
    await cached_runner(MemoryTarget(), tmp_path).run([SimpleCase(id="a", messages=["hi", "one"])])
    target = MemoryTarget()
    report = await cached_runner(target, tmp_path).run([SimpleCase(id="a", messages=["hi", "two"])])
    trial = report.results[0].trials[0]
    assert not trial.cached
    assert target.sends == ["hi", "two"]  # the replayed prefix was sent again, live
    assert len(target.opened) == 1 and target.opened[0].closed
    assert trial.run["userMessages"] == ["hi", "two"] and trial.run["turns"] == 2
    # and the new conversation replaced the recording
    again = MemoryTarget()
    await cached_runner(again, tmp_path).run([SimpleCase(id="a", messages=["hi", "two"])])
    assert again.sends == []


async def test_key_covers_row_trial_identity_and_version(tmp_path):
    identity = TargetIdentity("http", "http://a", "agent", "1")
    base = RunCache.key(case_id="a", row={"q": 1}, trial=0, identity=identity)
    assert base == RunCache.key(case_id="a", row={"q": 1}, trial=0, identity=identity)
    others = {
        RunCache.key(case_id="b", row={"q": 1}, trial=0, identity=identity),
        RunCache.key(case_id="a", row={"q": 2}, trial=0, identity=identity),
        RunCache.key(case_id="a", row={"q": 1}, trial=1, identity=identity),
        RunCache.key(
            case_id="a",
            row={"q": 1},
            trial=0,
            identity=TargetIdentity("http", "http://a", "agent", "2"),
        ),
    }
    assert base not in others and len(others) == 4
    # a new agent version misses the recording
    await cached_runner(MemoryTarget(version="1"), tmp_path).run(
        [SimpleCase(id="a", messages=["hi"])]
    )
    newer = MemoryTarget(version="2")
    report = await cached_runner(newer, tmp_path).run([SimpleCase(id="a", messages=["hi"])])
    assert newer.sends == ["hi"] and not report.results[0].trials[0].cached


async def test_fresh_records_without_reading_and_failures_are_not_stored(tmp_path):
    await cached_runner(MemoryTarget(), tmp_path).run([SimpleCase(id="a", messages=["hi"])])
    target = MemoryTarget()
    await cached_runner(target, tmp_path, fresh=True).run([SimpleCase(id="a", messages=["hi"])])
    assert target.sends == ["hi"]

    broken = [SimpleCase(id="b", messages=["hi", "boom"])]
    first = await cached_runner(MemoryTarget(), tmp_path).run(broken)
    assert first.summary.cases[0].verdict == Verdict.ERROR
    target = MemoryTarget()
    await cached_runner(target, tmp_path).run(broken)
    assert target.sends == ["hi", "boom"]  # nothing was recorded for the failed trial


async def test_decisions_are_recorded_and_replayed(tmp_path):
    cache = RunCache(tmp_path)
    target = MemoryTarget()
    decisions = {"call-1": ApprovalDecision(decision="reject", reason="no")}
    wrapped = cache.wrap(target, case_id="a", row=None, trial=0)
    session = await wrapped.open(case_id="a")
    await session.send("refund")
    turn = await session.decide(decisions)
    await session.close()
    assert not wrapped.cached and len(target.sends) == 2

    replay_target = MemoryTarget()
    replay = cache.wrap(replay_target, case_id="a", row=None, trial=0)
    session = await replay.open(case_id="a")
    await session.send("refund")
    replayed = await session.decide(decisions)
    await session.close()
    assert replay.cached and replay_target.sends == []
    assert msgspec.to_builtins(replayed.run) == msgspec.to_builtins(turn.run)
    assert session.id.startswith("cached:")
    # a different decision goes live
    live_target = MemoryTarget()
    live = cache.wrap(live_target, case_id="a", row=None, trial=0)
    session = await live.open(case_id="a")
    await session.send("refund")
    await session.decide({"call-1": ApprovalDecision(decision="approve")})
    await session.close()
    assert not live.cached and live_target.sends[0] == "refund"


async def test_unreadable_recording_is_a_miss(tmp_path):
    case = SimpleCase(id="a", messages=["hi"])
    await cached_runner(MemoryTarget(), tmp_path).run([case])
    files = [f for f in (tmp_path / "cache").rglob("*.json") if f.parent.name != "slots"]
    assert len(files) == 1
    files[0].write_text("{not json")
    target = MemoryTarget()
    report = await cached_runner(target, tmp_path).run([case])
    assert target.sends == ["hi"] and not report.results[0].trials[0].cached
    assert msgspec.json.decode(files[0].read_bytes())["turns"][0]["message"] == "hi"  # replaced


async def test_a_miss_says_why_the_recording_was_not_reused(tmp_path):
    cases = [SimpleCase(id="a", messages=["hi", "more"])]
    first = cached_runner(MemoryTarget(version="1"), tmp_path)
    await first.run(cases)
    assert first.cache.misses == ["a [trial 0]: no recording of this trial yet"]
    newer = cached_runner(MemoryTarget(version="2"), tmp_path)
    await newer.run(cases)
    assert newer.cache.misses == [
        "a [trial 0]: the agent changed (memory-agent 1 -> memory-agent 2)"
    ]
    same = cached_runner(MemoryTarget(version="2"), tmp_path)
    await same.run([SimpleCase(id="a", messages=["hi", "other"])])
    assert same.cache.misses == ["a [trial 0]: turn 2 sent another input than the recording"]
    longer = cached_runner(MemoryTarget(version="2"), tmp_path)
    await longer.run([SimpleCase(id="a", messages=["hi", "other", "third"])])
    assert longer.cache.misses == [
        "a [trial 0]: the recording ends after 2 turn(s) and the case sent more"
    ]
