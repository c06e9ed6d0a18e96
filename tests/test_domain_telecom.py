"""The telecom domain: tool behaviour, errors leave the state unchanged, prerequisites/writes, determinism."""

from __future__ import annotations

import json

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import Harness, assert_solution_verifies, solution_paths

DOM = load_domain("telecom")

SCENARIO = {
    "customers": {
        "C2001": {
            "full_name": "Anna Schmidt",
            "phone_number": "555-214-0142",
            "payment_methods": {"PM-3001": {"last_four": "4242"}},
        },
    },
    "lines": {
        "L-555": {
            "phone_number": "555-214-0142",
            "customer_id": "C2001",
            "plan_id": "P-BASIC",
            "data_used_gb": 4.5,
            "device": {"abroad": True, "airplane_mode": True},
        },
        "L-777": {
            "phone_number": "555-214-0199",
            "customer_id": "C2001",
            "status": "suspended",
            "suspension_reason": "lost phone",
        },
    },
    "bills": {
        "B-3001": {
            "customer_id": "C2001",
            "period": "2024-12",
            "amount_due": 45,
            "due_date": "2025-01-20",
            "status": "overdue",
        },
        "B-3002": {"customer_id": "C2001", "period": "2025-01", "amount_due": 30, "due_date": "2025-03-01"},
    },
}


_H = Harness(DOM, SCENARIO)
state, call, fails, writes = _H.state, _H.call, _H.fails, _H.writes


def test_defaults_merge_and_links():
    world = state()
    assert {"C1001", "C2001"} <= set(world.customers) and {"L-1001", "L-555"} <= set(world.lines)
    assert world.customers["C2001"].line_ids == ["L-555", "L-777"] and world.customers["C2001"].bill_ids == [
        "B-3001",
        "B-3002",
    ]
    with pytest.raises(ValueError, match="unknown customer"):
        DOM.load_state({"lines": {"L-1": {"phone_number": "1", "customer_id": "C9"}}})
    with pytest.raises(ValueError, match="unknown plan"):
        DOM.load_state({"lines": {"L-1": {"phone_number": "1", "customer_id": "C1001", "plan_id": "P-NONE"}}})


def test_snapshot_is_deterministic_and_json():
    first, second = state(), state()
    assert DOM.snapshot(first) == DOM.snapshot(second)
    for world in (first, second):
        call(world, "refuel_data", customer_id="C2001", line_id="L-555", gb_amount=2)
        call(world, "toggle_airplane_mode", line_id="L-555")
    assert DOM.snapshot(first) == DOM.snapshot(second)
    json.dumps(DOM.snapshot(first))


def test_get_customer_by_phone():
    world = state()
    out = call(world, "get_customer_by_phone", phone_number="555-214-0142")
    assert out["customer_id"] == "C2001" and out["line_ids"] == ["L-555", "L-777"]
    written = writes("get_customer_by_phone", {"phone_number": "555-214-0142"}, out)
    assert (
        written["customer_identified"] is True
        and written["customer_id"] == "C2001"
        and written["line_ids"] == ["L-555", "L-777"]
    )
    assert (
        call(world, "get_customer_by_phone", phone_number="(555) 214-0199")["customer_id"] == "C2001"
    )  # a line's number
    fails(world, "get_customer_by_phone", "no customer", phone_number="555-000-0000")
    fails(world, "get_customer_by_phone", "invalid phone", phone_number="none")


def test_get_details_by_id():
    world = state()
    out = call(world, "get_details_by_id", id="L-777")
    assert out["line_status"] == "suspended"
    written = writes("get_details_by_id", {"id": "L-777"}, out)
    assert (written["line_id"], written["line_status"], written["roaming_enabled"]) == ("L-777", "suspended", False)
    cust = call(world, "get_details_by_id", id="C2001")
    assert "line_status" not in writes("get_details_by_id", {"id": "C2001"}, cust)  # only a line sets line facts
    assert call(world, "get_details_by_id", id="B-3001")["status"] == "overdue"
    assert call(world, "get_details_by_id", id="P-MAX")["roaming_included"] is True
    fails(world, "get_details_by_id", "no customer, line", id="X-1")


def test_get_data_usage_and_plans():
    world = state()
    out = call(world, "get_data_usage", customer_id="C2001", line_id="L-555")
    assert (out["data_limit_gb"], out["data_remaining_gb"]) == (5, 0.5)
    fails(world, "get_data_usage", "does not belong", customer_id="C1001", line_id="L-555")
    plans = call(world, "list_available_plans")["plans"]
    assert [p["plan_id"] for p in plans] == sorted(p["plan_id"] for p in plans)
    assert writes("list_available_plans", {}, {"plans": plans})["available_plans"] == plans


def test_roaming():
    world = state()
    assert call(world, "enable_roaming", customer_id="C2001", line_id="L-555")["roaming_enabled"] is True
    fails(world, "enable_roaming", "already enabled", customer_id="C2001", line_id="L-555")
    fails(world, "enable_roaming", "suspended", customer_id="C2001", line_id="L-777")
    fails(world, "enable_roaming", "does not belong", customer_id="C1001", line_id="L-555")
    assert call(world, "disable_roaming", customer_id="C2001", line_id="L-555")["roaming_enabled"] is False
    fails(world, "disable_roaming", "already disabled", customer_id="C2001", line_id="L-555")
    assert writes("enable_roaming", {"customer_id": "C2001", "line_id": "L-555"}, {})["roaming_enabled"] is True
    assert [p.key for p in DOM.tools["enable_roaming"].spec.prerequisites] == ["customer_identified", "line_status"]


