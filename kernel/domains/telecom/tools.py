"""Telecom customer-service tools (tau2-bench telecom style) over the in-memory operator state.

ToolGate prerequisites carry the operator's policy: account and line
operations need an identified customer (``customer_identified``, written by
``get_customer_by_phone``); roaming, data refuels and plan changes need an
active line (``line_status`` equal to ``active``, written by
``get_details_by_id`` and by the tools that change a line's status); that
prerequisite is per line (entity ``line_id``): it is checked on the entry
``line_status[<line_id>]`` of the line the task names, which the same tools
write besides the plain ``line_status`` of the line under discussion, so a
suspended line that was read does not block another, active line; a
suspended line is only resumed when the customer has no overdue bill
(``has_overdue_bill`` false, written by ``get_bills_for_customer`` and
``make_payment``). Device tools (speed test, airplane mode) act on the phone
itself and need no account access.

Every account tool checks that the line belongs to the customer. Tools
validate their input before changing anything and report failures as
``ToolError``.
"""

from __future__ import annotations

import re
from typing import Any

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, find, status_is
from .state import Charge, Customer, Line, TelecomState

DOMAIN = Domain(
    "telecom",
    TelecomState,
    "A mobile operator's customer service: identify customers, inspect lines, usage and bills, roaming, "
    "data refuels, plans, line suspension, payments, and the customer's phone (speed test, airplane mode).",
)
tool = DOMAIN.tool

MAX_REFUEL_GB = 10
SPEED = {"excellent": 120.0, "good": 45.0, "poor": 5.0, "none": 0.0}

# ----------------------------------------------------------- prerequisites
IDENTIFIED = Prerequisite(
    key="customer_identified",
    sat=Sat(op="truthy"),
    description="the caller was identified as a customer (get_customer_by_phone)",
)
LINE_ACTIVE = Prerequisite(
    key="line_status",
    sat=Sat(op="eq", value="active"),
    entity="line_id",
    description="the line is active (get_details_by_id shows its status)",
)
# Each status write also goes to the entry of the line it is about (docs/kernel.md, "Per-entity prerequisites").
LINE_STATUS_OF_RESULT = {"line_status": "result.line_status", "line_status[{result.line_id}]": "result.line_status"}
NO_OVERDUE = Prerequisite(
    key="has_overdue_bill",
    sat=Sat(op="eq", value=False),
    description="the customer has no overdue bill (get_bills_for_customer)",
)


# ----------------------------------------------------------------- helpers
def _digits(phone: Any) -> str:
    return re.sub(r"\D", "", phone) if isinstance(phone, str) else ""


def _customer(state: TelecomState, customer_id: str) -> Customer:
    return find(state.customers, customer_id, "customer")


def _line(state: TelecomState, line_id: str) -> Line:
    return find(state.lines, line_id, "line")


def _owned(state: TelecomState, customer_id: str, line_id: str) -> Line:
    cust = _customer(state, customer_id)
    line = _line(state, line_id)
    if line_id not in cust.line_ids or line.customer_id != customer_id:
        raise ToolError(f"line {line_id} does not belong to customer {customer_id}")
    return line


def _limit(state: TelecomState, line: Line) -> float:
    return state.plans[line.plan_id].data_limit_gb + line.data_refueled_gb


def _remaining(state: TelecomState, line: Line) -> float:
    return round(max(0.0, _limit(state, line) - line.data_used_gb), 2)


def _overdue(state: TelecomState, customer_id: str) -> list[str]:
    """Unpaid bills past their due date (or marked overdue)."""
    cust = state.customers[customer_id]
    out = []
    for bill_id in cust.bill_ids:
        bill = state.bills[bill_id]
        if bill.status == "overdue" or (bill.status != "paid" and bill.due_date < state.current_date):
            out.append(bill_id)
    return out


def _line_view(state: TelecomState, line_id: str) -> dict:
    line = state.lines[line_id]
    plan = state.plans[line.plan_id]
    return {
        "line_id": line_id,
        "phone_number": line.phone_number,
        "customer_id": line.customer_id,
        "plan_id": line.plan_id,
        "plan_name": plan.name,
        "line_status": line.status,
        "suspension_reason": line.suspension_reason,
        "roaming_enabled": line.roaming_enabled,
        "data_used_gb": line.data_used_gb,
        "data_limit_gb": _limit(state, line),
    }


# ---------------------------------------------------- semantic postconditions
def _post_roaming(value: bool):
    def check(args, result, state) -> str | None:
        line = state.lines.get(args["line_id"])
        if line is None or line.roaming_enabled is not value:
            return f"roaming on {args['line_id']} is not {'enabled' if value else 'disabled'}"
        return None

    check.__name__ = f"roaming_{'on' if value else 'off'}"
    return check


