"""Retail customer-service tools (tau2-bench retail style) over the in-memory store state.

ToolGate prerequisites carry the store's policy: anything about a user's
account or orders needs the user identified first (``retail_user_identified``,
written by the two ``find_user_id_*`` tools: true when a user was found,
false when the lookup found nobody); pending orders may be cancelled or
modified and delivered orders returned or exchanged, which the kernel checks
on ``order_status`` (written by ``get_order_details_retail`` and by every
tool that changes an order's status). That check is per order (entity
``order_id``): it consults ``order_status[<order_id>]``, the entry of the order
the task names, which the same tools write besides the plain ``order_status``
of the order read last, so reading a delivered order does not block
cancelling a pending one.

Exchanged or modified items must be variants of the same product and in
stock; price differences are charged or refunded to the given payment
method (a gift card needs the balance). Refunds go to the original payment
method or a gift card. Every tool validates its input before it changes
anything and reports failures as ``ToolError``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, find, status_is
from .state import Address, Order, OrderItem, RetailState, Transaction, User

DOMAIN = Domain(
    "retail",
    RetailState,
    "An online store's customer service: identify users, look up orders and products, cancel or modify "
    "pending orders, return or exchange delivered items, update addresses.",
)
tool = DOMAIN.tool

CancelReason = Literal["no longer needed", "ordered by mistake"]

# ----------------------------------------------------------- prerequisites
IDENTIFIED = Prerequisite(
    key="retail_user_identified",
    sat=Sat(op="truthy"),
    description="the user was identified (find_user_id_by_email or find_user_id_by_name_zip)",
)
PENDING = Prerequisite(
    key="order_status",
    sat=Sat(op="eq", value="pending"),
    entity="order_id",
    description="the order is pending (get_order_details_retail shows its status)",
)
DELIVERED = Prerequisite(
    key="order_status",
    sat=Sat(op="eq", value="delivered"),
    entity="order_id",
    description="the order was delivered (get_order_details_retail shows its status)",
)

FOUND_WRITES = {"retail_user_identified": "result.found", "user_id": "result.user_id"}
# An order's status also goes to the entry of that order (docs/kernel.md, "Per-entity prerequisites").
ORDER_STATUS_WRITES = {"order_status": "result.status", "order_status[{params.order_id}]": "result.status"}
ORDER_WRITES = {
    **ORDER_STATUS_WRITES,
    "order_item_ids": "result.item_ids",
    "order_items": "result.items",
    "order_payment_method_id": "result.payment_history.0.payment_method_id",
}


# ----------------------------------------------------------------- helpers
def _user(db: RetailState, user_id: str) -> User:
    return find(db.users, user_id, "user")


def _order(db: RetailState, order_id: str) -> Order:
    return find(db.orders, order_id, "order")


def _status(order: Order, order_id: str, want: str, action: str) -> None:
    if order.status != want:
        raise ToolError(f"order {order_id} is {order.status}; only {want} orders can be {action}")


def _variant(db: RetailState, item_id: str) -> tuple[str, Any]:
    for pid, prod in db.products.items():
        if item_id in prod.variants:
            return pid, prod.variants[item_id]
    raise ToolError(f"item {item_id!r} not found in the catalog")


def _id_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
        raise ToolError(f"{what} must be a non-empty list of item ids")
    return value


def _items_in_order(order: Order, order_id: str, item_ids: list[str]) -> list[OrderItem]:
    """The order items for ``item_ids`` (an id may be named as often as the order holds it)."""
    want, have = Counter(item_ids), Counter(it.item_id for it in order.items)
    for iid, n in want.items():
        if have[iid] < n:
            raise ToolError(
                f"item {iid} is not in order {order_id}"
                if not have[iid]
                else f"order {order_id} holds item {iid} only {have[iid]} time(s)"
            )
    out, used = [], Counter()
    for iid in item_ids:
        matches = [it for it in order.items if it.item_id == iid]
        out.append(matches[used[iid]])
        used[iid] += 1
    return out


def _swap(
    db: RetailState, order: Order, order_id: str, item_ids: Any, new_item_ids: Any
) -> tuple[list[OrderItem], float]:
    """Validate an item swap; return the new order items and the price difference (new minus old)."""
    olds = _items_in_order(order, order_id, _id_list(item_ids, "item_ids"))
    news = _id_list(new_item_ids, "new_item_ids")
    if len(news) != len(olds):
        raise ToolError("item_ids and new_item_ids must have the same length")
    new_items, diff = [], 0.0
    for old, nid in zip(olds, news, strict=True):
        pid, var = _variant(db, nid)
        if pid != old.product_id:
            raise ToolError(f"item {nid} is not a variant of {old.name} ({old.product_id})")
        if nid == old.item_id:
            raise ToolError(f"item {nid} is the same variant as the one in the order")
        if not var.available:
            raise ToolError(f"item {nid} is out of stock")
        new_items.append(
            OrderItem(item_id=nid, product_id=pid, name=old.name, options=dict(var.options), price=var.price)
        )
        diff += var.price - (old.price or 0.0)
    return new_items, round(diff, 2)


def _settle(user: User, payment_method_id: Any, amount: float) -> None:
    """Charge (amount > 0) or refund (amount < 0) a payment method; gift cards need the balance."""
    if not isinstance(payment_method_id, str) or payment_method_id not in user.payment_methods:
        raise ToolError(f"payment method {payment_method_id!r} not found for this user")
    pm = user.payment_methods[payment_method_id]
    if pm.source == "gift_card":
        if amount > 0 and (pm.balance or 0.0) < amount:
            raise ToolError(
                f"gift card {payment_method_id} has a balance of {pm.balance or 0.0:.2f}, not enough for {amount:.2f}"
            )
        pm.balance = round((pm.balance or 0.0) - amount, 2)


def _swap_and_settle(
    db: RetailState, order: Order, order_id: str, item_ids: Any, new_item_ids: Any, payment_method_id: Any
) -> tuple[list[OrderItem], float]:
    """An item swap (modified or exchanged order alike): validated, its price difference charged to or refunded
    on the payment method and recorded in the order's payment history; returns the new items and the difference."""
    user = db.users[order.user_id]
    new_items, diff = _swap(db, order, order_id, item_ids, new_item_ids)
    _settle(user, payment_method_id, diff)
    if diff:
        order.payment_history.append(
            Transaction(
                transaction_type="payment" if diff > 0 else "refund",
                amount=abs(diff),
                payment_method_id=payment_method_id,
            )
        )
    return new_items, diff


