"""Design-time checks: every ill-formed program is a DesignError at construction, with a clear message."""

from __future__ import annotations

import re
from typing import Optional

import pytest
from pydantic import BaseModel

from forethought.primitives import (
    Conditional,
    Contract,
    DesignError,
    Engine,
    Fallback,
    ForEach,
    Iterate,
    Parallel,
    Primitive,
    Program,
    Sequence,
    Step,
    slm,
    symbolic,
    type_mismatches,
)


class Text(BaseModel):
    text: str


class Words(BaseModel):
    words: list[str]


class Count(BaseModel):
    total: int


class NamedCount(BaseModel):
    total: int
    name: str


class StrCount(BaseModel):
    total: str


class MaybeCount(BaseModel):
    total: Optional[int] = None


class Item(BaseModel):
    name: str


def render(inp, fb):
    return [{"role": "user", "content": inp.model_dump_json()}]


def sym(name, input_type, output_type):
    return symbolic(name, lambda x: x, input_type, output_type, Contract())


def model(name, input_type, output_type, retries=0):
    return Step(slm(name, input_type, output_type, Contract(), render=render), retries=retries)


# ------------------------------------------------------------- Sequence
def test_sequence_rejects_an_incompatible_edge():
    with pytest.raises(DesignError) as ei:
        Sequence(sym("split", Text, Words), sym("count_text", Text, Count), label="pipe")
    msg = str(ei.value)
    assert "Sequence 'pipe': step 1 (split) -> step 2 (count_text)" in msg
    assert "output type Words does not fit input type Text" in msg
    assert "missing field 'text' (str)" in msg


def test_sequence_rejects_a_field_of_the_wrong_type():
    with pytest.raises(DesignError, match=r"field 'total' is str, expected int"):
        Sequence(sym("a", Text, StrCount), sym("b", Count, Count))


def test_sequence_names_the_edge_in_a_longer_chain():
    with pytest.raises(DesignError, match=re.escape("step 2 (b) -> step 3 (c)")):
        Sequence(sym("a", Text, Words), sym("b", Words, Count), sym("c", Text, Text))


def test_structurally_compatible_edges_are_accepted():
    # extra output fields are fine; an optional input field may be absent
    Sequence(sym("a", Text, NamedCount), sym("b", Count, Count))
    Sequence(sym("a", Text, Words), sym("b", MaybeCount, Count))
    # int fits Optional[int], but Optional[int] does not fit int
    Sequence(sym("a", Text, Count), sym("b", MaybeCount, Count))
    with pytest.raises(DesignError, match="field 'total' is Optional"):
        Sequence(sym("a", Text, MaybeCount), sym("b", Count, Count))
    assert type_mismatches(NamedCount, Count) == []
    assert type_mismatches(Count, NamedCount) == ["missing field 'name' (str)"]


def test_empty_composites_are_rejected():
    for build, what in (
        (lambda: Sequence(), "Sequence 'sequence' needs at least one step"),
        (lambda: Parallel(), "Parallel 'parallel' needs at least one branch"),
        (lambda: Fallback(), "Fallback 'fallback' needs at least one alternative"),
    ):
        with pytest.raises(DesignError, match=re.escape(what)):
            build()


def test_a_non_node_is_rejected():
    with pytest.raises(DesignError, match="expected a program node or a primitive, got str"):
        Sequence("split")


# ------------------------------------------------------------- branches
def test_parallel_rejects_a_branch_that_cannot_take_the_input():
    with pytest.raises(DesignError) as ei:
        Parallel(label="fan", a=sym("a", Text, Words), b=sym("b", Count, Count))
    assert "Parallel 'fan': input -> branch 'b'" in str(ei.value)
    assert "missing field 'total'" in str(ei.value)


def test_fallback_rejects_alternatives_with_another_input_or_output():
    with pytest.raises(DesignError) as ei:
        Fallback(sym("a", Text, Count), sym("b", Text, Words), label="fb")
    assert "Fallback 'fb': alternative 2 (b) output" in str(ei.value)
    assert "missing field 'total'" in str(ei.value)
    with pytest.raises(DesignError, match=re.escape("Fallback 'fb': input -> alternative 2 (b)")):
        Fallback(sym("a", Text, Count), sym("b", Words, Count), label="fb")


