"""Termination and the static SLM-call bound under adversarial primitives (property tests).

Random programs are built from every operator over a few primitives that,
depending on a seed and their input, answer correctly, violate their contract
at any level, return garbage, raise, or (for the SLM backend) fail a whole
batch. Whatever happens, a run must return (ok, a HaltError or a BackendError, nothing else,
never hang) and the backend must never see more requests than the program's
static bound.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from forethought.primitives import (
    BackendError,
    Cache,
    Conditional,
    Contract,
    DesignError,
    Engine,
    Fallback,
    ForEach,
    HaltError,
    Iterate,
    Parallel,
    Program,
    Recorder,
    Run,
    Sequence,
    SLMReply,
    Step,
    check,
    slm,
    symbolic,
)
from forethought.primitives.trace import Action

RUN_TIMEOUT_S = 300  # a hang guard, not a speed check: a run still going after 5 minutes never ends


class Item(BaseModel):
    value: int


class Batch(BaseModel):
    items: list[Item]


def stable_hash(*parts: Any) -> int:
    """A deterministic hash, independent of thread scheduling and PYTHONHASHSEED."""
    return int.from_bytes(hashlib.blake2b(repr(parts).encode(), digest_size=8).digest(), "big")


# Outputs with these values violate the contract at the value / semantic level,
# or make a check raise (fail-closed).
VALUE_BAD, SEMANTIC_BAD, CHECK_RAISES = -1, 1000, 1013


def _semantic(inp, output):
    if output.value == CHECK_RAISES:
        raise ArithmeticError("check blew up")
    return output.value != SEMANTIC_BAD or "semantic violation"


CONTRACT = Contract(
    value=[check("non_negative")(lambda i, o: o.value >= 0 or "negative")],
    semantic=[check("sane", "semantic")(_semantic)],
)

SYM_BEHAVIOURS = ("ok", "ok", "ok", "value", "semantic", "check_raises", "type", "none", "raise")
SLM_REPLIES = ("ok", "ok", "ok", "value", "semantic", "check_raises", "type", "not_json", "fenced")


def _symbolic_fn(name: str, seed: int):
    def fn(item: Item):
        behaviour = SYM_BEHAVIOURS[stable_hash(seed, name, item.value) % len(SYM_BEHAVIOURS)]
        if behaviour == "ok":
            return Item(value=(item.value + 1 + stable_hash(name) % 5) % 97)
        if behaviour == "value":
            return Item(value=VALUE_BAD)
        if behaviour == "semantic":
            return Item(value=SEMANTIC_BAD)
        if behaviour == "check_raises":
            return Item(value=CHECK_RAISES)
        if behaviour == "type":
            return {"value": "not a number"}
        if behaviour == "none":
            return None
        raise ValueError(f"{name} failed on {item.value}")

    return fn


class AdversarialBackend:
    name = "adversarial"

    def __init__(self, seed: int, fail_batches: bool = True, nondeterministic: bool = False):
        self.seed = seed
        self.fail_batches = fail_batches
        self.nondeterministic = nondeterministic  # answers also depend on how many requests came before
        self.requests = 0
        self.lock = threading.Lock()

    def complete(self, requests):
        with self.lock:
            start = self.requests
            self.requests += len(requests)
        first = requests[0]
        if (
            self.fail_batches
            and stable_hash(self.seed, "batch", first.primitive, first.input.value, first.feedback) % 7 == 0
        ):
            raise TimeoutError("backend timed out")
        return [SLMReply(self._answer(r, start + k), {"backend": self.name}) for k, r in enumerate(requests)]

    def _answer(self, request, position: int) -> str:
        salt = position if self.nondeterministic else 0
        reply = SLM_REPLIES[
            stable_hash(self.seed, request.primitive, request.input.value, request.feedback, salt) % len(SLM_REPLIES)
        ]
        ok = (request.input.value + 2) % 97
        return {
            "ok": f'{{"value": {ok}}}',
            "fenced": f'```json\n{{"value": {ok}}}\n```',
            "value": f'{{"value": {VALUE_BAD}}}',
            "semantic": f'{{"value": {SEMANTIC_BAD}}}',
            "check_raises": f'{{"value": {CHECK_RAISES}}}',
            "type": '{"value": [1, 2]}',
            "not_json": "I think the answer is 3",
        }[reply]


def _render(inp, feedback):
    return [{"role": "user", "content": inp.model_dump_json()}, *({"role": "user", "content": f} for f in feedback)]


def _pred(seed: int, tag: str):
    """A predicate that answers by hash and sometimes raises."""

    def predicate(item: Item) -> bool:
        draw = stable_hash(seed, tag, item.value) % 10
        if draw == 0:
            raise LookupError(f"predicate {tag} failed")
        return draw % 2 == 0

    return predicate


# ------------------------------------------------------------- program specs
leaf = st.tuples(
    st.just("step"), st.sampled_from(["sym_a", "sym_b", "slm_a", "slm_b"]), st.integers(0, 2), st.booleans()
)


def _extend(children):
    kids = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.tuples(st.just("seq"), kids),
        st.tuples(st.just("par"), kids),
        st.tuples(st.just("fallback"), kids),
        st.tuples(st.just("when"), children, children),
        st.tuples(st.just("probe"), children, children, children),
        st.tuples(st.just("iterate"), children, st.integers(1, 3), st.sampled_from(["return", "halt"])),
        st.tuples(
            st.just("foreach"), children, st.integers(1, 3), st.sampled_from(["halt", "skip"]), st.integers(0, 4)
        ),
    )


specs = st.recursive(leaf, _extend, max_leaves=10)


class Builder:
    """Turns a spec into a program over Item -> Item; every node keeps the Item -> Item interface."""

    def __init__(self, seed: int):
        self.seed = seed
        self.n = 0
        self.prims = {
            "sym_a": symbolic("sym_a", _symbolic_fn("sym_a", seed), Item, Item, CONTRACT),
            "sym_b": symbolic("sym_b", _symbolic_fn("sym_b", seed), Item, Item, CONTRACT, pure=False),
            "slm_a": slm("slm_a", Item, Item, CONTRACT, render=_render),
            "slm_b": slm("slm_b", Item, Item, CONTRACT, render=_render),
        }

    def _name(self, what: str) -> str:
        self.n += 1
        return f"{what}_{self.n}"

    def build(self, spec) -> Any:
        kind = spec[0]
        if kind == "step":
            _, prim, retries, repair = spec
            return Step(
                self.prims[prim], retries=retries, repair=(lambda x, vs: Item(value=x.value + 1)) if repair else None
            )
        if kind == "seq":
            return Sequence(*[self.build(c) for c in spec[1]], label=self._name("seq"))
        if kind == "fallback":
            return Fallback(*[self.build(c) for c in spec[1]], label=self._name("fb"))
        if kind == "par":
            branches = {f"b{i}": self.build(c) for i, c in enumerate(spec[1])}
            par = Parallel(label=self._name("par"), **branches)
            merge = symbolic(
                self._name("merge"),
                lambda p: Item(value=sum(getattr(p, k).value for k in branches) % 97),
                par.output_type,
                Item,
                Contract(),
            )
            return Sequence(par, merge, label=self._name("par_seq"))
        if kind == "when":
            return Conditional(
                when=_pred(self.seed, self._name("when")),
                then=self.build(spec[1]),
                otherwise=self.build(spec[2]),
                label=self._name("cond"),
            )
        if kind == "probe":
            return Conditional(
                probe=self.build(spec[1]),
                then=self.build(spec[2]),
                otherwise=self.build(spec[3]),
                label=self._name("probe"),
            )
        if kind == "iterate":
            _, body, max_iters, on_exhausted = spec
            return Iterate(
                self.build(body),
                until=_pred(self.seed, self._name("until")),
                max_iters=max_iters,
                on_exhausted=on_exhausted,
                label=self._name("loop"),
            )
        if kind == "foreach":
            _, body, max_items, on_error, n_items = spec
            # n_items may exceed max_items: the run must then halt, not overrun the bound
            fan = symbolic(
                self._name("fan"),
                lambda x, n=n_items: Batch(items=[Item(value=(x.value + i) % 97) for i in range(n)]),
                Item,
                Batch,
                Contract(),
            )
            fe = ForEach(
                self.build(body), over="items", max_items=max_items, on_item_error=on_error, label=self._name("each")
            )
            gather = symbolic(
                self._name("gather"),
                lambda r: Item(value=sum(x.value for x in r.results if x is not None) % 97),
                fe.output_type,
                Item,
                Contract(),
            )
            return Sequence(fan, fe, gather, label=self._name("fe_seq"))
        raise AssertionError(kind)


def run_with_timeout(engine: Engine, program, inp) -> Run:
    box: dict[str, Any] = {}

    def target():
        try:
            box["run"] = engine.run(program, inp)
        except BaseException as exc:  # surfaced below: anything but a Run is a failure
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(RUN_TIMEOUT_S)
    assert not thread.is_alive(), "run did not terminate"
    if "exc" in box:
        raise AssertionError(f"run raised {type(box['exc']).__name__} instead of returning") from box["exc"]
    return box["run"]


engine_opts = st.fixed_dictionaries(
    {
        "check_contracts": st.booleans(),
        "trace": st.sampled_from(["full", "steps", "off"]),
        "max_workers": st.sampled_from([1, 4]),
        "cache": st.sampled_from([None, "cache"]),
    }
)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs, seed=st.integers(0, 2**16), start=st.integers(0, 96), opts=engine_opts)
def test_every_run_terminates_within_the_static_slm_bound(spec, seed, start, opts):
    program = Program(Builder(seed).build(spec), name="random")
    bound = program.max_slm_calls
    backend = AdversarialBackend(seed)
    run = run_with_timeout(
        Engine(backend, **(opts | {"cache": Cache() if opts["cache"] else None})), program, {"value": start}
    )

    assert isinstance(run, Run)
    if run.ok:
        assert run.output is not None
        assert Item.model_validate(run.output.model_dump())  # well-typed at the root
    elif run.backend_error is not None:  # the backend raised: the run stopped, no verdict on an answer
        assert isinstance(run.backend_error, BackendError) and run.error is None
        assert run.output is None and run.backend_error.path and run.backend_error.primitive
    else:
        assert isinstance(run.error, HaltError)
        assert run.output is None
        assert run.error.step and run.error.reason
    assert backend.requests <= bound, f"{backend.requests} SLM calls > static bound {bound}"
    assert run.slm_calls == backend.requests
    assert all(r.action in get_args(Action) for r in run.trace)
    if not opts["check_contracts"]:
        assert not any(r.action == "retry" for r in run.trace)
    if opts["trace"] == "off":
        assert len(run.trace) == 0

    # the bound is also what a budget is checked against at design time
    Program(program.root, max_slm_calls=bound)
    if bound:
        try:
            Program(program.root, max_slm_calls=bound - 1)
        except DesignError as exc:
            assert f"static bound of {bound} SLM calls exceeds the budget of {bound - 1}" in str(exc)
        else:
            raise AssertionError("a budget below the static bound was accepted")


def _failure(run: Run) -> tuple:
    if run.backend_error is not None:
        return ("backend", run.backend_error.path, str(run.backend_error))
    return ("halt", run.error.step, run.error.reason)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs, seed=st.integers(0, 2**16), start=st.integers(0, 96))
def test_runs_are_deterministic_for_deterministic_primitives(spec, seed, start):
    # Same program, same (hash-driven) primitives: the same outcome and the
    # same trace, whatever order the parallel branches finish in.
    program = Program(Builder(seed).build(spec))
    first = run_with_timeout(Engine(AdversarialBackend(seed), max_workers=4), program, {"value": start})
    second = run_with_timeout(Engine(AdversarialBackend(seed), max_workers=4), program, {"value": start})
    # Sequential branches (one worker) stop at the first halting branch, so only
    # the outcome, not the trace, is compared with them.
    sequential = run_with_timeout(Engine(AdversarialBackend(seed), max_workers=1), program, {"value": start})
    for other in (second, sequential):
        assert first.ok == other.ok
        if first.ok:
            assert first.output.model_dump() == other.output.model_dump()
        else:
            assert _failure(first) == _failure(other)
    assert first.slm_calls == second.slm_calls

    def key(entry):
        return (entry.path, entry.attempt, entry.action, repr(entry.output))

    assert sorted(map(key, first.trace)) == sorted(map(key, second.trace))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs, seed=st.integers(0, 2**16), start=st.integers(0, 96))
def test_strict_replay_reproduces_any_recorded_run(spec, seed, start):
    # Record with a nondeterministic adversarial backend (its answers depend on
    # the call count, so on retries and on thread scheduling), replay with a
    # backend that would answer differently: the replay must be the recorded
    # run, call for call. (Batch failures are left out: a failed call leaves
    # nothing to replay.)
    program = Program(Builder(seed).build(spec))
    rec = Recorder("record")
    recording = AdversarialBackend(seed, fail_batches=False, nondeterministic=True)
    recorded = run_with_timeout(Engine(recording, recorder=rec, max_workers=4), program, {"value": start})
    other = AdversarialBackend(seed + 1, fail_batches=False)
    replayed = run_with_timeout(
        Engine(other, recorder=Recorder("strict", rec.entries), max_workers=4), program, {"value": start}
    )
    assert other.requests == 0 and replayed.slm_calls == 0
    assert recorded.ok == replayed.ok
    if recorded.ok:
        assert recorded.output.model_dump() == replayed.output.model_dump()
    else:
        assert recorded.error.to_dict() == replayed.error.to_dict()

    def key(entry):
        return (entry.path, entry.attempt, entry.action, repr(entry.input), repr(entry.output), repr(entry.contract))

    assert sorted(map(key, recorded.trace)) == sorted(map(key, replayed.trace))


class _AlwaysWrong:
    name = "always-wrong"

    def __init__(self):
        self.requests = 0

    def complete(self, requests):
        self.requests += len(requests)
        return [SLMReply("not json") for _ in requests]


def test_the_adversary_exercises_every_failure_mode():
    # Guard against a vacuous property: over a fixed set of programs the
    # adversarial primitives must produce every violation level, halts and
    # successes, batches that fail, and runs that use the full bound.
    seen_levels, outcomes, hit_bound = set(), set(), False
    for seed in range(40):
        spec = ("foreach", ("fallback", [("step", "slm_a", 2, False), ("step", "sym_a", 1, True)]), 3, "skip", 3)
        program = Program(
            Builder(seed).build(("seq", [spec, ("step", "slm_b", 1, False), ("step", "sym_b", 0, False)]))
        )
        backend = AdversarialBackend(seed)
        run = Engine(backend).run(program, {"value": seed % 97})
        outcomes.add(run.ok)
        # A failed batch now stops the run (a backend error), so the full bound is
        # reached by a backend that answers, always wrongly.
        wrong = _AlwaysWrong()
        Engine(wrong).run(program, {"value": seed % 97})
        hit_bound |= wrong.requests == program.max_slm_calls
        for viol in run.trace.violations():
            seen_levels.add(viol["level"])
            if "could not be evaluated" in viol["message"]:
                seen_levels.add("fail-closed")
        if run.backend_error is not None and "timed out" in str(run.backend_error):
            seen_levels.add("batch-failure")
    assert seen_levels == {"type", "value", "semantic", "runtime", "fail-closed", "batch-failure"}
    assert outcomes == {True, False}
    assert hit_bound