def _refund_target(user: User, order: Order, payment_method_id: Any) -> None:
    original = {t.payment_method_id for t in order.payment_history if t.transaction_type == "payment"}
    pm = user.payment_methods.get(payment_method_id) if isinstance(payment_method_id, str) else None
    if pm is None:
        raise ToolError(f"payment method {payment_method_id!r} not found for this user")
    if payment_method_id not in original and pm.source != "gift_card":
        raise ToolError("a refund goes to the order's original payment method or to a gift card")


def _address(address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any) -> Address:
    for name, value in (("address1", address1), ("city", city), ("state", state), ("country", country), ("zip", zip)):
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"{name} must be a non-empty string")
    if not isinstance(address2, str):
        raise ToolError("address2 must be a string")
    if not zip.isdigit() or len(zip) != 5:
        raise ToolError(f"invalid zip {zip!r}: five digits")
    return Address(address1=address1, address2=address2, city=city, state=state, country=country, zip=zip)


def _order_view(db: RetailState, order_id: str) -> dict:
    order = db.orders[order_id]
    return {
        "order_id": order_id,
        "user_id": order.user_id,
        "status": order.status,
        "address": order.address.model_dump() if order.address else None,
        "items": [
            {
                "item_id": it.item_id,
                "name": it.name,
                "product_id": it.product_id,
                "options": dict(it.options),
                "price": it.price,
            }
            for it in order.items
        ],
        "item_ids": [it.item_id for it in order.items],
        "payment_history": [t.model_dump() for t in order.payment_history],
        "cancel_reason": order.cancel_reason,
        "return_items": list(order.return_items),
        "exchange_items": list(order.exchange_items),
        "exchange_new_items": list(order.exchange_new_items),
    }