def test_conditional_rejects_branches_with_different_outputs():
    with pytest.raises(DesignError) as ei:
        Conditional(when=lambda x: True, then=sym("a", Text, Count), otherwise=sym("b", Text, Words), label="c")
    assert "Conditional 'c': branch outputs" in str(ei.value)
    # one direction fits (NamedCount -> Count) but the other does not: still rejected
    with pytest.raises(DesignError, match="branch outputs"):
        Conditional(when=lambda x: True, then=sym("a", Text, Count), otherwise=sym("b", Text, NamedCount))


def test_conditional_rejects_an_otherwise_branch_that_cannot_take_the_input():
    with pytest.raises(DesignError, match=re.escape("Conditional 'c': input -> otherwise")):
        Conditional(when=lambda x: True, then=sym("a", Text, Count), otherwise=sym("b", Count, Count), label="c")


def test_conditional_probe_output_must_feed_then():
    with pytest.raises(DesignError, match=re.escape("Conditional 'c': probe -> then")):
        Conditional(probe=sym("p", Text, Words), then=sym("a", Text, Count), otherwise=sym("b", Text, Count), label="c")


def test_conditional_needs_exactly_one_of_when_or_probe():
    then_step, otherwise_step = sym("a", Text, Count), sym("b", Text, Count)
    with pytest.raises(DesignError, match="exactly one of when="):
        Conditional(then=then_step, otherwise=otherwise_step)
    with pytest.raises(DesignError, match="exactly one of when="):
        Conditional(when=lambda x: True, probe=sym("p", Text, Text), then=then_step, otherwise=otherwise_step)


def test_conditional_when_must_be_callable():
    with pytest.raises(DesignError, match="when must be a predicate"):
        Conditional(when=True, then=sym("a", Text, Count), otherwise=sym("b", Text, Count))


# ------------------------------------------------------------- loops and fan-out
def test_iterate_body_must_be_state_to_state():
    with pytest.raises(DesignError) as ei:
        Iterate(sym("count", Text, Count), until=lambda s: True, max_iters=3, label="loop")
    msg = str(ei.value)
    assert "Iterate 'loop': body output -> body input" in msg
    assert "output type Count does not fit input type Text" in msg


@pytest.mark.parametrize("bad", [None, 0, -1, float("inf"), True, 2.0, "3"])
def test_unbounded_or_ill_typed_loop_budgets_are_rejected(bad):
    with pytest.raises(DesignError) as ei:
        Iterate(sym("s", Count, Count), until=lambda s: False, max_iters=bad, label="loop")
    msg = str(ei.value)
    assert "Iterate 'loop': max_iters must be a positive int" in msg
    assert "unbounded loops are not allowed" in msg
    assert repr(bad) in msg


def test_iterate_until_and_on_exhausted_are_checked():
    with pytest.raises(DesignError, match="until must be a predicate"):
        Iterate(sym("s", Count, Count), until=None, max_iters=2)
    with pytest.raises(DesignError, match="on_exhausted must be 'return' or 'halt'"):
        Iterate(sym("s", Count, Count), until=lambda s: True, max_iters=2, on_exhausted="forever")


@pytest.mark.parametrize("bad", [None, 0, -2, float("inf"), True])
def test_foreach_needs_a_declared_finite_fan_out(bad):
    with pytest.raises(DesignError, match=r"ForEach 'each': max_items must be a positive int \(declared fan-out\)"):
        ForEach(sym("s", Item, Count), over="items", max_items=bad, label="each")


def test_foreach_on_item_error_is_checked():
    with pytest.raises(DesignError, match="on_item_error must be 'halt' or 'skip'"):
        ForEach(sym("s", Item, Count), over="items", max_items=2, on_item_error="ignore")


@pytest.mark.parametrize("bad", ["", "_private", "model_config", "has space", 3])
def test_foreach_over_must_be_a_plain_field_name(bad):
    with pytest.raises(DesignError, match="over"):
        ForEach(sym("s", Item, Count), over=bad, max_items=2)


@pytest.mark.parametrize("bad", ["_private", "model_fields", "model_config"])
def test_parallel_branch_names_must_be_plain_field_names(bad):
    with pytest.raises(DesignError, match="branch name"):
        Parallel(**{bad: sym("s", Item, Count)})