def test_refuel_data():
    world = state()
    out = call(world, "refuel_data", customer_id="C2001", line_id="L-555", gb_amount=3)
    assert (out["charge"], out["data_remaining_gb"]) == (12.0, 3.5)
    assert world.charges[-1].amount == 12.0 and world.lines["L-555"].data_refueled_gb == 3
    fails(world, "refuel_data", "invalid gb_amount", customer_id="C2001", line_id="L-555", gb_amount=11)
    fails(world, "refuel_data", "invalid gb_amount", customer_id="C2001", line_id="L-555", gb_amount=0)
    fails(world, "refuel_data", "active line", customer_id="C2001", line_id="L-777", gb_amount=1)
    fails(world, "refuel_data", "not found", customer_id="C2001", line_id="L-000", gb_amount=1)


def test_suspend_resume_and_overdue_bills():
    world = state()
    fails(world, "resume_line", "overdue bills", customer_id="C2001", line_id="L-777")
    bills = call(world, "get_bills_for_customer", customer_id="C2001")
    assert bills["has_overdue_bill"] is True and bills["overdue_bill_ids"] == ["B-3001"]
    assert [b["bill_id"] for b in bills["bills"]] == ["B-3002", "B-3001"]  # newest first
    written = writes("get_bills_for_customer", {"customer_id": "C2001"}, bills)
    assert written["has_overdue_bill"] is True and written["overdue_bill_id"] == "B-3001"
    paid = call(world, "make_payment", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    assert paid["has_overdue_bill"] is False and world.bills["B-3001"].paid_with == "PM-3001"
    fails(world, "make_payment", "already paid", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    fails(world, "make_payment", "payment method", customer_id="C2001", bill_id="B-3002", payment_method_id="PM-0000")
    assert call(world, "resume_line", customer_id="C2001", line_id="L-777")["line_status"] == "active"
    fails(world, "resume_line", "not suspended", customer_id="C2001", line_id="L-777")
    out = call(world, "suspend_line", customer_id="C2001", line_id="L-555", reason="stolen phone")
    assert out["line_status"] == "suspended" and world.lines["L-555"].suspension_reason == "stolen phone"
    fails(world, "suspend_line", "only an active line", customer_id="C2001", line_id="L-555", reason="again")
    fails(world, "suspend_line", "needs a reason", customer_id="C2001", line_id="L-777", reason=" ")
    assert [p.key for p in DOM.tools["resume_line"].spec.prerequisites] == ["customer_identified", "has_overdue_bill"]


def test_send_payment_request():
    world = state()
    out = call(world, "send_payment_request", customer_id="C2001", bill_id="B-3001")
    assert out["status"] == "awaiting_payment" and world.payment_requests == ["B-3001"]
    fails(world, "send_payment_request", "still open", customer_id="C2001", bill_id="B-3002")
    fails(world, "send_payment_request", "not found", customer_id="C1001", bill_id="B-3002")
    call(world, "make_payment", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    fails(world, "send_payment_request", "no payment request needed", customer_id="C2001", bill_id="B-3001")


def test_change_plan():
    world = state()
    assert call(world, "change_plan", customer_id="C2001", line_id="L-555", plan_id="P-TRAVEL")["plan_id"] == "P-TRAVEL"
    fails(world, "change_plan", "already on plan", customer_id="C2001", line_id="L-555", plan_id="P-TRAVEL")
    fails(world, "change_plan", "not found", customer_id="C2001", line_id="L-555", plan_id="P-NONE")
    fails(world, "change_plan", "only an active line", customer_id="C2001", line_id="L-777", plan_id="P-MAX")


def test_device_tools():
    world = state()
    assert call(world, "run_speed_test", line_id="L-555")["status"].startswith("no connection: airplane")
    assert call(world, "toggle_airplane_mode", line_id="L-555")["airplane_mode"] is False
    assert call(world, "run_speed_test", line_id="L-555")["status"].startswith("no service abroad")
    call(world, "enable_roaming", customer_id="C2001", line_id="L-555")
    assert call(world, "run_speed_test", line_id="L-555")["download_mbps"] == 45.0
    world.lines["L-555"].data_used_gb = 5.0
    out = call(world, "run_speed_test", line_id="L-555")
    assert out["download_mbps"] == 0.1 and writes("run_speed_test", {"line_id": "L-555"}, out)["speed_mbps"] == 0.1
    assert call(world, "run_speed_test", line_id="L-777")["status"] == "no service: line suspended"
    fails(world, "toggle_airplane_mode", "not found", line_id="L-000")


def test_side_effects():
    specs = {n: t.spec for n, t in DOM.tools.items()}
    assert len(specs) >= 10
    reads = {
        "get_customer_by_phone",
        "get_details_by_id",
        "get_data_usage",
        "list_available_plans",
        "get_bills_for_customer",
        "run_speed_test",
    }
    assert {n for n, s in specs.items() if not s.side_effect} == reads


def test_prerequisites_drive_toolgate():
    spec = DOM.tools["refuel_data"].spec
    scratchpad = Scratchpad({"customer_identified": True})
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "absent"]
    scratchpad.set("line_status", "suspended", "test")
    assert toolgate.check(spec.prerequisites[1], scratchpad) == "not_met"
    scratchpad.set("line_status", "active", "test")
    assert toolgate.check(spec.prerequisites[1], scratchpad) == "met"
    resume = DOM.tools["resume_line"].spec.prerequisites[1]
    scratchpad.set("has_overdue_bill", True, "test")
    assert toolgate.check(resume, scratchpad) == "not_met"
    scratchpad.set("has_overdue_bill", False, "test")
    assert toolgate.check(resume, scratchpad) == "met"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("telecom", at_least=36), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