# ---------------------------------------------------- semantic postconditions
def _post_status(status: str):
    return status_is("orders", "order_id", status, "order", name=f"order_{status.replace(' ', '_')}")


def _post_items(args, result, state) -> str | None:
    order = state.orders.get(args["order_id"])
    held = Counter(it.item_id for it in order.items) if order else Counter()
    if order is None or any(held[n] < c for n, c in Counter(args["new_item_ids"]).items()):
        return "the order does not hold the new items"
    return None


def _post_order_address(args, result, state) -> str | None:
    order = state.orders.get(args["order_id"])
    if (
        order is None
        or order.address is None
        or (order.address.address1, order.address.zip) != (args["address1"], args["zip"])
    ):
        return "the order's shipping address was not updated"
    return None


def _post_user_address(args, result, state) -> str | None:
    user = state.users.get(args["user_id"])
    if user is None or (user.address.address1, user.address.zip) != (args["address1"], args["zip"]):
        return "the user's address was not updated"
    return None


# -------------------------------------------------------------- identification
@tool(writes=FOUND_WRITES)
def find_user_id_by_email(db: RetailState, email: str) -> dict:
    """Find a user id by email address; found is false when no user has it.

    Args:
        email: The user's email, such as 'something@example.com'.
    """
    if not isinstance(email, str) or "@" not in email:
        raise ToolError(f"invalid email {email!r}")
    for uid, user in sorted(db.users.items()):
        if user.email.lower() == email.strip().lower():
            return {"user_id": uid, "found": True}
    return {"user_id": None, "found": False}


@tool(writes=FOUND_WRITES)
def find_user_id_by_name_zip(db: RetailState, first_name: str, last_name: str, zip: str) -> dict:
    """Find a user id by first name, last name and zip code; found is false when nobody matches.

    Args:
        first_name: The user's first name, such as 'John'.
        last_name: The user's last name, such as 'Doe'.
        zip: The zip code of the user's address, such as '12345'.
    """
    for name, value in (("first_name", first_name), ("last_name", last_name), ("zip", zip)):
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"{name} must be a non-empty string")
    for uid, user in sorted(db.users.items()):
        if (user.name.first_name.lower(), user.name.last_name.lower(), user.address.zip) == (
            first_name.strip().lower(),
            last_name.strip().lower(),
            zip.strip(),
        ):
            return {"user_id": uid, "found": True}
    return {"user_id": None, "found": False}


# ------------------------------------------------------------------- reads
@tool(
    prerequisites=[IDENTIFIED],
    writes={
        "payment_method_ids": "result.payment_method_ids",
        "user_order_ids": "result.orders",
        "user_address": "result.address",
    },
)
def get_user_details_retail(db: RetailState, user_id: str) -> dict:
    """Get a store user's profile: name, email, address, payment methods and orders.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
    """
    user = _user(db, user_id)
    return {
        "user_id": user_id,
        "name": user.name.model_dump(),
        "email": user.email,
        "address": user.address.model_dump(),
        "payment_methods": [
            {"payment_method_id": k, **v.model_dump(exclude_none=True)} for k, v in user.payment_methods.items()
        ],
        "payment_method_ids": list(user.payment_methods),
        "orders": list(user.orders),
    }


@tool(prerequisites=[IDENTIFIED], writes=ORDER_WRITES)
def get_order_details_retail(db: RetailState, order_id: str) -> dict:
    """Get an order's status, items, shipping address and payment history.

    Args:
        order_id: The order id, such as '#W0000000' (with the '#').
    """
    _order(db, order_id)
    return _order_view(db, order_id)


@tool(writes={"product_variants": "result.variants", "available_item_ids": "result.available_item_ids"})
def get_product_details(db: RetailState, product_id: str) -> dict:
    """Get a product's variants: item id, options, price and whether it is in stock.

    Args:
        product_id: The product id, such as 'P-1001'.
    """
    prod = find(db.products, product_id, "product")
    variants = [
        {"item_id": k, "options": dict(v.options), "price": v.price, "available": v.available}
        for k, v in prod.variants.items()
    ]
    return {
        "product_id": product_id,
        "name": prod.name,
        "variants": variants,
        "available_item_ids": [v["item_id"] for v in variants if v["available"]],
    }