def _post_status(status: str):
    return status_is("lines", "line_id", status, "line", name=f"line_{status}")


def _post_refuel(args, result, state) -> str | None:
    line = state.lines.get(args["line_id"])
    if line is None or result.get("data_remaining_gb") != _remaining(state, line):
        return "the refuelled allowance is not reflected on the line"
    return None


_post_paid = status_is("bills", "bill_id", "paid", "bill", name="_post_paid")


# -------------------------------------------------------------- identification
@tool(writes={"customer_identified": "const:true", "customer_id": "result.customer_id", "line_ids": "result.line_ids"})
def get_customer_by_phone(state: TelecomState, phone_number: str) -> dict:
    """Find the customer who owns a phone number (their registered number or one of their lines).

    Args:
        phone_number: The phone number, such as '555-123-2002'.
    """
    want = _digits(phone_number)
    if not want:
        raise ToolError(f"invalid phone number {phone_number!r}")
    for cid, customer in sorted(state.customers.items()):
        numbers = [customer.phone_number] + [
            state.lines[lid].phone_number for lid in customer.line_ids if lid in state.lines
        ]
        if want in (_digits(n) for n in numbers):
            return {
                "customer_id": cid,
                "full_name": customer.full_name,
                "account_status": customer.account_status,
                "line_ids": list(customer.line_ids),
            }
    raise ToolError(f"no customer with phone number {phone_number}")


@tool(writes={"line_id": "result.line_id", **LINE_STATUS_OF_RESULT, "roaming_enabled": "result.roaming_enabled"})
def get_details_by_id(state: TelecomState, id: str) -> dict:
    """Get the details of a customer (C...), line (L-...), bill (B-...) or plan (P-...) by its id.

    A line's details also make it the line under discussion (line_id, line_status, roaming_enabled in S);
    its status is also kept per line (line_status[<line_id>]).

    Args:
        id: The id, such as 'L-1001' or 'C1001'.
    """
    if id in state.lines:
        return _line_view(state, id)
    if id in state.customers:
        customer = state.customers[id]
        return {
            "customer_id": id,
            "full_name": customer.full_name,
            "phone_number": customer.phone_number,
            "email": customer.email,
            "account_status": customer.account_status,
            "line_ids": list(customer.line_ids),
            "bill_ids": list(customer.bill_ids),
            "payment_method_ids": list(customer.payment_methods),
        }
    if id in state.bills:
        return {"bill_id": id, **state.bills[id].model_dump()}
    if id in state.plans:
        return {"plan_id": id, **state.plans[id].model_dump()}
    raise ToolError(f"no customer, line, bill or plan with id {id!r}")


@tool(prerequisites=[IDENTIFIED], writes={"data_remaining_gb": "result.data_remaining_gb"})
def get_data_usage(state: TelecomState, customer_id: str, line_id: str) -> dict:
    """Get the data used on a line this cycle, its allowance (plan plus refuels) and what remains.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
    """
    line = _owned(state, customer_id, line_id)
    return {
        "line_id": line_id,
        "data_used_gb": line.data_used_gb,
        "data_limit_gb": _limit(state, line),
        "data_remaining_gb": _remaining(state, line),
        "refuel_price_per_gb": state.plans[line.plan_id].data_refuel_price_per_gb,
    }


@tool(writes={"available_plans": "result.plans"})
def list_available_plans(state: TelecomState) -> dict:
    """List the plans a line can be moved to, with data allowance and monthly price."""
    return {
        "plans": [
            {
                "plan_id": k,
                "name": p.name,
                "data_limit_gb": p.data_limit_gb,
                "price_per_month": p.price_per_month,
                "roaming_included": p.roaming_included,
            }
            for k, p in sorted(state.plans.items())
        ]
    }


# ----------------------------------------------------------------- line changes
@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED, LINE_ACTIVE],
    writes={"roaming_enabled": "const:true"},
    post=[_post_roaming(True)],
)
def enable_roaming(state: TelecomState, customer_id: str, line_id: str) -> dict:
    """Enable international roaming on a line.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
    """
    line = _owned(state, customer_id, line_id)
    if line.status != "active":
        raise ToolError(f"line {line_id} is {line.status}; roaming needs an active line")
    if line.roaming_enabled:
        raise ToolError(f"roaming is already enabled on line {line_id}")
    line.roaming_enabled = True
    return {"line_id": line_id, "roaming_enabled": True}


