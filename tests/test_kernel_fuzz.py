"""Property-based fuzzing of the kernel: every invariant holds and nothing crashes.

Hypothesis draws the random registry and multi-turn input (through
``st.randoms``, so failures shrink) and a seed; each drawn scenario is then
run against SEEDS_PER_EXAMPLE differently-seeded adversarial backends, each
run being one case. The default is 4,000 cases with CVC and 800 without (the suite's time budget);
set FORETHOUGHT_FUZZ_CASES for more (e.g. 200000).

What each case asserts (``tests/kernel_fuzz.py``): INV-S, INV-T (halts within
the static SLM-call bound), INV-E, INV-L on the values themselves (every
argument a tool received is tau's value for that name, else S's value at that
moment), INV-R (every ordered task has an outcome; a skipped task has a
dependency that did not execute; with CVC a task runs only after its
dependencies executed, and on the first seed of each scenario every turn with
an effect-free failed task is replayed without it and the other tasks must
come out identical), no tool outside the turn's registry is ever called
(registries leave out some implemented tools, which the adversary names), and
the world changed exactly by the committed calls.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forethought.kernel.domains.base import Domain, DomainTool
from forethought.kernel.environment import Environment
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.registry.model import ToolSpec
from forethought.kernel.scratchpad import Scratchpad
from forethought.primitives import SLMReply
from tests.kernel_fuzz import FuzzState, random_case, run_case

# 4,000 in the suite (its time budget); the recorded figure runs FORETHOUGHT_FUZZ_CASES=10000 (README)
CASES = int(os.environ.get("FORETHOUGHT_FUZZ_CASES", "4000"))
SEEDS_PER_EXAMPLE = 4  # adversarial backends per drawn scenario (hypothesis' own overhead is per example)
KERNEL = Kernel(KernelConfig(cvc=True))
KERNEL_NO_CVC = Kernel(KernelConfig(cvc=False))
SEEN: dict[str, set] = {"status": set(), "halted": set()}
STATS: Counter = Counter()


def _fuzz_settings(n: int):
    # print_blob: a failure in CI prints the @reproduce_failure line that replays it exactly (no database here).
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=True,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _observe(out) -> None:
    STATS.update(out.stats)
    for turn in out.turns:
        SEEN["status"].update(o.status for o in turn.outcomes.values())
        STATS["fan_out_instances"] += sum(
            "[" in tid for tid in turn.outcomes
        )  # instances of decompose's for_each tasks
        STATS["conditions_held"] += sum(o.condition is True for o in turn.outcomes.values())
        if turn.halted:
            SEEN["halted"].add(turn.halted["step"].split("/")[-1])


@_fuzz_settings(CASES // SEEDS_PER_EXAMPLE)
@given(rng=st.randoms(use_true_random=False), seed=st.integers(0, 2**31 - 1))
def test_invariants_hold_under_adversarial_primitives(rng, seed):
    case = random_case(rng)
    for k in range(SEEDS_PER_EXAMPLE):
        out = run_case(KERNEL, case, seed + k, counterfactual=k == 0)
        assert not out.problems, (seed + k, out.problems)
        _observe(out)


def test_fuzzing_reached_every_outcome():
    """The fuzz run above is only meaningful if the adversarial outputs reach every branch and every check bites."""
    if not SEEN["status"]:  # run alone: do a short pass here
        for seed in range(400):
            _observe(run_case(KERNEL, random_case(random.Random(seed)), seed, counterfactual=True))
    assert {
        "executed",
        "blocked",
        "missing_function",
        "missing_param",
        "tool_failed",
        "skipped",
        "skipped_condition",
    } <= SEEN["status"]
    assert STATS["fan_out_instances"] >= 1 and STATS["conditions_held"] >= 1, (
        STATS
    )  # the when/for_each branches ran too
    assert {"decompose", "build_dep_graph"} <= SEEN["halted"]
    assert STATS["calls_checked"] >= 100, STATS  # INV-L compared bound values on real calls
    assert STATS["counterfactual_runs"] >= 50, STATS  # INV-R replays happened
    assert STATS["unregistered_proposed"] >= 50, STATS  # the adversary named implemented-but-unregistered tools
    # same-turn binding was reached: a dependency's entry bound (27-42 times at 10,000 cases, depending on the
    # draw), and S shadowed by a result field or a same-tool argument (2-11 times); random registries rarely
    # line a dependency up with a same-named parameter, so tests/test_kernel_results.py has each case by itself
    if STATS["calls_checked"] >= 2000:  # the default 10,000-case run, not the short pass run alone
        assert STATS["bound_from_dependencies"] >= 10, STATS
        assert STATS["shadowed_by_a_result_field"] + STATS["shadowed_as_same_tool_argument"] >= 1, STATS
        # an earlier turn's unfinished task bound a later call's argument (docs/kernel.md, "Unfinished tasks"): 69 times
        # in 2,000 cases, so INV-L's restatement with that step is checked on real calls
        assert STATS["bound_from_unfinished"] >= 10, STATS


@_fuzz_settings(max(50, CASES // 5 // SEEDS_PER_EXAMPLE))
@given(rng=st.randoms(use_true_random=False), seed=st.integers(0, 2**31 - 1))
def test_without_cvc_nothing_crashes_and_no_unregistered_tool_runs(rng, seed):
    case = random_case(rng)
    for k in range(SEEDS_PER_EXAMPLE):
        out = run_case(KERNEL_NO_CVC, case, seed + k)
        assert not out.problems, (seed + k, out.problems)


# ---------------------------------------------------------------- minimal reproductions of fuzz findings
class _Scripted:
    name = "scripted"

    def __init__(self, answers: dict[str, object]):
        self.answers = answers

    def complete(self, requests):
        return [SLMReply(json.dumps(self.answers[r.primitive]), {"backend": "scripted"}) for r in requests]


def _one_tool_turn(task_params: dict, context: dict, state: dict, kernel: Kernel = KERNEL):
    spec = ToolSpec(
        name="greet",
        description="greet someone",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
    dom = Domain("fuzz", FuzzState, "repro")
    dom.tools["greet"] = DomainTool(spec, lambda state, **kw: {"ok": True, "got": kw}, [], "fuzz")
    env = Environment([dom])
    backend = _Scripted(
        {
            "decompose": {
                "tasks": [
                    {
                        "id": "t0",
                        "text": "greet them",
                        "tool_name": "greet",
                        "depends_on": [],
                        "parameters": task_params,
                    }
                ]
            },
            "match_func": {"tool_name": "greet"},
            "match_fill": {"values": {"name": None}},
        }
    )
    res, _ = kernel.run_turn(
        user="greet them",
        env=env,
        scratchpad=Scratchpad(state),
        registry=env.registry(),
        backend=backend,
        turn_context=context,
        trace="off",
    )
    return res


def test_lookup_prefers_the_turn_context_over_a_stale_scratchpad_value():
    res = _one_tool_turn({}, {"name": "blue"}, {"name": "stale"})
    assert [(c.tool, c.arguments) for c in res.committed_calls] == [("greet", {"name": "blue"})]


def test_a_null_from_decompose_does_not_hide_the_turn_context():
    """Fuzz finding (INV-L): decompose stating a parameter as null must leave it unbound, so Lookup still finds the
    turn context's value before S. The bug: TurnState.task_context (then tau_for) merged the task's parameters over
    the context, null included, so the stale scratchpad value was used instead."""
    res = _one_tool_turn({"name": None}, {"name": "blue"}, {"name": "stale"})
    assert [(c.tool, c.arguments) for c in res.committed_calls] == [("greet", {"name": "blue"})], res.calls
