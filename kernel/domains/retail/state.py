"""State of the simulated online retailer (tau2-bench retail style).

The catalog holds products, each with item variants (an item id, its
options, price and availability). Users have an address, payment methods
(credit card, PayPal, gift card with a balance) and orders. An order lists
the items bought, its status (pending, processed, delivered, cancelled,
return requested, exchange requested) and its payment history.

Reference data (a catalog, a background user) lives in ``data.json`` beside
this module (the model holds structure only); every entity dictionary a
scenario's ``initial_state`` gives is merged over it. Order items only need their ``item_id`` (name, product and
options are filled in from the catalog; the price too when omitted), an
order without an address ships to its user's address, and an order without
a payment history was paid in full with its user's first payment method.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData

OrderStatus = Literal["pending", "processed", "delivered", "cancelled", "return requested", "exchange requested"]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Variant(_M):
    options: dict[str, str] = Field(default_factory=dict)
    price: float
    available: bool = True


class Product(_M):
    name: str
    variants: dict[str, Variant]


class Name(_M):
    first_name: str
    last_name: str


class Address(_M):
    address1: str
    address2: str = ""
    city: str
    state: str
    country: str = "USA"
    zip: str


class PaymentMethod(_M):
    source: Literal["credit_card", "paypal", "gift_card"]
    brand: str | None = None
    last_four: str | None = None
    balance: float | None = None  # gift cards only


class User(_M):
    name: Name
    email: str
    address: Address
    payment_methods: dict[str, PaymentMethod] = Field(default_factory=dict)
    orders: list[str] = Field(default_factory=list)


class OrderItem(_M):
    item_id: str
    product_id: str = ""
    name: str = ""
    options: dict[str, str] = Field(default_factory=dict)
    price: float | None = None


class Transaction(_M):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(_M):
    user_id: str
    address: Address | None = None
    items: list[OrderItem]
    status: OrderStatus = "pending"
    payment_history: list[Transaction] = Field(default_factory=list)
    cancel_reason: str | None = None
    return_items: list[str] = Field(default_factory=list)
    exchange_items: list[str] = Field(default_factory=list)
    exchange_new_items: list[str] = Field(default_factory=list)


class RetailState(_M, ReferenceData):
    merged_tables = ("products", "users", "orders")
    products: dict[str, Product]
    users: dict[str, User]
    orders: dict[str, Order]

    @model_validator(mode="after")
    def _complete(self) -> RetailState:
        catalog: dict[str, tuple[str, Product]] = {}
        for pid, prod in self.products.items():
            for iid in prod.variants:
                if iid in catalog:
                    raise ValueError(f"item {iid} is listed under two products: {catalog[iid][0]} and {pid}")
                catalog[iid] = (pid, prod)
        for oid, order in self.orders.items():
            user = self.users.get(order.user_id)
            if user is None:
                raise ValueError(f"order {oid}: unknown user {order.user_id!r}")
            if oid not in user.orders:  # an order is always listed on its user
                user.orders.append(oid)
            if order.address is None:
                order.address = user.address.model_copy()
            for it in order.items:
                if it.item_id not in catalog:
                    raise ValueError(f"order {oid}: item {it.item_id} is not in the catalog")
                pid, prod = catalog[it.item_id]
                it.product_id, it.name = pid, prod.name
                it.options = dict(prod.variants[it.item_id].options)
                if it.price is None:
                    it.price = prod.variants[it.item_id].price
            if not order.payment_history and user.payment_methods:  # paid in full with the first method on file
                order.payment_history.append(
                    Transaction(
                        transaction_type="payment",
                        amount=round(sum(it.price or 0.0 for it in order.items), 2),
                        payment_method_id=next(iter(user.payment_methods)),
                    )
                )
            for payment in order.payment_history:
                if payment.payment_method_id not in user.payment_methods:
                    raise ValueError(f"order {oid}: payment method {payment.payment_method_id} is not the user's")
        return self
