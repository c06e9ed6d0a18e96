"""Semantics of each composition operator: Sequence, Parallel, Conditional, Iterate, Fallback, ForEach."""

from __future__ import annotations

import json
import threading

import pytest
from pydantic import BaseModel

from forethought.primitives import (
    Conditional,
    Contract,
    Engine,
    Fallback,
    ForEach,
    HaltError,
    Iterate,
    Parallel,
    Program,
    Sequence,
    SLMReply,
    Step,
    check,
    slm,
    symbolic,
)
from tests.dsl_helpers import Item, Label, Num, ScriptedBackend, Text, render


class Words(BaseModel):
    words: list[str]
    source: str


class Count(BaseModel):
    total: int


class Items(BaseModel):
    items: list[Item]


NONNEG = Contract(value=[check("non_negative")(lambda i, o: o.value >= 0 or f"value={o.value} is negative")])


# ------------------------------------------------------------------ Sequence
def test_sequence_passes_each_output_forward_in_order():
    seen = []

    def split(text):
        seen.append(("split", text.text))
        return Words(words=text.text.split(), source=text.text)

    def count(words):
        seen.append(("count", list(words.words)))
        return Count(total=len(words.words))

    def double(counted):
        seen.append(("double", counted.total))
        return Count(total=2 * counted.total)

    prog = Sequence(
        symbolic("split", split, Text, Words, Contract()),
        symbolic("count", count, Words, Count, Contract()),
        symbolic("double", double, Count, Count, Contract()),
    )
    run = Engine().run(prog, {"text": "a b c"})
    assert run.ok, run.error
    assert run.output == Count(total=6)
    assert seen == [("split", "a b c"), ("count", ["a", "b", "c"]), ("double", 3)]
    assert [r.path for r in run.trace] == ["sequence/split", "sequence/count", "sequence/double"]
    assert [r.primitive for r in run.trace] == ["split", "count", "double"]


def test_sequence_adapts_a_wider_output_to_the_next_input():
    # Words has an extra field `source`; the next step only needs `words`.
    class OnlyWords(BaseModel):
        words: list[str]

    got = []
    prog = Sequence(
        symbolic("split", lambda t: Words(words=t.text.split(), source=t.text), Text, Words, Contract()),
        symbolic("n", lambda w: (got.append(type(w)), Count(total=len(w.words)))[1], OnlyWords, Count, Contract()),
    )
    run = Engine().run(prog, Text(text="x y"))
    assert run.output == Count(total=2)
    assert got == [OnlyWords]


def test_sequence_stops_at_the_first_halting_step():
    called = []
    prog = Sequence(
        symbolic("neg", lambda x: Num(value=-1), Num, Num, NONNEG),
        symbolic("after", lambda x: called.append(x) or x, Num, Num, Contract()),
    )
    run = Engine().run(prog, {"value": 1})
    assert not run.ok and run.error.step == "sequence/neg"
    assert called == []


# ------------------------------------------------------------------ Parallel
def test_parallel_branches_run_concurrently():
    # Each branch blocks until all three have arrived: this only completes if
    # the branches really run at the same time.
    barrier = threading.Barrier(3, timeout=120)  # a hang guard: sequential branches never all arrive
    threads = {}

    def branch(name, factor):
        def fn(num):
            threads[name] = threading.get_ident()
            barrier.wait()
            return Num(value=num.value * factor)

        return symbolic(name, fn, Num, Num, Contract())

    prog = Parallel(a=branch("a", 1), b=branch("b", 10), c=branch("c", 100))
    run = Engine(max_workers=4).run(prog, {"value": 2})
    assert run.ok, run.error
    assert (run.output.a, run.output.b, run.output.c) == (Num(value=2), Num(value=20), Num(value=200))
    assert len(set(threads.values())) == 3
    assert not barrier.broken


def test_parallel_with_one_worker_is_sequential():
    # The same rendezvous cannot complete when the engine runs branches one at
    # a time: the barrier times out in the first branch, which is a runtime
    # violation and halts.
    barrier = threading.Barrier(2, timeout=0.3)

    def fn(num):
        barrier.wait()
        return num

    prog = Parallel(a=symbolic("a", fn, Num, Num, Contract()), b=symbolic("b", fn, Num, Num, Contract()))
    run = Engine(max_workers=1).run(prog, {"value": 1})
    assert not run.ok
    assert run.error.violations[0].level == "runtime"
    assert "BrokenBarrierError" in run.error.violations[0].message


