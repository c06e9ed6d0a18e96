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
    s = state()
    assert {"C1001", "C2001"} <= set(s.customers) and {"L-1001", "L-555"} <= set(s.lines)
    assert s.customers["C2001"].line_ids == ["L-555", "L-777"] and s.customers["C2001"].bill_ids == ["B-3001", "B-3002"]
    with pytest.raises(ValueError, match="unknown customer"):
        DOM.load_state({"lines": {"L-1": {"phone_number": "1", "customer_id": "C9"}}})
    with pytest.raises(ValueError, match="unknown plan"):
        DOM.load_state({"lines": {"L-1": {"phone_number": "1", "customer_id": "C1001", "plan_id": "P-NONE"}}})


def test_snapshot_is_deterministic_and_json():
    a, b = state(), state()
    assert DOM.snapshot(a) == DOM.snapshot(b)
    for s in (a, b):
        call(s, "refuel_data", customer_id="C2001", line_id="L-555", gb_amount=2)
        call(s, "toggle_airplane_mode", line_id="L-555")
    assert DOM.snapshot(a) == DOM.snapshot(b)
    json.dumps(DOM.snapshot(a))


def test_get_customer_by_phone():
    s = state()
    out = call(s, "get_customer_by_phone", phone_number="555-214-0142")
    assert out["customer_id"] == "C2001" and out["line_ids"] == ["L-555", "L-777"]
    w = writes("get_customer_by_phone", {"phone_number": "555-214-0142"}, out)
    assert w["customer_identified"] is True and w["customer_id"] == "C2001" and w["line_ids"] == ["L-555", "L-777"]
    assert call(s, "get_customer_by_phone", phone_number="(555) 214-0199")["customer_id"] == "C2001"  # a line's number
    fails(s, "get_customer_by_phone", "no customer", phone_number="555-000-0000")
    fails(s, "get_customer_by_phone", "invalid phone", phone_number="none")


def test_get_details_by_id():
    s = state()
    out = call(s, "get_details_by_id", id="L-777")
    assert out["line_status"] == "suspended"
    w = writes("get_details_by_id", {"id": "L-777"}, out)
    assert (w["line_id"], w["line_status"], w["roaming_enabled"]) == ("L-777", "suspended", False)
    cust = call(s, "get_details_by_id", id="C2001")
    assert "line_status" not in writes("get_details_by_id", {"id": "C2001"}, cust)  # only a line sets line facts
    assert call(s, "get_details_by_id", id="B-3001")["status"] == "overdue"
    assert call(s, "get_details_by_id", id="P-MAX")["roaming_included"] is True
    fails(s, "get_details_by_id", "no customer, line", id="X-1")


def test_get_data_usage_and_plans():
    s = state()
    out = call(s, "get_data_usage", customer_id="C2001", line_id="L-555")
    assert (out["data_limit_gb"], out["data_remaining_gb"]) == (5, 0.5)
    fails(s, "get_data_usage", "does not belong", customer_id="C1001", line_id="L-555")
    plans = call(s, "list_available_plans")["plans"]
    assert [p["plan_id"] for p in plans] == sorted(p["plan_id"] for p in plans)
    assert writes("list_available_plans", {}, {"plans": plans})["available_plans"] == plans


def test_roaming():
    s = state()
    assert call(s, "enable_roaming", customer_id="C2001", line_id="L-555")["roaming_enabled"] is True
    fails(s, "enable_roaming", "already enabled", customer_id="C2001", line_id="L-555")
    fails(s, "enable_roaming", "suspended", customer_id="C2001", line_id="L-777")
    fails(s, "enable_roaming", "does not belong", customer_id="C1001", line_id="L-555")
    assert call(s, "disable_roaming", customer_id="C2001", line_id="L-555")["roaming_enabled"] is False
    fails(s, "disable_roaming", "already disabled", customer_id="C2001", line_id="L-555")
    assert writes("enable_roaming", {"customer_id": "C2001", "line_id": "L-555"}, {})["roaming_enabled"] is True
    assert [p.key for p in DOM.tools["enable_roaming"].spec.prerequisites] == ["customer_identified", "line_status"]


def test_refuel_data():
    s = state()
    out = call(s, "refuel_data", customer_id="C2001", line_id="L-555", gb_amount=3)
    assert (out["charge"], out["data_remaining_gb"]) == (12.0, 3.5)
    assert s.charges[-1].amount == 12.0 and s.lines["L-555"].data_refueled_gb == 3
    fails(s, "refuel_data", "invalid gb_amount", customer_id="C2001", line_id="L-555", gb_amount=11)
    fails(s, "refuel_data", "invalid gb_amount", customer_id="C2001", line_id="L-555", gb_amount=0)
    fails(s, "refuel_data", "active line", customer_id="C2001", line_id="L-777", gb_amount=1)
    fails(s, "refuel_data", "not found", customer_id="C2001", line_id="L-000", gb_amount=1)


