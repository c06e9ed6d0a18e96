"""Traces (JSONL round-trip, levels), record/replay of SLM outputs, and the cache."""

from __future__ import annotations

import json
import threading
from typing import get_args

import pytest
from pydantic import BaseModel

from forethought.primitives import (
    Cache,
    Contract,
    Engine,
    Fallback,
    ForEach,
    HaltError,
    Iterate,
    Parallel,
    Recorder,
    ReplayMissError,
    Sequence,
    SLMReply,
    Step,
    Trace,
    TraceRecord,
    check,
    input_hash,
    slm,
    symbolic,
)
from forethought.primitives.trace import Action
from tests.dsl_helpers import Item, Label, Num, Text, render


class CountingBackend:
    """Nondeterministic on purpose: the n-th request ever gets answer ``fn(request, n)``."""

    name = "counting"

    def __init__(self, fn, start: int = 0):
        self.fn = fn
        self.n = start
        self.lock = threading.Lock()

    def complete(self, requests):
        out = []
        with self.lock:
            for request in requests:
                self.n += 1
                out.append(SLMReply(self.fn(request, self.n), {"backend": self.name, "n": self.n}))
        return out


POSITIVE = Contract(value=[check("positive")(lambda i, o: o.value > 0 or "value must be positive")])


def guess_program():
    # SLM guess with retries (same violation message on every failed attempt),
    # then a symbolic step, then a batched ForEach and a loop.
    guess = Step(slm("guess", Text, Num, POSITIVE, render=render), retries=3)
    to_items = symbolic(
        "to_items",
        lambda n: {"items": [{"name": f"i{k}"} for k in range(n.value % 3 + 2)] + [{"name": "i0"}]},
        Num,
        _Items,
        Contract(),
    )
    tag = Step(
        slm(
            "tag",
            Item,
            Label,
            Contract(value=[lambda i, o: o.label.startswith(i.name) or "must start with name"]),
            render=render,
        ),
        retries=1,
    )
    fe = ForEach(tag, over="items", max_items=8, on_item_error="skip")
    count = symbolic(
        "count", lambda r: Num(value=sum(1 for x in r.results if x is not None)), fe.output_type, Num, Contract()
    )
    bump = Step(slm("bump", Num, Num, POSITIVE, render=render), retries=1)
    loop = Iterate(bump, until=lambda s: s.value >= 10, max_iters=4)
    return Sequence(guess, to_items, fe, count, loop, label="prog")


class _Items(BaseModel):
    items: list[Item]


def noisy(req, count):
    if req.primitive == "guess":
        return json.dumps({"value": -count}) if count % 3 else json.dumps({"value": count})
    if req.primitive == "tag":
        return json.dumps({"label": f"{req.input.name}-{count}" if count % 2 else f"x{count}"})
    return json.dumps({"value": req.input.value + count})


def comparable(trace: Trace):
    return [(r.path, r.primitive, r.attempt, r.action, r.input, r.output, r.contract) for r in trace]


# ------------------------------------------------------------- trace
def test_trace_records_every_invocation_with_identity_io_contract_time_and_model():
    run = Engine(CountingBackend(noisy), trace="full").run(guess_program(), {"text": "q"})
    assert len(run.trace) > 5
    assert [r.seq for r in run.trace] == list(range(len(run.trace)))
    for record in run.trace:
        assert record.action in get_args(Action)
        assert record.kind in ("symbolic", "slm")
        assert record.input is not None and "ok" in record.contract and record.elapsed_ms >= 0
        if record.kind == "slm":
            assert record.model["backend"] == "counting"
        else:
            assert record.model is None
    first = run.trace.records[0]
    assert (first.path, first.primitive, first.action, first.input) == ("prog/guess", "guess", "retry", {"text": "q"})
    assert first.contract["violations"][0]["constraint"] == "positive"
    assert run.trace.violations()  # the noisy backend violated something