def test_parallel_output_has_one_field_per_branch_and_halts_on_a_failing_branch():
    ok = symbolic("ok", lambda x: Num(value=x.value + 1), Num, Num, Contract())
    bad = symbolic("bad", lambda x: Num(value=-5), Num, Num, NONNEG)
    prog = Parallel(label="pair", left=ok, right=ok)
    assert set(prog.output_type.model_fields) == {"left", "right"}
    run = Engine().run(prog, {"value": 1})
    assert run.output.left == Num(value=2) and run.output.right == Num(value=2)

    run = Engine().run(Parallel(label="pair", left=ok, right=bad), {"value": 1})
    assert not run.ok
    assert run.error.step == "pair/right"
    assert run.error.violations[0].constraint == "non_negative"


def test_parallel_branch_output_feeds_a_sequence():
    inc = symbolic("inc", lambda x: Num(value=x.value + 1), Num, Num, Contract())
    dbl = symbolic("dbl", lambda x: Num(value=x.value * 2), Num, Num, Contract())
    par = Parallel(label="both", i=inc, d=dbl)
    total = symbolic("total", lambda p: Num(value=p.i.value + p.d.value), par.output_type, Num, Contract())
    run = Engine().run(Sequence(par, total), {"value": 5})
    assert run.output == Num(value=16)


# --------------------------------------------------------------- Conditional
def test_conditional_on_a_value():
    small = symbolic("small", lambda x: Label(label="small"), Num, Label, Contract())
    big = symbolic("big", lambda x: Label(label="big"), Num, Label, Contract())
    cond = Conditional(when=lambda x: x.value >= 10, then=big, otherwise=small, label="size")
    eng = Engine()
    r1, r2 = eng.run(cond, {"value": 3}), eng.run(cond, {"value": 30})
    assert r1.output.label == "small" and r2.output.label == "big"
    assert [r.path for r in r1.trace] == ["size/else"]
    assert [r.path for r in r2.trace] == ["size/then"]


def test_conditional_on_a_contract_outcome():
    # The probe is an SLM classifier: if its answer passes the contract the
    # `then` branch gets the probe's output, otherwise `otherwise` gets the
    # original input.
    classify = slm(
        "classify",
        Text,
        Label,
        Contract(value=[check("known_label")(lambda i, o: o.label in ("greeting", "question") or "unknown label")]),
        render=render,
    )
    use_label = symbolic("use_label", lambda lab: Text(text=f"label:{lab.label}"), Label, Text, Contract())
    raw = symbolic("raw", lambda t: Text(text=f"raw:{t.text}"), Text, Text, Contract())
    cond = Conditional(probe=classify, then=use_label, otherwise=raw, label="route")

    def answer(req):
        return json.dumps({"label": "greeting" if req.input.text == "hello" else "gibberish"})

    eng = Engine(ScriptedBackend(answer))
    ok_run = eng.run(cond, {"text": "hello"})
    assert ok_run.output == Text(text="label:greeting")
    other = eng.run(cond, {"text": "zzz"})
    assert other.ok, other.error
    assert other.output == Text(text="raw:zzz")
    probe_rec = other.trace.by_primitive("classify")[0]
    # a failed probe is recovered, so it is not recorded as a halt
    assert probe_rec.action == "fallback" and not probe_rec.ok
    assert [r.path for r in other.trace] == ["route/classify", "route/else"]


def test_conditional_predicate_that_raises_halts_with_a_structured_error():
    step = symbolic("a", lambda x: x, Num, Num, Contract())
    run = Engine().run(Conditional(when=lambda x: 1 / 0, then=step, otherwise=step, label="c"), {"value": 1})
    assert not run.ok
    assert run.error.step == "c"
    assert "condition raised" in run.error.reason and "ZeroDivisionError" in run.error.reason


# ------------------------------------------------------------------- Iterate
def _inc(calls):
    def fn(num):
        calls.append(num.value)
        return Num(value=num.value + 1)

    return symbolic("inc", fn, Num, Num, Contract(), pure=False)


def test_iterate_until_condition():
    calls = []
    loop = Iterate(_inc(calls), until=lambda s: s.value >= 3, max_iters=10, label="loop")
    run = Engine().run(loop, {"value": 0})
    assert run.output == Num(value=3)
    assert calls == [0, 1, 2]
    assert [r.path for r in run.trace] == ["loop[0]", "loop[1]", "loop[2]"]


def test_iterate_budget_exhausted_returns_last_state():
    calls = []
    loop = Iterate(_inc(calls), until=lambda s: s.value >= 100, max_iters=4, on_exhausted="return")
    run = Engine().run(loop, {"value": 0})
    assert run.ok and run.output == Num(value=4)
    assert len(calls) == 4


