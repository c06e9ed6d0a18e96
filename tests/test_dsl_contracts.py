"""Contract violations at each level, fail-closed checks, and the recovery paths."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from forethought.primitives import (
    BackendError,
    Check,
    Conditional,
    Contract,
    Engine,
    Fallback,
    ForEach,
    HaltError,
    Iterate,
    Sequence,
    Step,
    Violation,
    check,
    slm,
    symbolic,
)
from tests.dsl_helpers import Item, Num, ScriptedBackend, render


class Query(BaseModel):
    text: str


class Entities(BaseModel):
    entities: list[str]


# Value: extracted entities must appear in the source text.
# Semantic: the extraction must cover the query (at least one entity).
in_source = check("in_source")(
    lambda i, o: (
        all(e in i.text for e in o.entities) or f"not in the text: {[e for e in o.entities if e not in i.text]}"
    )
)
covers = check("covers_query", "semantic")(lambda i, o: bool(o.entities) or "no entity extracted")
EXTRACT_CONTRACT = Contract(value=[in_source], semantic=[covers])


def extractor(retries=0):
    return Step(slm("extract", Query, Entities, EXTRACT_CONTRACT, render=render), retries=retries)


def run_extract(reply: str, text: str = "flights from Paris to Rome", retries=0, **engine_kw):
    backend = ScriptedBackend(lambda r: reply)
    return Engine(backend, **engine_kw).run(extractor(retries), {"text": text}), backend


# ------------------------------------------------------------- levels
@pytest.mark.parametrize(
    "reply, level, constraint, fragment",
    [
        ("this is not json", "type", "parse", "not valid output"),
        ('{"entities": "Paris"}', "type", "schema", "entities"),
        ('{"wrong_key": []}', "type", "schema", "entities: Field required"),
        ('{"entities": ["Paris", "Berlin"]}', "value", "in_source", "Berlin"),
        ('{"entities": []}', "semantic", "covers_query", "no entity extracted"),
    ],
)
def test_each_contract_level_is_detected_and_named(reply, level, constraint, fragment):
    run, _ = run_extract(reply)
    assert not run.ok
    (violation,) = run.error.violations
    assert (violation.primitive, violation.level, violation.constraint) == ("extract", level, constraint)
    assert fragment in violation.message
    assert violation.input == Query(text="flights from Paris to Rome")
    rec = run.trace.records[-1]
    assert rec.action == "halt" and not rec.ok
    assert rec.contract["violations"][0]["level"] == level


def test_a_valid_reply_passes_all_levels():
    run, _ = run_extract('{"entities": ["Paris", "Rome"]}')
    assert run.ok and run.output == Entities(entities=["Paris", "Rome"])
    assert run.trace.records[0].contract == {"ok": True, "violations": []}
    assert run.trace.records[0].model == {"backend": "scripted", "model": "script-v1"}


def test_runtime_exception_in_a_primitive_is_a_violation_not_a_crash():
    def boom(num):
        raise KeyError("missing config")

    run = Engine().run(symbolic("boom", boom, Num, Num, Contract()), {"value": 1})
    assert not run.ok
    (violation,) = run.error.violations
    assert (violation.level, violation.constraint, violation.primitive) == ("runtime", "raised", "boom")
    assert "missing config" in violation.message


def test_backend_exception_is_a_backend_error_not_a_violation():
    # Finding 1 of issue 13: a dead backend used to become a contract violation of the
    # step (a "model answer" that failed), and reports blamed the model.
    class Down:
        name = "down"

        def __init__(self):
            self.calls = 0

        def complete(self, requests):
            self.calls += 1
            raise ConnectionError("backend unreachable")

    down = Down()
    run = Engine(down, backend_retries=2, backend_retry_wait_s=0).run(extractor(retries=1), {"text": "x"})
    assert not run.ok and run.error is None
    assert isinstance(run.backend_error, BackendError)
    assert "backend unreachable" in str(run.backend_error) and run.backend_error.attempts == 3
    assert down.calls == 3 and run.backend_retries == 2  # backend retries only: no contract retry on a non-answer
    assert [r.action for r in run.trace] == ["backend_error"]
    assert run.trace.violations() == []
    with pytest.raises(BackendError):
        run.raise_for_error()


def test_a_backend_error_is_not_caught_by_a_fallback():
    class Down:
        name = "down"

        def complete(self, requests):
            raise TimeoutError("timed out")

    sym = symbolic("sym", lambda q: Entities(entities=["fallback answer"]), Query, Entities, Contract())
    run = Engine(Down()).run(Fallback(extractor(retries=0), Step(sym)), {"text": "x"})
    assert run.output is None and run.backend_error is not None  # the fallback never stood in for a dead backend


def test_all_value_and_semantic_violations_are_reported_together():
    contract = Contract(
        value=[
            check("pos")(lambda i, o: o.value > 0 or "not positive"),
            check("even")(lambda i, o: o.value % 2 == 0 or "odd"),
        ],
        semantic=[check("small", "semantic")(lambda i, o: o.value < 10 or "too big")],
    )
    run = Engine().run(symbolic("f", lambda x: Num(value=-3), Num, Num, contract), {"value": 0})
    assert [(v.level, v.constraint) for v in run.error.violations] == [("value", "pos"), ("value", "even")]
    run = Engine().run(symbolic("f", lambda x: Num(value=11), Num, Num, contract), {"value": 0})
    assert [(v.level, v.constraint) for v in run.error.violations] == [("value", "even"), ("semantic", "small")]


def test_value_and_semantic_checks_do_not_run_on_an_ill_typed_output():
    ran = []
    contract = Contract(value=[lambda i, o: ran.append(o) or True])
    run = Engine().run(symbolic("f", lambda x: {"value": "abc"}, Num, Num, contract), {"value": 0})
    assert run.error.violations[0].level == "type"
    assert ran == []


def test_output_is_coerced_into_its_type_from_a_dict():
    run = Engine().run(symbolic("f", lambda x: {"value": x.value + 1}, Num, Num, Contract()), {"value": 1})
    assert run.output == Num(value=2) and isinstance(run.output, Num)


# ------------------------------------------------------------- fail closed
def _bad_check(inp, output):
    raise AttributeError("check bug")


@pytest.mark.parametrize(
    "fn, fragment",
    [
        (_bad_check, "check could not be evaluated: AttributeError('check bug')"),
        (lambda i, o: False, "constraint does not hold"),
        (lambda i, o: 1, "constraint does not hold"),  # anything but None/True is not a pass
        (lambda i, o: [], "constraint does not hold"),
        (lambda i, o: "explained failure", "explained failure"),
    ],
)
def test_checks_fail_closed(fn, fragment):
    contract = Contract(semantic=[Check("guard", "semantic", fn)])
    run = Engine().run(symbolic("f", lambda x: x, Num, Num, contract), {"value": 1})
    assert not run.ok
    (violation,) = run.error.violations
    assert violation.level == "semantic" and violation.constraint == "guard"
    assert fragment in violation.message


def test_check_passes_on_none_and_true():
    for res in (None, True):
        contract = Contract(value=[lambda i, o, res=res: res])
        assert Engine().run(symbolic("f", lambda x: x, Num, Num, contract), {"value": 1}).ok


def test_contract_rejects_a_non_callable_check():
    with pytest.raises(TypeError, match="not callable"):
        Contract(value=["value > 0"])


def test_a_plain_function_check_is_named_after_the_function():
    def ids_unique(inp, output):
        return False

    contract = Contract(value=[ids_unique])
    assert contract.names == ["ids_unique"]
    # a Check given at another level is moved to the level it is listed under
    c2 = Contract(semantic=[Check("x", "value", ids_unique)])
    assert c2.checks[0].level == "semantic"


# ------------------------------------------------------------- recovery: retry
def test_slm_retry_sees_the_violation_as_feedback():
    def answer(req):
        if not req.feedback:
            return '{"entities": ["Paris", "London"]}'
        return '{"entities": ["Paris"]}'

    backend = ScriptedBackend(answer)
    run = Engine(backend).run(extractor(retries=2), {"text": "flights from Paris"})
    assert run.ok and run.output.entities == ["Paris"]
    first, second = backend.requests
    assert first.feedback == () and len(first.messages) == 1
    assert len(second.feedback) == 1
    assert second.feedback[0].startswith("[value] in_source:") and "London" in second.feedback[0]
    # the feedback text reaches the model through the rendered prompt
    assert "London" in second.messages[-1]["content"] and "in_source" in second.messages[-1]["content"]
    assert [(r.attempt, r.action) for r in run.trace] == [(0, "retry"), (1, "accept")]
    assert run.slm_calls == 2


def test_retries_are_bounded():
    run, backend = run_extract('{"entities": []}', retries=3)
    assert not run.ok
    assert len(backend.requests) == 4
    assert [r.action for r in run.trace] == ["retry", "retry", "retry", "halt"]


def test_symbolic_repair_feeds_violations_into_a_modified_input():
    seen = []

    def repair(inp, violations):
        seen.append([v.constraint for v in violations])
        return Num(value=inp.value + 10)

    step = Step(
        symbolic(
            "sub5",
            lambda x: Num(value=x.value - 5),
            Num,
            Num,
            Contract(value=[check("nonneg")(lambda i, o: o.value >= 0)]),
        ),
        retries=2,
        repair=repair,
    )
    run = Engine().run(step, {"value": -12})
    assert run.ok and run.output == Num(value=3)
    assert seen == [["nonneg"], ["nonneg"]]
    assert [r.input["value"] for r in run.trace] == [-12, -2, 8]


def test_repair_that_raises_halts_with_the_cause():
    def repair(inp, violations):
        raise ValueError("cannot repair")

    step = Step(
        symbolic("f", lambda x: Num(value=-1), Num, Num, Contract(value=[lambda i, o: o.value >= 0])),
        retries=1,
        repair=repair,
    )
    run = Engine().run(step, {"value": 0})
    assert not run.ok and "repair raised" in run.error.reason and "cannot repair" in run.error.reason


def test_repair_returning_a_dict_is_validated_into_the_input_type():
    seen = []

    def fn(num):
        seen.append(type(num).__name__)
        return Num(value=num.value)

    step = Step(
        symbolic("f", fn, Num, Num, Contract(value=[lambda i, o: o.value >= 0])),
        retries=1,
        repair=lambda i, vs: {"value": 4},
    )
    run = Engine().run(step, {"value": -1})
    assert run.ok and run.output == Num(value=4)
    assert seen == ["Num", "Num"]


def test_repair_returning_garbage_halts_with_a_clear_reason():
    step = Step(
        symbolic("f", lambda x: Num(value=-1), Num, Num, Contract(value=[lambda i, o: o.value >= 0])),
        retries=1,
        repair=lambda i, vs: {"w": "?"},
    )
    run = Engine().run(step, {"value": 0})
    assert not run.ok
    assert "repair" in run.error.reason and "Num" in run.error.reason


# ------------------------------------------------------------- recovery: fallback + halt
def test_fallback_recovers_a_failing_slm_with_a_symbolic_alternative():
    backend = ScriptedBackend(lambda r: '{"entities": []}')
    rule = symbolic(
        "capitalised",
        lambda q: Entities(entities=[w for w in q.text.split() if w[:1].isupper()]),
        Query,
        Entities,
        EXTRACT_CONTRACT,
    )
    run = Engine(backend).run(Fallback(extractor(retries=1), rule, label="extract_any"), {"text": "to Rome"})
    assert run.ok and run.output.entities == ["Rome"]
    assert [(r.primitive, r.action) for r in run.trace] == [
        ("extract", "retry"),
        ("extract", "fallback"),
        ("capitalised", "accept"),
    ]


def test_halt_is_a_structured_error():
    first = symbolic("parse", lambda q: Entities(entities=q.text.split()), Query, Entities, Contract())
    second = symbolic(
        "keep_known",
        lambda e: Entities(entities=[x for x in e.entities if x != "x"]),
        Entities,
        Entities,
        Contract(semantic=[covers]),
    )
    run = Engine().run(Sequence(first, second, label="pipeline"), {"text": "x x"})
    assert not run.ok and run.output is None
    err = run.error
    assert isinstance(err, HaltError)
    assert err.step == "pipeline/keep_known"
    assert err.primitive == "keep_known"
    assert err.input == Entities(entities=["x", "x"])
    assert [(v.level, v.constraint) for v in err.violations] == [("semantic", "covers_query")]
    msg = str(err)
    assert "halted at pipeline/keep_known" in msg and "keep_known" in msg and "covers_query" in msg
    as_dict = err.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict == {
        "step": "pipeline/keep_known",
        "primitive": "keep_known",
        "reason": "[semantic] covers_query: no entity extracted",
        "input": {"entities": ["x", "x"]},
        "violations": [
            {
                "primitive": "keep_known",
                "level": "semantic",
                "constraint": "covers_query",
                "message": "no entity extracted",
                "input": {"entities": ["x", "x"]},
            }
        ],
    }
    with pytest.raises(HaltError) as ei:
        run.raise_for_error()
    assert ei.value is err


def test_raise_for_error_returns_the_output_when_ok():
    run = Engine().run(symbolic("id", lambda x: x, Num, Num, Contract()), {"value": 7})
    assert run.raise_for_error() == Num(value=7)


def test_violation_round_trips_through_a_dict():
    violation = Violation("p", "value", "c", "msg", Num(value=1))
    back = Violation.from_dict(violation.to_dict())
    assert back == Violation("p", "value", "c", "msg", {"value": 1})
    assert str(violation) == "p: [value] c: msg"


# ------------------------------------------------------------- check_contracts=False (no-CVC ablation)
def test_ablation_lets_value_and_semantic_violations_through_without_retry():
    for reply in ('{"entities": ["Berlin"]}', '{"entities": []}'):
        run, backend = run_extract(reply, retries=3, check_contracts=False)
        assert run.ok, run.error
        assert run.output == Entities.model_validate_json(reply)
        assert len(backend.requests) == 1
        assert [r.action for r in run.trace] == ["accept"]


def test_ablation_still_needs_well_typed_outputs_and_does_not_retry():
    run, backend = run_extract("not json", retries=3, check_contracts=False)
    assert not run.ok and run.error.violations[0].level == "type"
    assert len(backend.requests) == 1


def test_ablation_runs_only_the_first_fallback_alternative():
    called = []
    first = symbolic("a", lambda x: (called.append("a"), {"value": "bad"})[1], Num, Num, Contract())
    second = symbolic("b", lambda x: (called.append("b"), Num(value=1))[1], Num, Num, Contract())
    run = Engine(check_contracts=False).run(Fallback(first, second), {"value": 0})
    assert not run.ok and called == ["a"]
    called.clear()
    assert Engine().run(Fallback(first, second), {"value": 0}).ok and called == ["a", "b"]


def test_ablation_skips_repair_and_batch_retries():
    repaired = []
    step = Step(
        symbolic("f", lambda x: Num(value=-1), Num, Num, Contract(value=[lambda i, o: o.value >= 0])),
        retries=2,
        repair=lambda i, v: repaired.append(1) or i,
    )
    run = Engine(check_contracts=False).run(step, {"value": 0})
    assert run.ok and run.output == Num(value=-1) and repaired == []

    tag = slm("tag", Item, Entities, Contract(semantic=[covers]), render=render)
    backend = ScriptedBackend(lambda r: '{"entities": []}')
    run = Engine(backend, check_contracts=False).run(
        ForEach(Step(tag, retries=2), over="items", max_items=3), {"items": [{"name": "a"}, {"name": "b"}]}
    )
    assert run.ok and len(backend.requests) == 2


def test_ablation_conditional_probe_passes_on_any_well_typed_output():
    probe = symbolic("probe", lambda x: Num(value=-1), Num, Num, Contract(value=[lambda i, o: o.value >= 0]))
    then = symbolic("then", lambda x: Num(value=100), Num, Num, Contract())
    other = symbolic("other", lambda x: Num(value=200), Num, Num, Contract())
    cond = Conditional(probe=probe, then=then, otherwise=other)
    assert Engine().run(cond, {"value": 0}).output == Num(value=200)
    assert Engine(check_contracts=False).run(cond, {"value": 0}).output == Num(value=100)


def test_iterate_with_a_retrying_body():
    calls = []

    def fn(num):
        calls.append(num.value)
        return Num(value=num.value + 1) if len(calls) % 2 == 0 else Num(value=-1)

    body = Step(symbolic("flaky", fn, Num, Num, Contract(value=[lambda i, o: o.value >= 0]), pure=False), retries=1)
    run = Engine().run(Iterate(body, until=lambda s: s.value >= 2, max_iters=5), {"value": 0})
    assert run.ok and run.output == Num(value=2)
    assert [r.action for r in run.trace] == ["retry", "accept", "retry", "accept"]
