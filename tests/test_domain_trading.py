"""The trading domain plugin: tools, errors (state unchanged), prerequisites/writes, determinism, solutions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.domains.trading.state import TradingState
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import assert_solution_verifies, solution_paths

ROOT = Path(__file__).resolve().parent.parent
D = load_domain("trading")


def fresh(**kw) -> TradingState:
    return D.load_state(kw)


def run(state: TradingState, tool_name: str, /, **args):
    return D.tools[tool_name](state, args)


def logged_in(**kw) -> TradingState:
    return fresh(authenticated=True, **kw)


def assert_error_unchanged(state: TradingState, name: str, needle: str, /, **args) -> None:
    before = D.snapshot(state)
    out = run(state, name, **args)
    assert "error" in out and needle.lower() in out["error"].lower(), out
    assert D.snapshot(state) == before, f"{name} changed the state on error"


# ------------------------------------------------------------------ registry
def test_registry_shape():
    assert len(D.tools) >= 14
    for name, t in D.tools.items():
        assert t.spec.domain == "trading" and t.spec.description, name
        for p in t.spec.parameters["properties"].values():
            assert p.get("description"), f"{name}: undocumented parameter"


def test_side_effect_flags():
    mutating = {
        "trading_login",
        "trading_logout",
        "update_market_status",
        "add_to_watchlist",
        "remove_stock_from_watchlist",
        "place_order",
        "cancel_order",
        "make_transaction",
        "fund_account",
    }
    assert {n for n, t in D.tools.items() if t.spec.side_effect} == mutating


def test_prerequisites_declared():
    pre = {n: [(p.key, p.sat.op, p.sat.value) for p in t.spec.prerequisites] for n, t in D.tools.items()}
    assert pre["place_order"] == [
        ("trading_logged_in", "truthy", None),
        ("market_status", "eq", "Open"),
        ("account_balance", "gt", 0),
    ]
    assert pre["make_transaction"] == [("trading_logged_in", "truthy", None), ("account_id", "not_null", None)]
    for n in (
        "add_to_watchlist",
        "remove_stock_from_watchlist",
        "get_watchlist",
        "get_order_details",
        "cancel_order",
        "get_order_history",
        "get_account_info",
        "fund_account",
        "get_transaction_history",
        "trading_logout",
    ):
        assert pre[n] == [("trading_logged_in", "truthy", None)], n
    for n in (
        "trading_login",
        "trading_get_login_status",
        "get_symbol_by_name",
        "get_stock_info",
        "get_market_status",
        "update_market_status",
        "get_available_stocks",
        "filter_stocks_by_price",
        "trading_get_current_time",
    ):
        assert pre[n] == [], n


def test_every_prerequisite_key_has_a_tool_that_establishes_it():
    writers: dict[str, set[str]] = {}
    for n, t in D.tools.items():
        for k in t.spec.writes:
            writers.setdefault(k, set()).add(n)
    assert writers["trading_logged_in"] == {"trading_login", "trading_logout", "trading_get_login_status"}
    assert writers["market_status"] == {"get_market_status", "update_market_status"}
    assert writers["account_id"] == {"get_account_info"}
    assert {"get_account_info", "fund_account"} <= writers["account_balance"]
    for t in D.tools.values():
        for p in t.spec.prerequisites:
            assert writers.get(p.key), f"nothing establishes {p.key!r}"


def _writes(name: str, args: dict, result: dict) -> dict:
    return toolgate.declared_writes(D.tools[name].spec, args, result)


def test_writes_templates_and_values():
    s = fresh()
    out = run(s, "get_symbol_by_name", name="Apple")
    assert _writes("get_symbol_by_name", {"name": "Apple"}, out) == {
        "name": "Apple",
        "symbol": "AAPL",
        "symbol:Apple": "AAPL",
    }
    out = run(s, "get_stock_info", symbol="AAPL")
    assert _writes("get_stock_info", {"symbol": "AAPL"}, out) == {
        "symbol": "AAPL",
        "price": 227.16,
        "price:AAPL": 227.16,
    }
    assert _writes("trading_login", {"username": "u", "password": "p"}, {})["trading_logged_in"] is True
    assert _writes("trading_logout", {}, {})["trading_logged_in"] is False
    s = logged_in()
    args = {"order_type": "Buy", "symbol": "NVDA", "price": 120.0, "amount": 10}
    w = _writes("place_order", args, run(s, "place_order", **args))
    assert (
        w["order_id"] == 1001 and w["order_status"] == "Open" and w["account_balance"] == 8800.0 and w["amount"] == 10
    )


# --------------------------------------------------------------- session
def test_login_logout_status():
    s = fresh()
    assert run(s, "trading_get_login_status") == {"status": False}
    assert_error_unchanged(s, "trading_login", "invalid", username="john_doe", password="nope")
    assert run(s, "trading_login", username="john_doe", password="Secure123")["status"] == "Logged in successfully"
    assert s.authenticated
    assert run(s, "trading_login", username="john_doe", password="Secure123")["status"] == "Already logged in"
    assert run(s, "trading_logout") == {"status": "Logged out successfully"}
    assert not s.authenticated
    assert_error_unchanged(s, "trading_logout", "not authenticated")


def test_account_tools_need_login():
    s = fresh()
    for name, args in [
        ("get_watchlist", {}),
        ("add_to_watchlist", {"stock": "AAPL"}),
        ("get_account_info", {}),
        ("fund_account", {"amount": 10}),
        ("get_order_history", {}),
        ("get_transaction_history", {}),
        ("place_order", {"order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}),
        ("make_transaction", {"account_id": 12345, "xact_type": "deposit", "amount": 5}),
    ]:
        assert_error_unchanged(s, name, "not authenticated", **args)


# ---------------------------------------------------------------- market
def test_market_status_from_given_time():
    s = fresh(market_status="Closed", current_time="08:00")
    assert run(s, "get_market_status") == {"status": "Closed", "as_of": "08:00"}
    assert run(s, "update_market_status", current_time_str="10:30") == {"status": "Open", "current_time": "10:30"}
    assert s.market_status == "Open" and run(s, "trading_get_current_time") == {"current_time": "10:30"}
    assert run(s, "update_market_status", current_time_str="4:00 PM")["status"] == "Closed"
    assert run(s, "update_market_status", current_time_str="09:30")["status"] == "Open"
    assert run(s, "update_market_status", current_time_str="09:29")["status"] == "Closed"
    assert_error_unchanged(s, "update_market_status", "invalid time", current_time_str="half past ten")
    assert_error_unchanged(s, "update_market_status", "invalid time", current_time_str="25:10")


def test_symbols_quotes_sectors_filter():
    s = fresh()
    assert run(s, "get_symbol_by_name", name="tesla") == {"symbol": "TSLA", "name": "Tesla"}
    assert_error_unchanged(s, "get_symbol_by_name", "not found", name="Acme")
    info = run(s, "get_stock_info", symbol="nvda")
    assert info["symbol"] == "NVDA" and info["price"] == 121.44 and info["sector"] == "Technology"
    assert_error_unchanged(s, "get_stock_info", "invalid stock symbol", symbol="XXXX")
    assert run(s, "get_available_stocks", sector="Automobile") == {"stock_list": ["TSLA", "GM"]}
    assert_error_unchanged(s, "get_available_stocks", "no listed stocks", sector="Crypto")
    out = run(s, "filter_stocks_by_price", stocks=["AAPL", "NVDA", "ZETA", "MSFT"], min_price=100, max_price=300)
    assert out == {"filtered_stocks": ["AAPL", "NVDA"]}
    assert_error_unchanged(s, "filter_stocks_by_price", "above", stocks=["AAPL"], min_price=300, max_price=100)
    assert_error_unchanged(
        s, "filter_stocks_by_price", "invalid stock symbol", stocks=["AAPL", "NOPE"], min_price=0, max_price=1
    )


# ------------------------------------------------------------- watchlist
def test_watchlist():
    s = logged_in(watchlist=["NVDA"])
    assert run(s, "add_to_watchlist", stock="AAPL") == {"watchlist": ["NVDA", "AAPL"]}
    assert run(s, "add_to_watchlist", stock="AAPL") == {"watchlist": ["NVDA", "AAPL"]}  # idempotent
    assert_error_unchanged(s, "add_to_watchlist", "invalid stock symbol", stock="NOPE")
    assert run(s, "remove_stock_from_watchlist", symbol="NVDA")["watchlist"] == ["AAPL"]
    assert_error_unchanged(s, "remove_stock_from_watchlist", "not in the watchlist", symbol="NVDA")
    assert run(s, "get_watchlist") == {"watchlist": ["AAPL"]}


# ---------------------------------------------------------------- orders
def test_place_buy_reserves_cash_and_cancel_refunds():
    s = logged_in()
    out = run(s, "place_order", order_type="Buy", symbol="AAPL", price=227.16, amount=10)
    assert out["order_id"] == 1001 and out["status"] == "Open" and out["balance"] == 7728.4
    assert s.orders["1001"].symbol == "AAPL" and s.order_counter == 1002
    assert run(s, "get_order_details", order_id=1001)["amount"] == 10
    assert run(s, "get_order_history") == {"history": [1001]}
    assert run(s, "cancel_order", order_id=1001) == {"order_id": 1001, "status": "Cancelled", "balance": 10000.0}
    assert_error_unchanged(s, "cancel_order", "cannot be cancelled", order_id=1001)
    assert_error_unchanged(s, "cancel_order", "not found", order_id=4242)
    assert_error_unchanged(s, "get_order_details", "not found", order_id=4242)


def test_place_order_errors_leave_state_unchanged():
    s = logged_in(account={"balance": 100.0, "holdings": {"TSLA": 3}})
    assert_error_unchanged(
        s, "place_order", "insufficient balance", order_type="Buy", symbol="AAPL", price=227.16, amount=1
    )
    assert_error_unchanged(
        s, "place_order", "insufficient shares", order_type="Sell", symbol="TSLA", price=245.8, amount=5
    )
    assert_error_unchanged(
        s, "place_order", "invalid stock symbol", order_type="Buy", symbol="NOPE", price=1.0, amount=1
    )
    assert_error_unchanged(s, "place_order", "positive", order_type="Buy", symbol="ZETA", price=1.0, amount=0)
    s.market_status = "Closed"
    assert_error_unchanged(s, "place_order", "market is closed", order_type="Buy", symbol="ZETA", price=1.0, amount=1)


def test_sell_reserves_and_cancel_returns_shares():
    s = logged_in(account={"holdings": {"TSLA": 10}})
    out = run(s, "place_order", order_type="Sell", symbol="TSLA", price=250.0, amount=4)
    assert out["status"] == "Open" and s.account.holdings["TSLA"] == 6 and s.account.balance == 10000.0
    run(s, "cancel_order", order_id=out["order_id"])
    assert s.account.holdings["TSLA"] == 10


def test_order_postcondition():
    s = logged_in()
    args = {"order_type": "Buy", "symbol": "GM", "price": 47.83, "amount": 3}
    out = run(s, "place_order", **args)
    spec, tool = D.tools["place_order"].spec, D.tools["place_order"]
    assert toolgate.postcondition(spec, tool, args, out, s) == []
    s.orders["1001"].amount = 99  # a result that does not match the world is rejected
    assert toolgate.postcondition(spec, tool, args, out, s)


# --------------------------------------------------------------- account
def test_account_fund_transactions():
    s = logged_in(account={"account_id": 555, "balance": 1000.0})
    info = run(s, "get_account_info")
    assert info["account_id"] == 555 and info["balance"] == 1000.0
    assert run(s, "fund_account", amount=500) == {"status": "Account funded successfully", "new_balance": 1500.0}
    assert_error_unchanged(s, "fund_account", "positive", amount=0)
    assert run(s, "make_transaction", account_id=555, xact_type="withdrawal", amount=200)["new_balance"] == 1300.0
    assert run(s, "make_transaction", account_id=555, xact_type="deposit", amount=50.5)["new_balance"] == 1350.5
    assert_error_unchanged(s, "make_transaction", "unknown account", account_id=1, xact_type="deposit", amount=5)
    assert_error_unchanged(
        s, "make_transaction", "insufficient funds", account_id=555, xact_type="withdrawal", amount=1e6
    )
    hist = run(s, "get_transaction_history")["transaction_history"]
    assert [(t["id"], t["type"], t["amount"]) for t in hist] == [
        (1, "deposit", 500.0),
        (2, "withdrawal", 200.0),
        (3, "deposit", 50.5),
    ]
    assert run(s, "get_transaction_history", start_date="2024-09-17")["transaction_history"] == []
    assert_error_unchanged(s, "get_transaction_history", "invalid start_date", start_date="yesterday")


# ---------------------------------------------------------- prerequisites
def test_prerequisite_checks_against_scratchpad():
    pre = {p.key: p for p in D.tools["place_order"].spec.prerequisites}
    S = Scratchpad({"trading_logged_in": True, "market_status": "Closed", "account_balance": 0.0})
    assert toolgate.check(pre["trading_logged_in"], S) == "met"
    assert toolgate.check(pre["market_status"], S) == "not_met"
    assert toolgate.check(pre["account_balance"], S) == "not_met"
    assert toolgate.check(pre["account_balance"], Scratchpad()) == "absent"
    S.set("market_status", "Open", "test")
    S.set("account_balance", 12.5, "test")
    args = {"order_type": "Buy", "symbol": "ZETA", "price": 1.0, "amount": 1}
    assert toolgate.precondition(D.tools["place_order"].spec, args, S) == []


# ------------------------------------------------------------ determinism
def test_snapshot_deterministic_and_json():
    def session() -> dict:
        s = fresh()
        run(s, "trading_login", username="john_doe", password="Secure123")
        run(s, "fund_account", amount=250)
        run(s, "place_order", order_type="Buy", symbol="KO", price=69.71, amount=3)
        run(s, "add_to_watchlist", stock="KO")
        return D.snapshot(s)

    a, b = session(), session()
    assert a == b and json.loads(json.dumps(a)) == a
    assert a["orders"]["1001"]["symbol"] == "KO" and a["transactions"][0]["id"] == 1


def test_state_validation():
    with pytest.raises(ValueError, match="watchlist symbol"):
        fresh(stocks={"ZETA": {"name": "Zeta Corp", "price": 1.0}}, watchlist=["AAPL"])
    with pytest.raises(ValueError, match="order_counter"):
        fresh(
            orders={"5": {"id": 5, "order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}}, order_counter=3
        )
    s = fresh(orders={7: {"id": 7, "order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}}, order_counter=8)
    assert "7" in s.orders  # a typed (int) slot used as a key is accepted


# -------------------------------------------------------------- slot values
def test_slot_values_valid_in_domain_data():
    vals = json.loads((ROOT / "data_gen" / "slot_values" / "trading.json").read_text())
    assert all(len(v) >= 8 for v in vals.values())
    table = TradingState().stocks
    names = {s.name for s in table.values()}
    assert set(vals["company_name"]) <= names and set(vals["ticker"]) <= set(table)
    assert set(vals["sector"]) <= {s.sector for s in table.values()}
    fillers = {"ZETA", "ALPH", "NEPT", "OMEG"}
    assert not fillers & set(vals["ticker"]) and not {table[f].name for f in fillers} & set(vals["company_name"])
    assert max(vals["share_price"]) * max(vals["share_count"]) < min(vals["large_cash_amount"])
    for t in vals["open_time"]:
        assert run(fresh(), "update_market_status", current_time_str=t)["status"] == "Open"
    for t in vals["closed_time"]:
        assert run(fresh(), "update_market_status", current_time_str=t)["status"] == "Closed"
    assert max(vals["order_number"]) < 9000  # solutions with existing orders start the counter at 9000


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("trading", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