@tool(
    side_effect=True, prerequisites=[IDENTIFIED], writes={"roaming_enabled": "const:false"}, post=[_post_roaming(False)]
)
def disable_roaming(state: TelecomState, customer_id: str, line_id: str) -> dict:
    """Disable international roaming on a line.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
    """
    line = _owned(state, customer_id, line_id)
    if not line.roaming_enabled:
        raise ToolError(f"roaming is already disabled on line {line_id}")
    line.roaming_enabled = False
    return {"line_id": line_id, "roaming_enabled": False}


@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED, LINE_ACTIVE],
    writes={"data_remaining_gb": "result.data_remaining_gb"},
    post=[_post_refuel],
)
def refuel_data(state: TelecomState, customer_id: str, line_id: str, gb_amount: float) -> dict:
    """Add mobile data to a line for this cycle; it is charged at the plan's refuel price per GB.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
        gb_amount: Gigabytes to add (more than 0, at most 10).
    """
    line = _owned(state, customer_id, line_id)
    if isinstance(gb_amount, bool) or not isinstance(gb_amount, (int, float)) or not 0 < gb_amount <= MAX_REFUEL_GB:
        raise ToolError(f"invalid gb_amount {gb_amount!r}: more than 0 and at most {MAX_REFUEL_GB}")
    if line.status != "active":
        raise ToolError(f"line {line_id} is {line.status}; data can only be added to an active line")
    price = round(state.plans[line.plan_id].data_refuel_price_per_gb * gb_amount, 2)
    line.data_refueled_gb = round(line.data_refueled_gb + gb_amount, 2)
    state.charges.append(
        Charge(customer_id=customer_id, line_id=line_id, description=f"data refuel {gb_amount} GB", amount=price)
    )
    return {
        "line_id": line_id,
        "added_gb": gb_amount,
        "charge": price,
        "data_limit_gb": _limit(state, line),
        "data_remaining_gb": _remaining(state, line),
    }


def _post_plan(args, result, state) -> str | None:
    line = state.lines.get(args["line_id"])
    if line is None or line.plan_id != args["plan_id"]:
        return f"line {args['line_id']} is not on plan {args['plan_id']}"
    return None


@tool(side_effect=True, prerequisites=[IDENTIFIED, LINE_ACTIVE], post=[_post_plan])
def change_plan(state: TelecomState, customer_id: str, line_id: str, plan_id: str) -> dict:
    """Move a line to another plan.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
        plan_id: The new plan, such as 'P-PLUS'.
    """
    line = _owned(state, customer_id, line_id)
    if plan_id not in state.plans:
        raise ToolError(f"plan {plan_id!r} not found; see list_available_plans")
    if plan_id == line.plan_id:
        raise ToolError(f"line {line_id} is already on plan {plan_id}")
    if line.status != "active":
        raise ToolError(f"line {line_id} is {line.status}; only an active line can change plan")
    line.plan_id = plan_id
    return _line_view(state, line_id)


@tool(side_effect=True, prerequisites=[IDENTIFIED], writes=LINE_STATUS_OF_RESULT, post=[_post_status("suspended")])
def suspend_line(state: TelecomState, customer_id: str, line_id: str, reason: str) -> dict:
    """Suspend an active line (for example a lost or stolen phone).

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
        reason: Why the line is suspended, such as 'lost phone'.
    """
    line = _owned(state, customer_id, line_id)
    if not isinstance(reason, str) or not reason.strip():
        raise ToolError("a suspension needs a reason")
    if line.status != "active":
        raise ToolError(f"line {line_id} is {line.status}; only an active line can be suspended")
    line.status, line.suspension_reason = "suspended", reason
    return _line_view(state, line_id)


@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED, NO_OVERDUE],
    writes=LINE_STATUS_OF_RESULT,
    post=[_post_status("active")],
)
def resume_line(state: TelecomState, customer_id: str, line_id: str) -> dict:
    """Resume a suspended line; not possible while the customer has an overdue bill.

    Args:
        customer_id: The customer who owns the line.
        line_id: The line, such as 'L-1001'.
    """
    line = _owned(state, customer_id, line_id)
    if line.status != "suspended":
        raise ToolError(f"line {line_id} is {line.status}, not suspended")
    overdue = _overdue(state, customer_id)
    if overdue:
        raise ToolError(f"customer {customer_id} has overdue bills {overdue}; they must be paid first")
    line.status, line.suspension_reason = "active", None
    return _line_view(state, line_id)