@tool(writes={"product_types": "result.products"})
def list_all_product_types(db: RetailState) -> dict:
    """List every product type the store sells with its product id."""
    return {
        "products": [
            {"name": p.name, "product_id": k} for k, p in sorted(db.products.items(), key=lambda kv: kv[1].name)
        ]
    }


# ------------------------------------------------------------ pending orders
@tool(
    side_effect=True, prerequisites=[IDENTIFIED, PENDING], writes=ORDER_STATUS_WRITES, post=[_post_status("cancelled")]
)
def cancel_pending_order(db: RetailState, order_id: str, reason: CancelReason) -> dict:
    """Cancel a pending order; its payments are refunded to the methods they came from.

    Args:
        order_id: The order id, such as '#W0000000'.
        reason: 'no longer needed' or 'ordered by mistake'.
    """
    order = _order(db, order_id)
    _status(order, order_id, "pending", "cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise ToolError(f"invalid reason {reason!r}: 'no longer needed' or 'ordered by mistake'")
    user = db.users[order.user_id]
    for payment in [t for t in order.payment_history if t.transaction_type == "payment"]:
        _settle(user, payment.payment_method_id, -payment.amount)
        order.payment_history.append(
            Transaction(transaction_type="refund", amount=payment.amount, payment_method_id=payment.payment_method_id)
        )
    order.status, order.cancel_reason = "cancelled", reason
    return _order_view(db, order_id)


@tool(side_effect=True, prerequisites=[IDENTIFIED, PENDING], post=[_post_order_address])
def modify_pending_order_address(
    db: RetailState,
    order_id: str,
    address1: str,
    city: str,
    state: str,
    zip: str,
    address2: str = "",
    country: str = "USA",
) -> dict:
    """Change the shipping address of a pending order.

    Args:
        order_id: The order id, such as '#W0000000'.
        address1: Street address, such as '123 Main St'.
        city: City, such as 'San Francisco'.
        state: State, such as 'CA'.
        zip: Five-digit zip code, such as '12345'.
        address2: Apartment or suite, such as 'Apt 1'; empty if none.
        country: Country; 'USA' unless stated.
    """
    order = _order(db, order_id)
    _status(order, order_id, "pending", "modified")
    order.address = _address(address1, address2, city, state, country, zip)
    return _order_view(db, order_id)


@tool(side_effect=True, prerequisites=[IDENTIFIED, PENDING], writes={"order_items": "result.items"}, post=[_post_items])
def modify_pending_order_items(
    db: RetailState, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict:
    """Swap items of a pending order for other variants of the same products; the difference is settled.

    Args:
        order_id: The order id, such as '#W0000000'.
        item_ids: The item ids in the order to replace, such as ['I-100'].
        new_item_ids: The replacement item ids, in the same order, such as ['I-101'].
        payment_method_id: The payment method that pays or receives the price difference.
    """
    order = _order(db, order_id)
    _status(order, order_id, "pending", "modified")
    new_items, diff = _swap_and_settle(db, order, order_id, item_ids, new_item_ids, payment_method_id)
    replaced = _items_in_order(order, order_id, item_ids)
    for old, new in zip(replaced, new_items, strict=True):
        order.items[order.items.index(old)] = new
    return _order_view(db, order_id)


def _post_payment(args, result, state) -> str | None:
    order = state.orders.get(args["order_id"])
    paid = [t for t in order.payment_history if t.transaction_type == "payment"] if order else []
    if not paid or paid[-1].payment_method_id != args["payment_method_id"]:
        return "the order is not paid with the new payment method"
    return None


@tool(side_effect=True, prerequisites=[IDENTIFIED, PENDING], post=[_post_payment])
def modify_pending_order_payment(db: RetailState, order_id: str, payment_method_id: str) -> dict:
    """Pay a pending order with another payment method: the old one is refunded, the new one charged.

    Args:
        order_id: The order id, such as '#W0000000'.
        payment_method_id: The new payment method, such as 'credit_card_1234567'.
    """
    order = _order(db, order_id)
    _status(order, order_id, "pending", "modified")
    user = db.users[order.user_id]
    paid = [t for t in order.payment_history if t.transaction_type == "payment"]
    if len(paid) != 1 or any(t.transaction_type == "refund" for t in order.payment_history):
        raise ToolError(f"the payment of order {order_id} was already changed; only a single payment can be moved")
    old = paid[0]
    if payment_method_id == old.payment_method_id:
        raise ToolError(f"order {order_id} is already paid with {payment_method_id}")
    if payment_method_id not in user.payment_methods:
        raise ToolError(f"payment method {payment_method_id!r} not found for this user")
    _settle(user, payment_method_id, old.amount)
    _settle(user, old.payment_method_id, -old.amount)
    order.payment_history += [
        Transaction(transaction_type="payment", amount=old.amount, payment_method_id=payment_method_id),
        Transaction(transaction_type="refund", amount=old.amount, payment_method_id=old.payment_method_id),
    ]
    return _order_view(db, order_id)


# ---------------------------------------------------------- delivered orders
@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED, DELIVERED],
    writes=ORDER_STATUS_WRITES,
    post=[_post_status("return requested")],
)
def return_delivered_order_items(db: RetailState, order_id: str, item_ids: list[str], payment_method_id: str) -> dict:
    """Return items of a delivered order; the refund goes to the original payment method or a gift card.

    Args:
        order_id: The order id, such as '#W0000000'.
        item_ids: The item ids to return, such as ['I-100'].
        payment_method_id: Where the refund goes: the original payment method or a gift card.
    """
    order = _order(db, order_id)
    _status(order, order_id, "delivered", "returned")
    user = db.users[order.user_id]
    items = _items_in_order(order, order_id, _id_list(item_ids, "item_ids"))
    _refund_target(user, order, payment_method_id)
    amount = round(sum(it.price or 0.0 for it in items), 2)
    _settle(user, payment_method_id, -amount)
    order.payment_history.append(
        Transaction(transaction_type="refund", amount=amount, payment_method_id=payment_method_id)
    )
    order.status, order.return_items = "return requested", list(item_ids)
    return {**_order_view(db, order_id), "refund_amount": amount}


