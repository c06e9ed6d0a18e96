"""The retail domain: tool behaviour, errors leave the state unchanged, prerequisites/writes, determinism."""

from __future__ import annotations

import json

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import Harness, assert_solution_verifies, solution_paths

DOM = load_domain("retail")

SCENARIO = {
    "products": {
        "P-1001": {
            "name": "Blender",
            "variants": {
                "I-200": {"options": {"color": "red"}, "price": 80.0},
                "I-100": {"options": {"color": "blue"}, "price": 90.0},
                "I-102": {"options": {"color": "black"}, "price": 80.0, "available": False},
            },
        },
        "P-1002": {
            "name": "Kettle",
            "variants": {
                "I-201": {"options": {"color": "red"}, "price": 45.0},
                "I-101": {"options": {"color": "blue"}, "price": 40.0},
            },
        },
    },
    "users": {
        "mei_davis_8935": {
            "name": {"first_name": "Mei", "last_name": "Davis"},
            "email": "mei.davis1422@example.com",
            "address": {"address1": "763 Broadway", "city": "Philadelphia", "state": "PA", "zip": "19122"},
            "payment_methods": {
                "credit_card_9513926": {"source": "credit_card", "brand": "visa", "last_four": "3926"},
                "gift_card_7091239": {"source": "gift_card", "balance": 20.0},
            },
        },
    },
    "orders": {
        "#W2378156": {
            "user_id": "mei_davis_8935",
            "items": [{"item_id": "I-200"}, {"item_id": "I-201"}],
            "status": "delivered",
        },
        "#W4860251": {"user_id": "mei_davis_8935", "items": [{"item_id": "I-200"}], "status": "pending"},
    },
}


_H = Harness(DOM, SCENARIO)
state, call, fails, writes = _H.state, _H.call, _H.fails, _H.writes


def test_defaults_merge_and_completion():
    world = state()
    assert "P-7001" in world.products and "#W7678072" in world.orders  # defaults kept
    order = world.orders["#W2378156"]
    assert [(i.name, i.product_id, i.price) for i in order.items] == [
        ("Blender", "P-1001", 80.0),
        ("Kettle", "P-1002", 45.0),
    ]
    assert order.address.city == "Philadelphia"
    assert order.payment_history[0].model_dump() == {
        "transaction_type": "payment",
        "amount": 125.0,
        "payment_method_id": "credit_card_9513926",
    }
    assert world.users["mei_davis_8935"].orders == ["#W2378156", "#W4860251"]
    with pytest.raises(ValueError, match="not in the catalog"):
        DOM.load_state({"orders": {"#W1": {"user_id": "noah_brown_6181", "items": [{"item_id": "I-999"}]}}})
    with pytest.raises(ValueError, match="two products"):
        DOM.load_state({"products": {"P-1": {"name": "X", "variants": {"I-7011": {"price": 1.0}}}}})


def test_snapshot_is_deterministic_and_json():
    first, second = state(), state()
    assert DOM.snapshot(first) == DOM.snapshot(second)
    for world in (first, second):
        call(world, "cancel_pending_order", order_id="#W4860251", reason="ordered by mistake")
    assert DOM.snapshot(first) == DOM.snapshot(second)
    json.dumps(DOM.snapshot(first))


def test_find_user_tools_write_identification():
    world = state()
    out = call(world, "find_user_id_by_email", email="MEI.davis1422@example.com")
    assert out == {"user_id": "mei_davis_8935", "found": True}
    written = writes("find_user_id_by_email", {"email": "x"}, out)
    assert written["retail_user_identified"] is True and written["user_id"] == "mei_davis_8935"
    miss = call(world, "find_user_id_by_email", email="nobody@example.com")
    assert writes("find_user_id_by_email", {"email": "x"}, miss)["retail_user_identified"] is False
    assert call(world, "find_user_id_by_name_zip", first_name="mei", last_name="Davis", zip="19122")["found"] is True
    assert call(world, "find_user_id_by_name_zip", first_name="Mei", last_name="Davis", zip="00000")["found"] is False
    fails(world, "find_user_id_by_email", "invalid email", email="not-an-email")
    fails(world, "find_user_id_by_name_zip", "non-empty", first_name="", last_name="Davis", zip="19122")


