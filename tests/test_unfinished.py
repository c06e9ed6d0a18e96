"""Memory of unfinished tasks (issue 16, part 3; docs/kernel.md "Unfinished tasks").

A blocked or missing_param task leaves ``unfinished.<tool>`` in S at the end of its turn: its bound arguments
(never a secret one), what was missing, its outcome, reason, task text and turn. A later turn's Lookup binds from
it after τ and before S; a later committed call of the tool overwrites it with outcome "executed", never removes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field

from forethought.data_gen.verify import DEFAULT_SOLUTIONS, Divergence, verify_solution
from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.domains.base import Domain
from forethought.kernel.environment import Environment
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.registry.model import Prerequisite, Sat
from forethought.kernel.scenario import Turn
from forethought.kernel.scratchpad import Scratchpad, bindable, is_truncated
from forethought.kernel.solution_file import load_solution
from forethought.kernel.unfinished import open_arguments


class ShopState(BaseModel):
    orders: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


SHOP = Domain("unfinished_test", ShopState)
OPEN = Prerequisite(key="order_open", sat=Sat(op="truthy"), description="the order is open")


@SHOP.tool(side_effect=True, secret=["pin"])
def order(state: ShopState, item: str, quantity: int, pin: str, gift_wrap: bool = False) -> dict:
    """Order an item.

    Args:
        item: The item.
        quantity: How many.
        pin: The card PIN.
        gift_wrap: Wrap it.
    """
    state.orders.append({"item": item, "quantity": quantity, "gift_wrap": gift_wrap})
    return {"order_id": len(state.orders)}


@SHOP.tool(side_effect=True, prerequisites=[OPEN])
def annotate(state: ShopState, order_id: int, note: str) -> dict:
    """Add a note to an open order.

    Args:
        order_id: The order.
        note: The note.
    """
    state.notes.append(note)
    return {"noted": True}


@SHOP.tool(side_effect=True, writes={"order_open": "const:true"})
def reopen(state: ShopState, order_id: int) -> dict:
    """Reopen an order.

    Args:
        order_id: The order.
    """
    return {"reopened": order_id}


KERNEL = Kernel(KernelConfig(strict_invariants=True))


def run_turns(turns: list[dict[str, Any]], config: dict[str, Any] | None = None, kernel: Kernel = KERNEL):
    env = Environment([SHOP], {"unfinished_test": {}})
    scratchpad = Scratchpad(config)
    results, requests = [], []
    for i, raw in enumerate(turns):
        turn = Turn.model_validate({"calls": [], **raw})
        backend = OracleBackend(turn, "test")
        inner = backend.complete

        def complete(reqs, inner=inner):
            requests.extend(reqs)
            return inner(reqs)

        backend.complete = complete  # type: ignore[method-assign]
        res, _ = kernel.run_turn(
            user=turn.user,
            env=env,
            scratchpad=scratchpad,
            registry=env.registry(),
            backend=backend,
            turn_context=turn.context,
            index=i,
        )
        assert not res.invariant_violations and res.halted is None, (res.invariant_violations, res.halted)
        results.append(res)
    return results, env.states["unfinished_test"], scratchpad, requests


def tau(value: Any) -> dict[str, Any]:
    return {"source": "request", "value": value}


ORDER_NO_QUANTITY = {
    "user": "Order mugs, gift-wrapped, my PIN is 4321",
    "tasks": [
        {
            "id": "t1",
            "text": "Order gift-wrapped mugs",
            "tool": "order",
            "parameters": {"item": "mugs", "pin": "4321", "gift_wrap": True},
            "bindings": {
                "item": tau("mugs"),
                "quantity": {"source": "missing"},
                "pin": tau("4321"),
                "gift_wrap": tau(True),
            },
            "outcome": "missing_param",
        }
    ],
    "order": ["t1"],
}
QUANTITY_GIVEN = {
    "user": "Make it 3, PIN 4321",
    "tasks": [
        {
            "id": "t1",
            "text": "Order 3 of the earlier item",
            "tool": "order",
            "parameters": {"quantity": 3, "pin": "4321"},
            "bindings": {
                "item": {"source": "scratchpad", "value": "mugs"},
                "quantity": tau(3),
                "pin": tau("4321"),
                "gift_wrap": {"source": "scratchpad", "value": True},
            },
        }
    ],
    "order": ["t1"],
}


def test_a_missing_param_task_leaves_its_bound_arguments_but_never_a_secret():
    (res,), world, scratchpad, _ = run_turns([ORDER_NO_QUANTITY])
    assert world.orders == []
    entry = scratchpad.get("unfinished.order")
    assert entry == {
        "tool": "order",
        "task": "Order gift-wrapped mugs",
        "turn": 0,
        "outcome": "missing_param",
        "reason": res.outcomes["t1"].reason,
        "arguments": {"item": "mugs", "gift_wrap": True},
        "missing": ["quantity"],
    }
    assert "4321" not in repr(scratchpad.snapshot())  # the PIN reached no entry of S
    assert scratchpad.last_source("unfinished.order") == "unfinished"


def test_a_blocked_task_leaves_what_decompose_stated_for_its_tool():
    turn = {
        "user": "Note 'fragile' on order 7",
        "tasks": [
            {
                "id": "t1",
                "text": "Add the note fragile to order 7",
                "tool": "annotate",
                "parameters": {"order_id": 7, "note": "fragile"},
                "prerequisites": [{"key": "order_open", "outcome": "not_met"}],
                "outcome": "blocked",
            }
        ],
        "order": ["t1"],
    }
    (res,), world, scratchpad, _ = run_turns([turn], config={"order_open": False})
    assert world.notes == [] and res.outcomes["t1"].status == "blocked"
    entry = scratchpad.get("unfinished.annotate")
    assert (entry["outcome"], entry["arguments"], entry["missing"]) == (
        "blocked",
        {"order_id": 7, "note": "fragile"},
        [],
    )
    assert "order_open" in entry["reason"]
    # the next turn reopens the order and adds "the note from before": order_id from the reopen (a dependency's
    # entry wins), the note from the unfinished entry
    again = {
        "user": "Reopen order 7 and add that note",
        "tasks": [
            {
                "id": "t1",
                "text": "Reopen order 7",
                "tool": "reopen",
                "parameters": {"order_id": 7},
                "bindings": {"order_id": tau(7)},
            },
            {
                "id": "t2",
                "text": "Add the earlier note",
                "tool": "annotate",
                "depends_on": ["t1"],
                "prerequisites": [{"key": "order_open", "outcome": "met"}],
                "bindings": {
                    "order_id": {"source": "scratchpad", "value": 7},
                    "note": {"source": "scratchpad", "value": "fragile"},
                },
            },
        ],
        "order": ["t1", "t2"],
    }
    (_, res2), world, scratchpad, _ = run_turns([turn, again], config={"order_open": False})
    note = res2.bindings["t2"]["note"]
    assert (note.value, note.entry, note.consulted) == (
        "fragile",
        "unfinished.annotate",
        ["request", "dependencies", "unfinished"],
    )
    assert res2.bindings["t2"]["order_id"].entry is None  # bound from the reopen's argument, before the entry
    assert world.notes == ["fragile"] and scratchpad.get("unfinished.annotate")["outcome"] == "executed"


def test_a_later_turn_completes_it_and_the_entry_is_overwritten_not_removed():
    (_, res), world, scratchpad, _ = run_turns([ORDER_NO_QUANTITY, QUANTITY_GIVEN])
    assert world.orders == [{"item": "mugs", "quantity": 3, "gift_wrap": True}]
    item = res.bindings["t1"]["item"]
    assert (item.source, item.entry, item.consulted) == ("scratchpad", "unfinished.order", ["request", "unfinished"])
    # the optional gift_wrap the unfinished task had bound is a parameter of the resumed call too
    assert res.bindings["t1"]["gift_wrap"].entry == "unfinished.order"
    assert "unfinished.order" in scratchpad  # INV-S: overwritten, never deleted
    assert scratchpad.get("unfinished.order") == {
        "tool": "order",
        "task": "Order 3 of the earlier item",
        "turn": 1,
        "outcome": "executed",
        "reason": "completed (unfinished since turn 0)",
        "arguments": {},
        "missing": [],
    }
    assert open_arguments(scratchpad, "order") == {}
    # a completed entry binds nothing: a third order restates the item, and a missing one stays missing
    third = {
        "user": "Order 2 more, PIN 4321",
        "tasks": [
            {
                "id": "t1",
                "text": "Order 2 more",
                "tool": "order",
                "parameters": {"quantity": 2, "pin": "4321"},
                "bindings": {"item": {"source": "scratchpad", "value": "mugs"}, "quantity": tau(2), "pin": tau("4321")},
            }
        ],
        "order": ["t1"],
    }
    (_, _, res3), _, _, _ = run_turns([ORDER_NO_QUANTITY, QUANTITY_GIVEN, third])
    assert res3.bindings["t1"]["item"].entry is None and res3.bindings["t1"]["item"].consulted == [
        "request",
        "scratchpad",
    ]


def test_the_user_stated_value_wins_over_the_unfinished_entry():
    """INV-L: τ first. "Make it 3 cups" changes the item the unfinished order had."""
    cups = {
        **QUANTITY_GIVEN,
        "user": "Make it 3 cups, PIN 4321",
        "tasks": [
            {
                **QUANTITY_GIVEN["tasks"][0],
                "parameters": {"item": "cups", "quantity": 3, "pin": "4321"},
                "bindings": {**QUANTITY_GIVEN["tasks"][0]["bindings"], "item": tau("cups")},
            }
        ],
    }
    (_, res), world, _, _ = run_turns([ORDER_NO_QUANTITY, cups])
    assert res.bindings["t1"]["item"].source == "request" and world.orders[0]["item"] == "cups"


def test_the_entry_is_in_the_next_turns_state_view_and_not_in_its_own_turn():
    (_, _), _, _, requests = run_turns([ORDER_NO_QUANTITY, QUANTITY_GIVEN])
    decomposes = [r for r in requests if r.primitive == "decompose"]
    assert "unfinished.order" not in decomposes[0].input.state
    assert decomposes[1].input.state["unfinished.order"]["arguments"] == {"item": "mugs", "gift_wrap": True}


def test_tasks_of_one_turn_do_not_bind_from_each_others_entries():
    """Entries are written when the turn ends (INV-R: a failed task changes nothing its turn's other tasks see)."""
    turn = {
        "user": "Order mugs, PIN 4321, and order 2 plates, PIN 4321",
        "tasks": [
            {
                "id": "t1",
                "text": "Order mugs",
                "tool": "order",
                "parameters": {"item": "mugs", "pin": "4321"},
                "bindings": {"item": tau("mugs"), "quantity": {"source": "missing"}, "pin": tau("4321")},
                "outcome": "missing_param",
            },
            {
                "id": "t2",
                "text": "Order 2 plates",
                "tool": "order",
                "parameters": {"quantity": 2, "pin": "4321"},
                "bindings": {"item": {"source": "missing"}, "quantity": tau(2), "pin": tau("4321")},
                "outcome": "missing_param",
            },
        ],
        "order": ["t1", "t2"],
    }
    (res,), world, scratchpad, _ = run_turns([turn])
    assert res.bindings["t2"]["item"].source == "missing" and world.orders == []
    assert scratchpad.get("unfinished.order")["arguments"] == {"quantity": 2}  # the later task of the tool wrote last


def test_an_over_long_argument_is_kept_as_a_marker_that_is_never_bound():
    long_item = "m" * 700
    turn = {
        **ORDER_NO_QUANTITY,
        "user": f"Order {long_item}, PIN 4321",
        "tasks": [
            {
                **ORDER_NO_QUANTITY["tasks"][0],
                "parameters": {"item": long_item, "pin": "4321"},
                "bindings": {"item": tau(long_item), "quantity": {"source": "missing"}, "pin": tau("4321")},
            }
        ],
    }
    (_,), _, scratchpad, _ = run_turns([turn])
    kept = scratchpad.get("unfinished.order")["arguments"]["item"]
    assert is_truncated(kept) and kept["$truncated"] == 702
    assert "item" not in bindable(scratchpad.snapshot())["unfinished.order"]["arguments"]  # no grounding from a preview
    again = {
        "user": "Make it 3, PIN 4321",
        "tasks": [
            {
                "id": "t1",
                "text": "Order 3",
                "tool": "order",
                "parameters": {"quantity": 3, "pin": "4321"},
                "bindings": {"item": {"source": "missing"}, "quantity": tau(3), "pin": tau("4321")},
                "outcome": "missing_param",
            }
        ],
        "order": ["t1"],
    }
    (_, res), _, _, _ = run_turns([turn, again])
    assert res.bindings["t1"]["item"].source == "missing"
    # the cap is the result entries' one (KernelConfig.result_entry_max_chars)
    (_,), _, scratchpad, _ = run_turns(
        [turn], kernel=Kernel(KernelConfig(strict_invariants=True, result_entry_max_chars=10_000))
    )
    assert scratchpad.get("unfinished.order")["arguments"]["item"] == long_item


SOLUTION = DEFAULT_SOLUTIONS / "airline" / "booking_missing_dob_then_given.json"


def test_the_issues_failing_solution_verifies_and_its_tag_needs_the_replays_evidence():
    """Issue 16.3's minimal case: before the unfinished memory, turn 1's decompose was refused ('James' not grounded)
    and the flight, cabin and card were unbound."""
    sol = load_solution(SOLUTION)
    results = verify_solution(sol, paraphrases=False)
    assert results[1].bindings["t1"]["cabin"].entry == "unfinished.book_reservation"
    # the tag is refused on a solution whose later turn binds nothing from an unfinished entry
    plain = load_solution(Path(DEFAULT_SOLUTIONS) / "file_system" / "paper_figure1.json")
    plain = plain.model_copy(update={"tags": [*plain.tags, "resume_unfinished_task"]})
    with pytest.raises(Divergence, match="resume_unfinished_task"):
        verify_solution(plain, paraphrases=False)