def test_iterate_budget_exhausted_halts():
    calls = []
    loop = Iterate(_inc(calls), until=lambda s: s.value >= 100, max_iters=4, on_exhausted="halt", label="loop")
    run = Engine().run(loop, {"value": 0})
    assert not run.ok and len(calls) == 4
    assert run.error.step == "loop"
    assert "iteration budget of 4 exhausted" in run.error.reason
    assert run.error.input == Num(value=4)  # the last state is reported


def test_iterate_body_halting_halts_the_loop():
    step = symbolic("dec", lambda x: Num(value=x.value - 1), Num, Num, NONNEG)
    run = Engine().run(Iterate(step, until=lambda s: False, max_iters=10, label="loop"), {"value": 2})
    assert not run.ok
    assert run.error.step == "loop[2]"
    assert [r.action for r in run.trace] == ["accept", "accept", "halt"]


def test_iterate_until_that_raises_halts():
    run = Engine().run(Iterate(_inc([]), until=lambda s: s.missing, max_iters=3, label="loop"), {"value": 0})
    assert not run.ok and "until-condition raised" in run.error.reason


# ------------------------------------------------------------------ Fallback
def test_fallback_tries_alternatives_in_order_and_first_success_wins():
    order = []

    def alt(name, value):
        return symbolic(name, lambda x: (order.append(name), Num(value=value))[1], Num, Num, NONNEG)

    fb = Fallback(alt("first", -1), alt("second", -2), alt("third", 3), alt("fourth", 4), label="fb")
    run = Engine().run(fb, {"value": 0})
    assert run.ok and run.output == Num(value=3)
    assert order == ["first", "second", "third"]
    assert [r.action for r in run.trace] == ["fallback", "fallback", "accept"]
    assert [r.path for r in run.trace] == ["fb/first", "fb/second", "fb/third"]


def test_fallback_all_failing_halts_with_every_cause():
    negative = symbolic("a", lambda x: Num(value=-1), Num, Num, NONNEG)
    ill_typed = symbolic("b", lambda x: {"value": "nope"}, Num, Num, Contract())

    def c_fn(num):
        raise RuntimeError("tool down")

    raising = symbolic("c", c_fn, Num, Num, Contract())
    run = Engine().run(Fallback(negative, ill_typed, raising, label="fb"), {"value": 0})
    assert not run.ok
    err = run.error
    assert err.step == "fb"
    assert "all 3 alternatives failed" in err.reason
    assert [v.primitive for v in err.violations] == ["a", "b", "c"]
    assert [v.level for v in err.violations] == ["value", "type", "runtime"]
    assert "tool down" in err.reason and "non_negative" in err.reason
    assert [r.action for r in run.trace] == ["fallback", "fallback", "halt"]


# ------------------------------------------------------------------- ForEach
def test_foreach_applies_the_body_to_each_item_in_order():
    up = symbolic("up", lambda it: Label(label=it.name.upper()), Item, Label, Contract())
    fe = ForEach(up, over="items", max_items=5, label="each")
    run = Engine().run(fe, {"items": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})
    assert [x.label for x in run.output.results] == ["A", "B", "C"]
    assert [r.path for r in run.trace] == ["each[0]", "each[1]", "each[2]"]


def test_foreach_fan_out_limit_halts_before_running_the_body():
    calls = []
    up = symbolic("up", lambda it: calls.append(it) or Label(label="x"), Item, Label, Contract())
    fe = ForEach(up, over="items", max_items=2, label="each")
    run = Engine().run(fe, {"items": [{"name": str(i)} for i in range(3)]})
    assert not run.ok
    assert "3 items exceed the declared fan-out of 2" in run.error.reason
    assert calls == []
    # exactly at the limit is fine
    assert Engine().run(fe, {"items": [{"name": "a"}, {"name": "b"}]}).ok


def test_foreach_batches_slm_items_into_one_backend_call():
    tag = slm("tag", Item, Label, Contract(), render=render)
    backend = ScriptedBackend(lambda r: json.dumps({"label": r.input.name * 2}))
    run = Engine(backend).run(ForEach(tag, over="items", max_items=8), {"items": [{"name": c} for c in "abcde"]})
    assert run.ok, run.error
    assert [x.label for x in run.output.results] == ["aa", "bb", "cc", "dd", "ee"]
    assert len(backend.batches) == 1
    assert [r.input.name for r in backend.batches[0]] == list("abcde")
    assert run.slm_calls == 5