def test_trace_jsonl_round_trip(tmp_path):
    run = Engine(CountingBackend(noisy)).run(guess_program(), {"text": "q"}, run_id="run-1")
    path = tmp_path / "sub" / "trace.jsonl"
    run.trace.write_jsonl(path)
    lines = path.read_text().splitlines()
    assert len(lines) == len(run.trace)
    assert all(json.loads(line)["run_id"] == "run-1" for line in lines)
    back = Trace.load(path)
    assert back.run_id == "run-1"
    assert back.records == run.trace.records
    assert back == run.trace


def test_trace_round_trip_with_a_failed_raw_output_that_is_not_json(tmp_path):
    # a primitive that returns something that is not JSON (a set) violates its
    # type; the trace must still round-trip exactly
    run = Engine().run(symbolic("weird", lambda x: {1, 2}, Num, Num, Contract()), {"value": 1})
    assert not run.ok
    run.trace.write_jsonl(tmp_path / "t.jsonl")
    assert Trace.load(tmp_path / "t.jsonl").records == run.trace.records


def test_trace_round_trip_of_a_halted_parallel_run(tmp_path):
    ok = symbolic("ok", lambda x: Num(value=1), Num, Num, Contract())
    bad = symbolic("bad", lambda x: Num(value=-1), Num, Num, POSITIVE)
    run = Engine().run(Parallel(a=ok, b=bad), {"value": 0})
    assert not run.ok
    run.trace.write_jsonl(tmp_path / "t.jsonl")
    back = Trace.load(tmp_path / "t.jsonl")
    assert back.records == run.trace.records
    assert sorted(r.primitive for r in back) == ["bad", "ok"]
    assert back.by_primitive("bad")[0].action == "halt"


def test_trace_record_from_dict_ignores_unknown_keys_and_defaults_optional_ones():
    rec = TraceRecord(
        0, "p", "x", "symbolic", 0, "accept", {"value": 1}, {"value": 2}, {"ok": True, "violations": []}, 0.1
    )
    as_dict = rec.to_dict() | {"run_id": "r", "future_field": 1}
    assert TraceRecord.from_dict(as_dict) == rec
    del as_dict["meta"], as_dict["source"], as_dict["model"]
    assert TraceRecord.from_dict(as_dict) == rec


def test_trace_levels():
    prog = guess_program()
    full = Engine(CountingBackend(noisy), trace="full").run(prog, {"text": "q"})
    steps = Engine(CountingBackend(noisy), trace="steps").run(prog, {"text": "q"})
    off = Engine(CountingBackend(noisy), trace="off").run(prog, {"text": "q"})
    assert full.output == steps.output == off.output

    def verdicts(trace):
        return [
            (r.path, r.action, r.ok, [(v["level"], v["constraint"]) for v in r.contract["violations"]]) for r in trace
        ]

    assert verdicts(steps.trace) == verdicts(full.trace)
    assert any(r.contract["violations"] for r in steps.trace)
    # "steps" keeps no payloads: no input/output, not even inside a violation
    assert all(r.input is None and r.output is None for r in steps.trace)
    assert all(v["input"] is None for v in steps.trace.violations())
    assert all(v["input"] is not None for v in full.trace.violations())
    assert all(r.input is not None for r in full.trace)
    assert len(off.trace) == 0
    # "violations" keeps exactly the failed steps of "steps" (the cheapest level that still shows every problem)
    viol = Engine(CountingBackend(noisy), trace="violations").run(prog, {"text": "q"})
    assert viol.output == full.output
    assert verdicts(viol.trace) == [v for v in verdicts(steps.trace) if not v[2]] != []
    with pytest.raises(ValueError, match="trace must be"):
        Engine(trace="verbose")