def test_suspend_resume_and_overdue_bills():
    s = state()
    fails(s, "resume_line", "overdue bills", customer_id="C2001", line_id="L-777")
    bills = call(s, "get_bills_for_customer", customer_id="C2001")
    assert bills["has_overdue_bill"] is True and bills["overdue_bill_ids"] == ["B-3001"]
    assert [b["bill_id"] for b in bills["bills"]] == ["B-3002", "B-3001"]  # newest first
    w = writes("get_bills_for_customer", {"customer_id": "C2001"}, bills)
    assert w["has_overdue_bill"] is True and w["overdue_bill_id"] == "B-3001"
    paid = call(s, "make_payment", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    assert paid["has_overdue_bill"] is False and s.bills["B-3001"].paid_with == "PM-3001"
    fails(s, "make_payment", "already paid", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    fails(s, "make_payment", "payment method", customer_id="C2001", bill_id="B-3002", payment_method_id="PM-0000")
    assert call(s, "resume_line", customer_id="C2001", line_id="L-777")["line_status"] == "active"
    fails(s, "resume_line", "not suspended", customer_id="C2001", line_id="L-777")
    out = call(s, "suspend_line", customer_id="C2001", line_id="L-555", reason="stolen phone")
    assert out["line_status"] == "suspended" and s.lines["L-555"].suspension_reason == "stolen phone"
    fails(s, "suspend_line", "only an active line", customer_id="C2001", line_id="L-555", reason="again")
    fails(s, "suspend_line", "needs a reason", customer_id="C2001", line_id="L-777", reason=" ")
    assert [p.key for p in DOM.tools["resume_line"].spec.prerequisites] == ["customer_identified", "has_overdue_bill"]


def test_send_payment_request():
    s = state()
    out = call(s, "send_payment_request", customer_id="C2001", bill_id="B-3001")
    assert out["status"] == "awaiting_payment" and s.payment_requests == ["B-3001"]
    fails(s, "send_payment_request", "still open", customer_id="C2001", bill_id="B-3002")
    fails(s, "send_payment_request", "not found", customer_id="C1001", bill_id="B-3002")
    call(s, "make_payment", customer_id="C2001", bill_id="B-3001", payment_method_id="PM-3001")
    fails(s, "send_payment_request", "no payment request needed", customer_id="C2001", bill_id="B-3001")


def test_change_plan():
    s = state()
    assert call(s, "change_plan", customer_id="C2001", line_id="L-555", plan_id="P-TRAVEL")["plan_id"] == "P-TRAVEL"
    fails(s, "change_plan", "already on plan", customer_id="C2001", line_id="L-555", plan_id="P-TRAVEL")
    fails(s, "change_plan", "not found", customer_id="C2001", line_id="L-555", plan_id="P-NONE")
    fails(s, "change_plan", "only an active line", customer_id="C2001", line_id="L-777", plan_id="P-MAX")


def test_device_tools():
    s = state()
    assert call(s, "run_speed_test", line_id="L-555")["status"].startswith("no connection: airplane")
    assert call(s, "toggle_airplane_mode", line_id="L-555")["airplane_mode"] is False
    assert call(s, "run_speed_test", line_id="L-555")["status"].startswith("no service abroad")
    call(s, "enable_roaming", customer_id="C2001", line_id="L-555")
    assert call(s, "run_speed_test", line_id="L-555")["download_mbps"] == 45.0
    s.lines["L-555"].data_used_gb = 5.0
    out = call(s, "run_speed_test", line_id="L-555")
    assert out["download_mbps"] == 0.1 and writes("run_speed_test", {"line_id": "L-555"}, out)["speed_mbps"] == 0.1
    assert call(s, "run_speed_test", line_id="L-777")["status"] == "no service: line suspended"
    fails(s, "toggle_airplane_mode", "not found", line_id="L-000")


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
    S = Scratchpad({"customer_identified": True})
    assert [toolgate.check(p, S) for p in spec.prerequisites] == ["met", "absent"]
    S.set("line_status", "suspended", "test")
    assert toolgate.check(spec.prerequisites[1], S) == "not_met"
    S.set("line_status", "active", "test")
    assert toolgate.check(spec.prerequisites[1], S) == "met"
    resume = DOM.tools["resume_line"].spec.prerequisites[1]
    S.set("has_overdue_bill", True, "test")
    assert toolgate.check(resume, S) == "not_met"
    S.set("has_overdue_bill", False, "test")
    assert toolgate.check(resume, S) == "met"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("telecom", at_least=36), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
