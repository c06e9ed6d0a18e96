"""State of the simulated telecom operator (tau2-bench telecom style).

Customers own phone lines; each line has a plan, a status, data usage,
roaming, and the customer's device on it (airplane mode, mobile data,
signal, whether it is abroad). Bills belong to customers. There is no
clock: the current date is part of the state.

Reference data (plans, a few background customers) lives in the state
defaults; every entity dictionary a scenario's ``initial_state`` gives is
merged over the defaults (a key given there replaces the default entry).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import MergedOverReferenceData


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Plan(_M):
    name: str
    data_limit_gb: float
    price_per_month: float
    data_refuel_price_per_gb: float
    roaming_included: bool = False


class PaymentMethod(_M):
    method_type: Literal["credit_card", "debit_card", "paypal"] = "credit_card"
    last_four: str = "0000"


class Customer(_M):
    full_name: str
    phone_number: str  # the number the customer calls from / is registered with
    email: str = ""
    date_of_birth: str = ""
    account_status: Literal["active", "suspended", "closed"] = "active"
    payment_methods: dict[str, PaymentMethod] = Field(default_factory=dict)
    line_ids: list[str] = Field(default_factory=list)
    bill_ids: list[str] = Field(default_factory=list)


class Device(_M):
    airplane_mode: bool = False
    mobile_data: bool = True
    signal: Literal["excellent", "good", "poor", "none"] = "good"
    abroad: bool = False


class Line(_M):
    phone_number: str
    customer_id: str
    plan_id: str = "P-BASIC"
    status: Literal["active", "suspended", "pending_activation", "closed"] = "active"
    suspension_reason: str | None = None
    data_used_gb: float = 0.0
    data_refueled_gb: float = 0.0
    roaming_enabled: bool = False
    device: Device = Field(default_factory=Device)


class Bill(_M):
    customer_id: str
    period: str  # YYYY-MM
    amount_due: float
    due_date: str
    status: Literal["paid", "unpaid", "overdue", "awaiting_payment"] = "unpaid"
    paid_with: str | None = None


class Charge(_M):
    customer_id: str
    line_id: str
    description: str
    amount: float


# ------------------------------------------------------------ reference data
def default_plans() -> dict[str, Plan]:
    return {
        "P-BASIC": Plan(name="Basic 5GB", data_limit_gb=5, price_per_month=30, data_refuel_price_per_gb=4),
        "P-PLUS": Plan(name="Plus 15GB", data_limit_gb=15, price_per_month=45, data_refuel_price_per_gb=3),
        "P-MAX": Plan(
            name="Max 50GB", data_limit_gb=50, price_per_month=70, data_refuel_price_per_gb=2, roaming_included=True
        ),
        "P-TRAVEL": Plan(
            name="Travel 20GB",
            data_limit_gb=20,
            price_per_month=55,
            data_refuel_price_per_gb=2.5,
            roaming_included=True,
        ),
    }


def default_customers() -> dict[str, Customer]:
    return {
        "C1001": Customer(
            full_name="John Smith",
            phone_number="555-123-2002",
            email="john.smith@example.com",
            date_of_birth="1985-06-15",
            payment_methods={"PM-1001": PaymentMethod(last_four="1234")},
            line_ids=["L-1001"],
            bill_ids=["B-1001"],
        ),
        "C1002": Customer(
            full_name="Maria Garcia",
            phone_number="555-987-6543",
            email="maria.garcia@example.com",
            date_of_birth="1990-11-02",
            payment_methods={"PM-1002": PaymentMethod(method_type="paypal")},
            line_ids=["L-1002"],
            bill_ids=[],
        ),
    }


def default_lines() -> dict[str, Line]:
    return {
        "L-1001": Line(phone_number="555-123-2002", customer_id="C1001", plan_id="P-PLUS", data_used_gb=6.5),
        "L-1002": Line(phone_number="555-987-6543", customer_id="C1002", plan_id="P-BASIC", data_used_gb=1.0),
    }


def default_bills() -> dict[str, Bill]:
    return {
        "B-1001": Bill(
            customer_id="C1001",
            period="2025-01",
            amount_due=45,
            due_date="2025-02-01",
            status="paid",
            paid_with="PM-1001",
        ),
    }


class TelecomState(_M, MergedOverReferenceData):
    merged_tables = ("plans", "customers", "lines", "bills")
    current_date: str = "2025-02-15"
    plans: dict[str, Plan] = Field(default_factory=default_plans)
    customers: dict[str, Customer] = Field(default_factory=default_customers)
    lines: dict[str, Line] = Field(default_factory=default_lines)
    bills: dict[str, Bill] = Field(default_factory=default_bills)
    charges: list[Charge] = Field(default_factory=list)
    payment_requests: list[str] = Field(default_factory=list)  # bill ids, in the order they were requested

    @model_validator(mode="after")
    def _references(self) -> TelecomState:
        for lid, line in self.lines.items():
            cust = self.customers.get(line.customer_id)
            if cust is None:
                raise ValueError(f"line {lid}: unknown customer {line.customer_id!r}")
            if line.plan_id not in self.plans:
                raise ValueError(f"line {lid}: unknown plan {line.plan_id!r}")
            if lid not in cust.line_ids:  # a line is always listed on its customer
                cust.line_ids.append(lid)
        for bid, bill in self.bills.items():
            cust = self.customers.get(bill.customer_id)
            if cust is None:
                raise ValueError(f"bill {bid}: unknown customer {bill.customer_id!r}")
            if bid not in cust.bill_ids:
                cust.bill_ids.append(bid)
        return self