# ------------------------------------------------------------- replay
def test_replay_reproduces_a_nondeterministic_run(tmp_path):
    prog = guess_program()
    rec = Recorder("record")
    recorded = Engine(CountingBackend(noisy), recorder=rec).run(prog, {"text": "q"})
    assert recorded.slm_calls > 0
    rec.save(tmp_path / "rec.jsonl")

    # A backend in another state would answer differently ...
    fresh = Engine(CountingBackend(noisy, start=1)).run(prog, {"text": "q"})
    assert comparable(fresh.trace) != comparable(recorded.trace)

    # ... but replaying the recording gives the recorded run exactly.
    never = CountingBackend(lambda r, n: pytest.fail("strict replay must not call the backend"))
    replayed = Engine(never, recorder=Recorder.load(tmp_path / "rec.jsonl", mode="strict")).run(prog, {"text": "q"})
    assert replayed.output == recorded.output
    assert (replayed.error is None) == (recorded.error is None)
    assert comparable(replayed.trace) == comparable(recorded.trace)
    assert replayed.slm_calls == 0
    assert {r.source for r in replayed.trace if r.kind == "slm"} == {"replay"}
    assert [r.model for r in replayed.trace] == [r.model for r in recorded.trace]


def test_replay_of_a_halted_run_halts_identically():
    guess = Step(slm("guess", Text, Num, POSITIVE, render=render), retries=2)
    rec = Recorder("record")
    recorded = Engine(CountingBackend(lambda r, n: json.dumps({"value": -n})), recorder=rec).run(guess, {"text": "q"})
    assert not recorded.ok
    replayed = Engine(
        CountingBackend(lambda r, n: json.dumps({"value": n})), recorder=Recorder("strict", rec.entries)
    ).run(guess, {"text": "q"})
    assert not replayed.ok
    assert replayed.error.to_dict() == recorded.error.to_dict()
    assert comparable(replayed.trace) == comparable(recorded.trace)


def test_identical_requests_in_one_recorded_run_get_one_answer():
    # Items "a" and "a" are the same request: the recorded run must give them
    # the same answer, otherwise no replay could reproduce it.
    tag = slm("tag", Item, Label, Contract(), render=render)
    rec = Recorder("record")
    fe = ForEach(tag, over="items", max_items=4)
    recorded = Engine(CountingBackend(lambda r, n: json.dumps({"label": f"{r.input.name}{n}"})), recorder=rec).run(
        fe, {"items": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}
    )
    labels = [x.label for x in recorded.output.results]
    assert labels[0] == labels[2] == "a1"
    replayed = Engine(CountingBackend(lambda r, n: "{}"), recorder=Recorder("strict", rec.entries)).run(
        fe, {"items": [{"name": "a"}, {"name": "b"}, {"name": "a"}]}
    )
    assert [x.label for x in replayed.output.results] == labels


def test_strict_replay_raises_on_a_missing_recording():
    guess = slm("guess", Text, Num, Contract(), render=render)
    rec = Recorder("record")
    Engine(CountingBackend(lambda r, n: json.dumps({"value": n})), recorder=rec).run(guess, {"text": "seen"})
    eng = Engine(CountingBackend(lambda r, n: json.dumps({"value": 99})), recorder=Recorder("strict", rec.entries))
    assert eng.run(guess, {"text": "seen"}).output == Num(value=1)
    with pytest.raises(ReplayMissError) as ei:
        eng.run(guess, {"text": "unseen"})
    assert ei.value.primitive == "guess"
    assert ei.value.key == input_hash("guess", Text(text="unseen"), (), "1")
    assert "strict replay" in str(ei.value) and "'guess'" in str(ei.value)


def test_strict_replay_miss_is_not_swallowed_by_a_fallback_or_a_batch():
    guess = slm("guess", Text, Num, Contract(), render=render)
    sym = symbolic("const", lambda t: Num(value=0), Text, Num, Contract())
    eng = Engine(CountingBackend(lambda r, n: "{}"), recorder=Recorder("strict"))
    with pytest.raises(ReplayMissError):
        eng.run(Fallback(guess, sym), {"text": "x"})
    tag = slm("tag", Item, Label, Contract(), render=render)
    with pytest.raises(ReplayMissError):
        eng.run(ForEach(tag, over="items", max_items=2, on_item_error="skip"), {"items": [{"name": "a"}]})


def test_a_new_primitive_version_misses_the_old_recording():
    v1 = slm("guess", Text, Num, Contract(), render=render, version="1")
    v2 = slm("guess", Text, Num, Contract(), render=render, version="2")
    rec = Recorder("record")
    Engine(CountingBackend(lambda r, n: json.dumps({"value": n})), recorder=rec).run(v1, {"text": "x"})
    with pytest.raises(ReplayMissError):
        Engine(CountingBackend(lambda r, n: "{}"), recorder=Recorder("strict", rec.entries)).run(v2, {"text": "x"})