@tool(
    side_effect=True,
    prerequisites=[IDENTIFIED, DELIVERED],
    writes=ORDER_STATUS_WRITES,
    post=[_post_status("exchange requested")],
)
def exchange_delivered_order_items(
    db: RetailState, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict:
    """Exchange items of a delivered order for other variants of the same products; the difference is settled.

    Args:
        order_id: The order id, such as '#W0000000'.
        item_ids: The item ids in the order to exchange, such as ['I-200'].
        new_item_ids: The new item ids, in the same order, such as ['I-100'].
        payment_method_id: The payment method that pays or receives the price difference.
    """
    order = _order(db, order_id)
    _status(order, order_id, "delivered", "exchanged")
    _, diff = _swap_and_settle(db, order, order_id, item_ids, new_item_ids, payment_method_id)
    order.status, order.exchange_items, order.exchange_new_items = (
        "exchange requested",
        list(item_ids),
        list(new_item_ids),
    )
    return {**_order_view(db, order_id), "price_difference": diff}


# ------------------------------------------------------------------ account
@tool(side_effect=True, prerequisites=[IDENTIFIED], post=[_post_user_address])
def modify_user_address(
    db: RetailState,
    user_id: str,
    address1: str,
    city: str,
    state: str,
    zip: str,
    address2: str = "",
    country: str = "USA",
) -> dict:
    """Change a user's default address (orders already placed keep theirs).

    Args:
        user_id: The user id, such as 'sara_doe_496'.
        address1: Street address, such as '123 Main St'.
        city: City, such as 'San Francisco'.
        state: State, such as 'CA'.
        zip: Five-digit zip code, such as '12345'.
        address2: Apartment or suite, such as 'Apt 1'; empty if none.
        country: Country; 'USA' unless stated.
    """
    user = _user(db, user_id)
    user.address = _address(address1, address2, city, state, country, zip)
    return {"user_id": user_id, "address": user.address.model_dump()}