def test_reads_and_their_writes():
    world = state()
    user = call(world, "get_user_details_retail", user_id="mei_davis_8935")
    written = writes("get_user_details_retail", {"user_id": "mei_davis_8935"}, user)
    assert written["payment_method_ids"] == ["credit_card_9513926", "gift_card_7091239"]
    assert written["user_order_ids"] == ["#W2378156", "#W4860251"] and written["user_address"]["zip"] == "19122"
    fails(world, "get_user_details_retail", "not found", user_id="nobody_1")
    order = call(world, "get_order_details_retail", order_id="#W2378156")
    written = writes("get_order_details_retail", {"order_id": "#W2378156"}, order)
    assert written["order_status"] == "delivered" and written["order_item_ids"] == ["I-200", "I-201"]
    assert written["order_payment_method_id"] == "credit_card_9513926" and written["order_items"][1]["name"] == "Kettle"
    assert "item_ids" not in written  # the order's items must not bind item_ids implicitly (see the E.5 solutions)
    fails(world, "get_order_details_retail", "not found", order_id="#W0000000")
    prod = call(world, "get_product_details", product_id="P-1001")
    assert prod["available_item_ids"] == ["I-200", "I-100"]
    assert writes("get_product_details", {"product_id": "P-1001"}, prod)["product_variants"][2]["available"] is False
    fails(world, "get_product_details", "not found", product_id="P-0")
    names = [p["name"] for p in call(world, "list_all_product_types")["products"]]
    assert names == sorted(names) and "Blender" in names


def test_cancel_pending_order():
    world = state()
    fails(world, "cancel_pending_order", "invalid reason", order_id="#W4860251", reason="changed my mind")
    fails(world, "cancel_pending_order", "only pending", order_id="#W2378156", reason="no longer needed")
    out = call(world, "cancel_pending_order", order_id="#W4860251", reason="no longer needed")
    assert out["status"] == "cancelled" and out["payment_history"][-1]["transaction_type"] == "refund"
    assert writes("cancel_pending_order", {"order_id": "#W4860251"}, out)["order_status"] == "cancelled"
    assert [p.key for p in DOM.tools["cancel_pending_order"].spec.prerequisites] == [
        "retail_user_identified",
        "order_status",
    ]
    assert DOM.tools["cancel_pending_order"].spec.prerequisites[1].sat.value == "pending"