def test_non_strict_replay_falls_back_to_the_backend():
    guess = slm("guess", Text, Num, Contract(), render=render)
    rec = Recorder("record")
    Engine(CountingBackend(lambda r, n: json.dumps({"value": 1})), recorder=rec).run(guess, {"text": "seen"})
    live = CountingBackend(lambda r, n: json.dumps({"value": 42}))
    eng = Engine(live, recorder=Recorder("replay", rec.entries))
    hit = eng.run(guess, {"text": "seen"})
    miss = eng.run(guess, {"text": "unseen"})
    assert hit.output == Num(value=1) and hit.trace.records[0].source == "replay" and hit.slm_calls == 0
    assert miss.output == Num(value=42) and miss.trace.records[0].source == "call" and miss.slm_calls == 1
    assert live.n == 1


def test_recorder_modes():
    with pytest.raises(ValueError, match="unknown replay mode"):
        Recorder("sometimes")
    off = Recorder("off")
    off.store("p", "k", "t", {})
    assert off.entries == {} and off.lookup("p", "k") is None


# ------------------------------------------------------------- cache
def test_pure_symbolic_primitive_runs_once_per_identical_input():
    calls = []
    norm = symbolic("norm", lambda t: (calls.append(t.text), Text(text=t.text.lower()))[1], Text, Text, Contract())
    cache = Cache()
    eng = Engine(cache=cache)
    assert eng.run(norm, {"text": "A"}).output == Text(text="a")
    second = eng.run(norm, {"text": "A"})
    assert second.output == Text(text="a") and second.trace.records[0].source == "cache"
    eng.run(norm, {"text": "B"})
    assert calls == ["A", "B"]
    assert cache.hits == 1 and len(cache) == 2


def test_cache_applies_within_a_run():
    calls = []
    up = symbolic("up", lambda it: (calls.append(it.name), Label(label=it.name.upper()))[1], Item, Label, Contract())
    run = Engine(cache=Cache()).run(ForEach(up, over="items", max_items=5), {"items": [{"name": n} for n in "abab"]})
    assert [x.label for x in run.output.results] == list("ABAB")
    assert calls == ["a", "b"]
    assert [r.source for r in run.trace] == ["call", "call", "cache", "cache"]


def test_effectful_and_context_primitives_are_never_cached():
    calls = []

    def tool(num):
        calls.append("tool")
        return Num(value=num.value)

    def ctx_fn(num, ctx):
        calls.append("ctx")
        return Num(value=num.value + ctx["offset"])

    effect = symbolic("tool", tool, Num, Num, Contract(), pure=False)
    with_ctx = symbolic("ctx", ctx_fn, Num, Num, Contract(), uses_context=True)
    cache = Cache()
    eng = Engine(cache=cache)
    for _ in range(3):
        eng.run(effect, {"value": 1})
    assert calls == ["tool"] * 3
    calls.clear()
    assert eng.run(with_ctx, {"value": 1}, context={"offset": 1}).output == Num(value=2)
    assert eng.run(with_ctx, {"value": 1}, context={"offset": 5}).output == Num(value=6)
    assert calls == ["ctx", "ctx"]
    assert len(cache) == 0


def test_slm_replies_are_cached_by_input_and_feedback():
    guess = slm("guess", Text, Num, Contract(), render=render)
    backend = CountingBackend(lambda r, n: json.dumps({"value": n}))
    eng = Engine(backend, cache=Cache())
    assert eng.run(guess, {"text": "x"}).output == Num(value=1)
    again = eng.run(guess, {"text": "x"})
    assert again.output == Num(value=1) and again.slm_calls == 0 and again.trace.records[0].source == "cache"
    assert eng.run(guess, {"text": "y"}).output == Num(value=2)
    assert backend.n == 2


