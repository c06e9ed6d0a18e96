"""State of the simulated telecom operator (tau2-bench telecom style).

Customers own phone lines; each line has a plan, a status, data usage,
roaming, and the customer's device on it (airplane mode, mobile data,
signal, whether it is abroad). Bills belong to customers. There is no
clock: the current date is part of the state.

Reference data (plans, a few background customers) lives in ``data.json``
beside this module (the model holds structure only); every entity dictionary
a scenario's ``initial_state`` gives is merged over it (a key given there
replaces the entry with that key).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData


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


class TelecomState(_M, ReferenceData):
    merged_tables = ("plans", "customers", "lines", "bills")
    current_date: str
    plans: dict[str, Plan]
    customers: dict[str, Customer]
    lines: dict[str, Line]
    bills: dict[str, Bill]
    charges: list[Charge]
    payment_requests: list[str]  # bill ids, in the order they were requested

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