def test_step_retries_must_be_a_non_negative_int():
    for bad in (-1, True, 1.5, None):
        with pytest.raises(DesignError, match="retries must be a non-negative int"):
            Step(sym("s", Item, Count), retries=bad)


# ------------------------------------------------------------- primitives
def test_a_primitive_without_a_contract_is_rejected():
    with pytest.raises(DesignError) as ei:
        symbolic("lonely", lambda x: x, Text, Text, None)
    assert "primitive 'lonely' has no contract" in str(ei.value)
    assert "Contract()" in str(ei.value)  # tells the user how to declare a type-only contract
    with pytest.raises(DesignError, match="has no contract"):
        slm("lonely_slm", Text, Text, None, render=render)


def test_primitive_construction_checks():
    with pytest.raises(DesignError, match="contract must be a Contract"):
        symbolic("p", lambda x: x, Text, Text, [lambda i, o: True])
    with pytest.raises(DesignError, match="output_type must be a pydantic model class"):
        symbolic("p", lambda x: x, Text, dict, Contract())
    with pytest.raises(DesignError, match="non-empty name"):
        symbolic("", lambda x: x, Text, Text, Contract())
    with pytest.raises(DesignError, match="needs a render function"):
        Primitive("p", kind="slm", input_type=Text, output_type=Text, contract=Contract())
    with pytest.raises(DesignError, match="needs a function"):
        Primitive("p", kind="symbolic", input_type=Text, output_type=Text, contract=Contract())


# ------------------------------------------------------------- static bound and budget
def test_static_slm_call_bound_per_operator():
    retried = model("a", Text, Text, retries=2)  # 3
    single = model("b", Text, Text)  # 1
    symbolic_step = sym("s", Text, Text)  # 0
    assert Sequence(retried, single, symbolic_step).max_slm_calls == 4
    assert Parallel(x=retried, y=single, z=symbolic_step).max_slm_calls == 4
    assert Fallback(retried, single, symbolic_step).max_slm_calls == 4
    assert Conditional(when=lambda x: True, then=retried, otherwise=single).max_slm_calls == 3
    assert Conditional(probe=single, then=retried, otherwise=symbolic_step).max_slm_calls == 1 + 3
    assert Iterate(Sequence(retried, single), until=lambda x: True, max_iters=5).max_slm_calls == 20
    assert ForEach(retried, over="items", max_items=7).max_slm_calls == 21
    nested = ForEach(Iterate(Fallback(retried, single), until=lambda x: True, max_iters=2), over="items", max_items=3)
    assert nested.max_slm_calls == 3 * 2 * 4
    assert Program(Sequence(symbolic_step, symbolic_step)).max_slm_calls == 0


def test_budget_exceeded_by_the_static_bound_is_rejected():
    retried = model("a", Text, Text, retries=2)
    loop = Iterate(retried, until=lambda x: True, max_iters=2, label="loop")
    prog = Program(loop, name="ok", max_slm_calls=6)
    assert prog.max_slm_calls == 6 and prog.budget == 6
    with pytest.raises(DesignError) as ei:
        Program(loop, name="tight", max_slm_calls=5)
    msg = str(ei.value)
    assert "Program 'tight': static bound of 6 SLM calls exceeds the budget of 5" in msg
    assert "a: 3" in msg  # names the SLM steps that contribute to the bound


def test_program_rejects_two_different_primitives_with_the_same_name():
    # cache and replay keys are per primitive name: two different primitives
    # sharing one would silently answer for each other
    p1 = symbolic("norm", lambda t: Text(text=t.text.lower()), Text, Text, Contract())
    p2 = symbolic("norm", lambda t: Text(text=t.text.upper()), Text, Text, Contract())
    with pytest.raises(DesignError, match="primitive name 'norm' is used by two different primitives"):
        Program(Sequence(p1, p2))
    # the same primitive used twice is fine
    assert Program(Sequence(p1, Step(p1, retries=1))).primitives() == [p1]


def test_slm_program_without_a_backend_is_a_design_error():
    with pytest.raises(DesignError, match="no backend"):
        Engine().run(model("a", Text, Text), {"text": "x"})