def test_modify_pending_order_address_items_payment():
    world = state()
    out = call(
        world,
        "modify_pending_order_address",
        order_id="#W4860251",
        address1="27 Elm Street",
        city="Austin",
        state="TX",
        zip="78705",
    )
    assert out["address"] == {
        "address1": "27 Elm Street",
        "address2": "",
        "city": "Austin",
        "state": "TX",
        "country": "USA",
        "zip": "78705",
    }
    fails(
        world,
        "modify_pending_order_address",
        "five digits",
        order_id="#W4860251",
        address1="1 A St",
        city="X",
        state="TX",
        zip="7870",
    )
    fails(
        world,
        "modify_pending_order_address",
        "only pending",
        order_id="#W2378156",
        address1="1 A St",
        city="X",
        state="TX",
        zip="78705",
    )
    out = call(
        world,
        "modify_pending_order_items",
        order_id="#W4860251",
        item_ids=["I-200"],
        new_item_ids=["I-100"],
        payment_method_id="credit_card_9513926",
    )
    assert out["item_ids"] == ["I-100"] and out["payment_history"][-1]["amount"] == 10.0
    fails(
        world,
        "modify_pending_order_items",
        "out of stock",
        order_id="#W4860251",
        item_ids=["I-100"],
        new_item_ids=["I-102"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "modify_pending_order_items",
        "not a variant",
        order_id="#W4860251",
        item_ids=["I-100"],
        new_item_ids=["I-101"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "modify_pending_order_payment",
        "already changed",
        order_id="#W4860251",
        payment_method_id="gift_card_7091239",
    )
    s2 = state()
    fails(s2, "modify_pending_order_payment", "balance", order_id="#W4860251", payment_method_id="gift_card_7091239")
    fails(
        s2,
        "modify_pending_order_payment",
        "already paid with",
        order_id="#W4860251",
        payment_method_id="credit_card_9513926",
    )
    s2.users["mei_davis_8935"].payment_methods["gift_card_7091239"].balance = 100.0
    out = call(s2, "modify_pending_order_payment", order_id="#W4860251", payment_method_id="gift_card_7091239")
    assert s2.users["mei_davis_8935"].payment_methods["gift_card_7091239"].balance == 20.0
    fails(
        s2,
        "modify_pending_order_payment",
        "already changed",
        order_id="#W4860251",
        payment_method_id="credit_card_9513926",
    )


def test_return_delivered_order_items():
    world = state()
    fails(
        world,
        "return_delivered_order_items",
        "not in order",
        order_id="#W2378156",
        item_ids=["I-100"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "return_delivered_order_items",
        "only delivered",
        order_id="#W4860251",
        item_ids=["I-200"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "return_delivered_order_items",
        "non-empty list",
        order_id="#W2378156",
        item_ids=[],
        payment_method_id="credit_card_9513926",
    )
    out = call(
        world,
        "return_delivered_order_items",
        order_id="#W2378156",
        item_ids=["I-201"],
        payment_method_id="gift_card_7091239",
    )
    assert out["status"] == "return requested" and out["refund_amount"] == 45.0
    assert world.users["mei_davis_8935"].payment_methods["gift_card_7091239"].balance == 65.0
    assert DOM.tools["return_delivered_order_items"].spec.prerequisites[1].sat.value == "delivered"


def test_exchange_delivered_order_items():
    world = state()
    fails(
        world,
        "exchange_delivered_order_items",
        "same length",
        order_id="#W2378156",
        item_ids=["I-200", "I-201"],
        new_item_ids=["I-100"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "exchange_delivered_order_items",
        "same variant",
        order_id="#W2378156",
        item_ids=["I-200"],
        new_item_ids=["I-200"],
        payment_method_id="credit_card_9513926",
    )
    fails(
        world,
        "exchange_delivered_order_items",
        "payment method",
        order_id="#W2378156",
        item_ids=["I-200"],
        new_item_ids=["I-100"],
        payment_method_id="paypal_0",
    )
    out = call(
        world,
        "exchange_delivered_order_items",
        order_id="#W2378156",
        item_ids=["I-200", "I-201"],
        new_item_ids=["I-100", "I-101"],
        payment_method_id="gift_card_7091239",
    )
    assert out["price_difference"] == 5.0 and out["status"] == "exchange requested"
    assert world.users["mei_davis_8935"].payment_methods["gift_card_7091239"].balance == 15.0
    assert world.orders["#W2378156"].exchange_new_items == ["I-100", "I-101"]
    fails(
        world,
        "exchange_delivered_order_items",
        "only delivered",
        order_id="#W2378156",
        item_ids=["I-200"],
        new_item_ids=["I-100"],
        payment_method_id="credit_card_9513926",
    )


def test_modify_user_address():
    world = state()
    out = call(
        world,
        "modify_user_address",
        user_id="mei_davis_8935",
        address1="445 Maple Drive",
        city="Indianapolis",
        state="IN",
        zip="46214",
        address2="Apt 2",
    )
    assert out["address"]["address2"] == "Apt 2" and world.orders["#W4860251"].address.city == "Philadelphia"
    fails(
        world,
        "modify_user_address",
        "non-empty",
        user_id="mei_davis_8935",
        address1="",
        city="X",
        state="IN",
        zip="46214",
    )
    fails(
        world, "modify_user_address", "not found", user_id="nobody_1", address1="1 A", city="X", state="IN", zip="46214"
    )


def test_side_effects():
    specs = {n: t.spec for n, t in DOM.tools.items()}
    assert len(specs) >= 10
    reads = {
        "find_user_id_by_email",
        "find_user_id_by_name_zip",
        "get_user_details_retail",
        "get_order_details_retail",
        "get_product_details",
        "list_all_product_types",
    }
    assert {n for n, s in specs.items() if not s.side_effect} == reads
    changes = [s for s in specs.values() if s.side_effect]
    assert all(s.prerequisites[0].key == "retail_user_identified" for s in changes)


def test_prerequisites_drive_toolgate():
    spec = DOM.tools["exchange_delivered_order_items"].spec
    scratchpad = Scratchpad()
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["absent", "absent"]
    scratchpad.set("retail_user_identified", False, "test")  # a lookup that found nobody
    assert toolgate.check(spec.prerequisites[0], scratchpad) == "not_met"
    scratchpad.set("retail_user_identified", True, "test")
    scratchpad.set("order_status", "pending", "test")
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "not_met"]
    scratchpad.set("order_status", "delivered", "test")
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "met"]


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("retail", at_least=36), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