def test_cache_is_bounded_lru():
    cache = Cache(max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_input_hash_is_canonical_and_sensitive():
    digest = input_hash("p", {"x": 1, "y": [1, 2]})
    assert digest == input_hash("p", {"y": [1, 2], "x": 1})
    assert digest != input_hash("q", {"x": 1, "y": [1, 2]})
    assert digest != input_hash("p", {"x": 1, "y": [2, 1]})
    assert digest != input_hash("p", {"x": 1, "y": [1, 2]}, ("fb",))
    assert digest != input_hash("p", {"x": 1, "y": [1, 2]}, (), "2")
    assert input_hash("p", Num(value=1)) == input_hash("p", {"value": 1})


def test_halt_inside_a_replayed_run_is_still_a_halt_error():
    guess = Step(slm("guess", Text, Num, POSITIVE, render=render), retries=1)
    rec = Recorder("record")
    Engine(CountingBackend(lambda r, n: json.dumps({"value": -1})), recorder=rec).run(guess, {"text": "q"})
    run = Engine(CountingBackend(lambda r, n: "{}"), recorder=Recorder("strict", rec.entries)).run(guess, {"text": "q"})
    with pytest.raises(HaltError):
        run.raise_for_error()


def test_atomic_writes_leave_no_temp_file_and_use_the_normal_file_mode(tmp_path):
    import os
    import stat

    from forethought.primitives.io import atomic_write_json

    out = atomic_write_json(tmp_path / "sub" / "x.json", {"a": 1})
    assert out.read_text() == '{\n  "a": 1\n}\n'
    assert [p.name for p in out.parent.iterdir()] == ["x.json"]
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask  # as open() would create it, not mkstemp's 0600


def test_a_shared_cache_never_serves_one_backends_answer_to_another():
    guess = slm("guess", Text, Num, Contract(), render=render)
    cache = Cache()
    counting = CountingBackend(lambda r, n: json.dumps({"value": 100 + n}))
    other = CountingBackend(lambda r, n: json.dumps({"value": 200 + n}))
    other.name = "other-model"
    assert Engine(counting, cache=cache).run(guess, {"text": "x"}).output == Num(value=101)
    assert Engine(other, cache=cache).run(guess, {"text": "x"}).output == Num(value=201)
    assert Engine(counting, cache=cache).run(guess, {"text": "x"}).trace.records[0].source == "cache"


def test_a_cached_symbolic_output_is_not_changed_by_whoever_mutates_it():
    class Bag(BaseModel):
        items: list[str]

    make = symbolic("make", lambda t: Bag(items=[t.text]), Text, Bag, Contract())
    eng = Engine(cache=Cache())
    first = eng.run(make, {"text": "a"}).output
    first.items.append("mutated")
    second = eng.run(make, {"text": "a"})
    assert second.trace.records[0].source == "cache" and second.output == Bag(items=["a"])


def test_a_trace_file_is_cut_at_its_size_cap_and_says_so(tmp_path):
    from forethought.primitives import Program
    from forethought.primitives.trace import Trace, TraceRecord, capped_rows

    rows = [{"i": i, "payload": "x" * 100} for i in range(100)]
    cut = capped_rows(rows, 2000)
    assert cut[-1] == {"truncated": True, "dropped_records": 100 - (len(cut) - 1), "max_bytes": 2000}
    assert sum(len(json.dumps(r)) + 1 for r in cut[:-1]) <= 2000 and len(cut) > 2
    assert capped_rows(rows, 10**9) == rows  # under the cap: untouched, no marker
    length = symbolic("length", lambda t: Num(value=len(t.text)), Text, Num, Contract())
    double = symbolic("double", lambda n: Num(value=2 * n.value), Num, Num, Contract())
    run = Engine().run(Program(Sequence(length, double)), {"text": "a b c"})
    path = tmp_path / "t.jsonl"
    run.trace.write_jsonl(path, max_bytes=len(json.dumps(run.trace.to_rows()[0])) + 1)
    loaded = Trace.load(path)
    assert len(loaded) == 1 and loaded.dropped_records == len(run.trace) - 1
    assert isinstance(loaded.records[0], TraceRecord)