# ------------------------------------------------------------------- billing
@tool(
    prerequisites=[IDENTIFIED],
    writes={
        "has_overdue_bill": "result.has_overdue_bill",
        "overdue_bill_ids": "result.overdue_bill_ids",
        "overdue_bill_id": "result.overdue_bill_ids.0",
    },
)
def get_bills_for_customer(state: TelecomState, customer_id: str) -> dict:
    """List a customer's bills, newest first, and whether any is overdue.

    Args:
        customer_id: The customer, such as 'C1001'.
    """
    cust = _customer(state, customer_id)
    bills = sorted(cust.bill_ids, key=lambda b: state.bills[b].period, reverse=True)
    overdue = _overdue(state, customer_id)
    return {
        "bills": [{"bill_id": b, **state.bills[b].model_dump()} for b in bills],
        "has_overdue_bill": bool(overdue),
        "overdue_bill_ids": overdue,
    }


@tool(side_effect=True, prerequisites=[IDENTIFIED])
def send_payment_request(state: TelecomState, customer_id: str, bill_id: str) -> dict:
    """Send the customer a request to pay an unpaid bill (one open request at a time).

    Args:
        customer_id: The customer who owes the bill.
        bill_id: The bill, such as 'B-1001'.
    """
    cust = _customer(state, customer_id)
    bill = state.bills.get(bill_id)
    if bill is None or bill_id not in cust.bill_ids:
        raise ToolError(f"bill {bill_id!r} not found for customer {customer_id}")
    if bill.status not in ("unpaid", "overdue"):
        raise ToolError(f"bill {bill_id} is {bill.status}; no payment request needed")
    pending = [b for b in cust.bill_ids if state.bills[b].status == "awaiting_payment"]
    if pending:
        raise ToolError(f"a payment request for bill {pending[0]} is still open")
    bill.status = "awaiting_payment"
    state.payment_requests.append(bill_id)
    return {"bill_id": bill_id, "status": "awaiting_payment", "amount_due": bill.amount_due}


@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED],
    writes={"has_overdue_bill": "result.has_overdue_bill"},
    post=[_post_paid],
)
def make_payment(state: TelecomState, customer_id: str, bill_id: str, payment_method_id: str) -> dict:
    """Pay a bill in full with one of the customer's payment methods on file.

    Args:
        customer_id: The customer who owes the bill.
        bill_id: The bill, such as 'B-1001'.
        payment_method_id: The payment method on file, such as 'PM-1001'.
    """
    cust = _customer(state, customer_id)
    bill = state.bills.get(bill_id)
    if bill is None or bill_id not in cust.bill_ids:
        raise ToolError(f"bill {bill_id!r} not found for customer {customer_id}")
    if bill.status == "paid":
        raise ToolError(f"bill {bill_id} is already paid")
    if payment_method_id not in cust.payment_methods:
        raise ToolError(f"payment method {payment_method_id!r} not found for customer {customer_id}")
    bill.status, bill.paid_with = "paid", payment_method_id
    return {
        "bill_id": bill_id,
        "status": "paid",
        "amount_paid": bill.amount_due,
        "has_overdue_bill": bool(_overdue(state, customer_id)),
    }


# -------------------------------------------------------------------- device
@tool(writes={"speed_mbps": "result.download_mbps"})
def run_speed_test(state: TelecomState, line_id: str) -> dict:
    """Run a mobile data speed test on the phone using a line.

    Args:
        line_id: The line whose phone runs the test, such as 'L-1001'.
    """
    line = _line(state, line_id)
    dev = line.device
    if line.status != "active":
        status, speed = f"no service: line {line.status}", 0.0
    elif dev.airplane_mode:
        status, speed = "no connection: airplane mode is on", 0.0
    elif not dev.mobile_data:
        status, speed = "no connection: mobile data is off", 0.0
    elif dev.abroad and not line.roaming_enabled:
        status, speed = "no service abroad: roaming is disabled", 0.0
    elif dev.signal == "none":
        status, speed = "no signal", 0.0
    elif _remaining(state, line) <= 0:
        status, speed = "throttled: data allowance used up", 0.1
    else:
        status, speed = "ok", SPEED[dev.signal]
    return {"line_id": line_id, "download_mbps": speed, "status": status}


@tool(side_effect=True, writes={"airplane_mode": "result.airplane_mode"})
def toggle_airplane_mode(state: TelecomState, line_id: str) -> dict:
    """Switch airplane mode on or off (whichever it is not) on the phone using a line.

    Args:
        line_id: The line whose phone is toggled, such as 'L-1001'.
    """
    line = _line(state, line_id)
    line.device.airplane_mode = not line.device.airplane_mode
    return {"line_id": line_id, "airplane_mode": line.device.airplane_mode}