def test_foreach_batch_retries_only_failed_items_together_with_their_feedback():
    tag = slm(
        "tag",
        Item,
        Label,
        Contract(value=[check("lower")(lambda i, o: o.label.islower() or "label must be lower case")]),
        render=render,
    )

    def answer(request):
        # items b and d first answer in upper case, and correct themselves on feedback
        if request.input.name in "bd" and not request.feedback:
            return json.dumps({"label": request.input.name.upper()})
        return json.dumps({"label": request.input.name})

    backend = ScriptedBackend(answer)
    run = Engine(backend).run(
        ForEach(Step(tag, retries=1), over="items", max_items=4), {"items": [{"name": c} for c in "abcd"]}
    )
    assert run.ok, run.error
    assert [x.label for x in run.output.results] == list("abcd")
    assert [[r.input.name for r in b] for b in backend.batches] == [list("abcd"), ["b", "d"]]
    assert all("label must be lower case" in r.feedback[0] for r in backend.batches[1])


def test_foreach_skip_keeps_going_past_failed_items():
    def fn(it):
        if it.name == "bad":
            raise ValueError("cannot handle bad")
        return Label(label=it.name)

    body = symbolic("lab", fn, Item, Label, Contract())
    fe = ForEach(body, over="items", max_items=4, on_item_error="skip", label="each")
    run = Engine().run(fe, {"items": [{"name": "x"}, {"name": "bad"}, {"name": "y"}]})
    assert run.ok, run.error
    assert [r.label if r else None for r in run.output.results] == ["x", None, "y"]
    assert run.output.errors[0] is None and run.output.errors[2] is None
    assert "cannot handle bad" in run.output.errors[1]
    assert [r.action for r in run.trace] == ["accept", "fallback", "accept"]

    halting = ForEach(body, over="items", max_items=4, label="each")
    run = Engine().run(halting, {"items": [{"name": "x"}, {"name": "bad"}, {"name": "y"}]})
    assert not run.ok and run.error.step == "each[1]"
    assert len(run.trace) == 2  # the item after the failure never ran


def test_foreach_skip_with_batched_slm_body():
    tag = slm("tag", Item, Label, Contract(), render=render)
    backend = ScriptedBackend(lambda r: "not json" if r.input.name == "b" else json.dumps({"label": r.input.name}))
    fe = ForEach(tag, over="items", max_items=3, on_item_error="skip")
    run = Engine(backend).run(fe, {"items": [{"name": c} for c in "abc"]})
    assert run.ok
    assert [r.label if r else None for r in run.output.results] == ["a", None, "c"]
    assert "parse" in run.output.errors[1]
    assert len(backend.batches) == 1


def test_foreach_inside_a_program_counts_against_the_static_bound():
    tag = slm("tag", Item, Label, Contract(), render=render)
    prog = Program(ForEach(Step(tag, retries=2), over="items", max_items=4))
    assert prog.max_slm_calls == 12
    with pytest.raises(HaltError):
        Engine(ScriptedBackend(lambda r: "{}")).run(prog, {"items": [{"name": "a"}]}).raise_for_error()


def test_iterate_runs_its_body_before_the_first_check():
    # Iterate is "repeat ... until": the condition is checked after each pass.
    calls = []
    run = Engine().run(Iterate(_inc(calls), until=lambda s: True, max_iters=5), {"value": 10})
    assert run.output == Num(value=11) and calls == [10]


def test_foreach_batch_whose_backend_fails_stops_the_run_with_a_backend_error():
    class Down:
        name = "down"

        def __init__(self):
            self.batches = []

        def complete(self, requests):
            self.batches.append(len(requests))
            raise ConnectionError("backend down")

    tag = Step(slm("tag", Item, Label, Contract(), render=render), retries=1)
    items = {"items": [{"name": "a"}, {"name": "b"}]}

    backend = Down()
    run = Engine(backend, backend_retries=1, backend_retry_wait_s=0).run(
        ForEach(tag, over="items", max_items=3, label="each"), items
    )
    assert not run.ok and run.error is None
    assert run.backend_error.path == "each[0]" and "backend down" in str(run.backend_error)
    assert backend.batches == [2, 2]  # the batch was sent again once, as a backend retry (no contract retry)
    assert run.slm_calls == 2 and run.backend_retries == 1

    # on_item_error="skip" skips items whose answer failed its contract, never items
    # that got no answer: the run still stops.
    backend = Down()
    run = Engine(backend).run(ForEach(tag, over="items", max_items=3, on_item_error="skip"), items)
    assert run.output is None and run.backend_error is not None
    assert [r.action for r in run.trace] == ["backend_error"]


def test_foreach_batch_with_a_wrong_number_of_replies_is_a_backend_error():
    class Short:
        name = "short"

        def complete(self, requests):
            return [SLMReply('{"label": "x"}')]  # one reply, whatever was asked

    tag = slm("tag", Item, Label, Contract(), render=render)
    run = Engine(Short()).run(ForEach(tag, over="items", max_items=3), {"items": [{"name": "a"}, {"name": "b"}]})
    assert not run.ok and "backend returned 1 replies for 2 requests" in str(run.backend_error)
