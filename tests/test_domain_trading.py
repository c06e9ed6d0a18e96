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
DOMAIN = load_domain("trading")


def fresh(**kw) -> TradingState:
    return DOMAIN.load_state(kw)


def run(state: TradingState, tool_name: str, /, **args):
    return DOMAIN.tools[tool_name](state, args)


def logged_in(**kw) -> TradingState:
    return fresh(authenticated=True, **kw)


def assert_error_unchanged(state: TradingState, name: str, needle: str, /, **args) -> None:
    before = DOMAIN.snapshot(state)
    out = run(state, name, **args)
    assert "error" in out and needle.lower() in out["error"].lower(), out
    assert DOMAIN.snapshot(state) == before, f"{name} changed the state on error"


# ------------------------------------------------------------------ registry
def test_registry_shape():
    assert len(DOMAIN.tools) >= 14
    for name, tool in DOMAIN.tools.items():
        assert tool.spec.domain == "trading" and tool.spec.description, name
        for prop in tool.spec.parameters["properties"].values():
            assert prop.get("description"), f"{name}: undocumented parameter"


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
    assert {n for n, t in DOMAIN.tools.items() if t.spec.side_effect} == mutating


def test_prerequisites_declared():
    pre = {n: [(p.key, p.sat.op, p.sat.value) for p in t.spec.prerequisites] for n, t in DOMAIN.tools.items()}
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
    for n, tool in DOMAIN.tools.items():
        for k in tool.spec.writes:
            writers.setdefault(k, set()).add(n)
    assert writers["trading_logged_in"] == {"trading_login", "trading_logout", "trading_get_login_status"}
    assert writers["market_status"] == {"get_market_status", "update_market_status"}
    assert writers["account_id"] == {"get_account_info"}
    assert {"get_account_info", "fund_account"} <= writers["account_balance"]
    for tool in DOMAIN.tools.values():
        for prerequisite in tool.spec.prerequisites:
            assert writers.get(prerequisite.key), f"nothing establishes {prerequisite.key!r}"


def _writes(name: str, args: dict, result: dict) -> dict:
    return toolgate.declared_writes(DOMAIN.tools[name].spec, args, result)


def test_writes_templates_and_values():
    state = fresh()
    out = run(state, "get_symbol_by_name", name="Apple")
    assert _writes("get_symbol_by_name", {"name": "Apple"}, out) == {
        "name": "Apple",
        "symbol": "AAPL",
        "symbol:Apple": "AAPL",
    }
    out = run(state, "get_stock_info", symbol="AAPL")
    assert _writes("get_stock_info", {"symbol": "AAPL"}, out) == {
        "symbol": "AAPL",
        "price": 227.16,
        "price:AAPL": 227.16,
    }
    assert _writes("trading_login", {"username": "u", "password": "p"}, {})["trading_logged_in"] is True
    assert _writes("trading_logout", {}, {})["trading_logged_in"] is False
    state = logged_in()
    args = {"order_type": "Buy", "symbol": "NVDA", "price": 120.0, "amount": 10}
    written = _writes("place_order", args, run(state, "place_order", **args))
    assert (
        written["order_id"] == 1001
        and written["order_status"] == "Open"
        and written["account_balance"] == 8800.0
        and written["amount"] == 10
    )


# --------------------------------------------------------------- session
def test_login_logout_status():
    state = fresh()
    assert run(state, "trading_get_login_status") == {"status": False}
    assert_error_unchanged(state, "trading_login", "invalid", username="john_doe", password="nope")
    assert run(state, "trading_login", username="john_doe", password="Secure123")["status"] == "Logged in successfully"
    assert state.authenticated
    assert run(state, "trading_login", username="john_doe", password="Secure123")["status"] == "Already logged in"
    assert run(state, "trading_logout") == {"status": "Logged out successfully"}
    assert not state.authenticated
    assert_error_unchanged(state, "trading_logout", "not authenticated")


def test_account_tools_need_login():
    state = fresh()
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
        assert_error_unchanged(state, name, "not authenticated", **args)


# ---------------------------------------------------------------- market
def test_market_status_from_given_time():
    state = fresh(market_status="Closed", current_time="08:00")
    assert run(state, "get_market_status") == {"status": "Closed", "as_of": "08:00"}
    assert run(state, "update_market_status", current_time_str="10:30") == {"status": "Open", "current_time": "10:30"}
    assert state.market_status == "Open" and run(state, "trading_get_current_time") == {"current_time": "10:30"}
    assert run(state, "update_market_status", current_time_str="4:00 PM")["status"] == "Closed"
    assert run(state, "update_market_status", current_time_str="09:30")["status"] == "Open"
    assert run(state, "update_market_status", current_time_str="09:29")["status"] == "Closed"
    assert_error_unchanged(state, "update_market_status", "invalid time", current_time_str="half past ten")
    assert_error_unchanged(state, "update_market_status", "invalid time", current_time_str="25:10")


def test_symbols_quotes_sectors_filter():
    state = fresh()
    assert run(state, "get_symbol_by_name", name="tesla") == {"symbol": "TSLA", "name": "Tesla"}
    assert_error_unchanged(state, "get_symbol_by_name", "not found", name="Acme")
    info = run(state, "get_stock_info", symbol="nvda")
    assert info["symbol"] == "NVDA" and info["price"] == 121.44 and info["sector"] == "Technology"
    assert_error_unchanged(state, "get_stock_info", "invalid stock symbol", symbol="XXXX")
    assert run(state, "get_available_stocks", sector="Automobile") == {"stock_list": ["TSLA", "GM"]}
    assert_error_unchanged(state, "get_available_stocks", "no listed stocks", sector="Crypto")
    out = run(state, "filter_stocks_by_price", stocks=["AAPL", "NVDA", "ZETA", "MSFT"], min_price=100, max_price=300)
    assert out == {"filtered_stocks": ["AAPL", "NVDA"]}
    assert_error_unchanged(state, "filter_stocks_by_price", "above", stocks=["AAPL"], min_price=300, max_price=100)
    assert_error_unchanged(
        state, "filter_stocks_by_price", "invalid stock symbol", stocks=["AAPL", "NOPE"], min_price=0, max_price=1
    )


# ------------------------------------------------------------- watchlist
def test_watchlist():
    state = logged_in(watchlist=["NVDA"])
    assert run(state, "add_to_watchlist", stock="AAPL") == {"watchlist": ["NVDA", "AAPL"]}
    assert run(state, "add_to_watchlist", stock="AAPL") == {"watchlist": ["NVDA", "AAPL"]}  # idempotent
    assert_error_unchanged(state, "add_to_watchlist", "invalid stock symbol", stock="NOPE")
    assert run(state, "remove_stock_from_watchlist", symbol="NVDA")["watchlist"] == ["AAPL"]
    assert_error_unchanged(state, "remove_stock_from_watchlist", "not in the watchlist", symbol="NVDA")
    assert run(state, "get_watchlist") == {"watchlist": ["AAPL"]}


# ---------------------------------------------------------------- orders
def test_place_buy_reserves_cash_and_cancel_refunds():
    state = logged_in()
    out = run(state, "place_order", order_type="Buy", symbol="AAPL", price=227.16, amount=10)
    assert out["order_id"] == 1001 and out["status"] == "Open" and out["balance"] == 7728.4
    assert state.orders["1001"].symbol == "AAPL" and state.order_counter == 1002
    assert run(state, "get_order_details", order_id=1001)["amount"] == 10
    assert run(state, "get_order_history") == {"history": [1001]}
    assert run(state, "cancel_order", order_id=1001) == {"order_id": 1001, "status": "Cancelled", "balance": 10000.0}
    assert_error_unchanged(state, "cancel_order", "cannot be cancelled", order_id=1001)
    assert_error_unchanged(state, "cancel_order", "not found", order_id=4242)
    assert_error_unchanged(state, "get_order_details", "not found", order_id=4242)


def test_place_order_errors_leave_state_unchanged():
    state = logged_in(account={"balance": 100.0, "holdings": {"TSLA": 3}})
    assert_error_unchanged(
        state, "place_order", "insufficient balance", order_type="Buy", symbol="AAPL", price=227.16, amount=1
    )
    assert_error_unchanged(
        state, "place_order", "insufficient shares", order_type="Sell", symbol="TSLA", price=245.8, amount=5
    )
    assert_error_unchanged(
        state, "place_order", "invalid stock symbol", order_type="Buy", symbol="NOPE", price=1.0, amount=1
    )
    assert_error_unchanged(state, "place_order", "positive", order_type="Buy", symbol="ZETA", price=1.0, amount=0)
    state.market_status = "Closed"
    assert_error_unchanged(
        state, "place_order", "market is closed", order_type="Buy", symbol="ZETA", price=1.0, amount=1
    )


def test_sell_reserves_and_cancel_returns_shares():
    state = logged_in(account={"holdings": {"TSLA": 10}})
    out = run(state, "place_order", order_type="Sell", symbol="TSLA", price=250.0, amount=4)
    assert out["status"] == "Open" and state.account.holdings["TSLA"] == 6 and state.account.balance == 10000.0
    run(state, "cancel_order", order_id=out["order_id"])
    assert state.account.holdings["TSLA"] == 10


def test_order_postcondition():
    state = logged_in()
    args = {"order_type": "Buy", "symbol": "GM", "price": 47.83, "amount": 3}
    out = run(state, "place_order", **args)
    spec, tool = DOMAIN.tools["place_order"].spec, DOMAIN.tools["place_order"]
    assert toolgate.postcondition(spec, tool, args, out, state) == []
    state.orders["1001"].amount = 99  # a result that does not match the world is rejected
    assert toolgate.postcondition(spec, tool, args, out, state)


# --------------------------------------------------------------- account
def test_account_fund_transactions():
    state = logged_in(account={"account_id": 555, "balance": 1000.0})
    info = run(state, "get_account_info")
    assert info["account_id"] == 555 and info["balance"] == 1000.0
    assert run(state, "fund_account", amount=500) == {"status": "Account funded successfully", "new_balance": 1500.0}
    assert_error_unchanged(state, "fund_account", "positive", amount=0)
    assert run(state, "make_transaction", account_id=555, xact_type="withdrawal", amount=200)["new_balance"] == 1300.0
    assert run(state, "make_transaction", account_id=555, xact_type="deposit", amount=50.5)["new_balance"] == 1350.5
    assert_error_unchanged(state, "make_transaction", "unknown account", account_id=1, xact_type="deposit", amount=5)
    assert_error_unchanged(
        state, "make_transaction", "insufficient funds", account_id=555, xact_type="withdrawal", amount=1e6
    )
    hist = run(state, "get_transaction_history")["transaction_history"]
    assert [(t["id"], t["type"], t["amount"]) for t in hist] == [
        (1, "deposit", 500.0),
        (2, "withdrawal", 200.0),
        (3, "deposit", 50.5),
    ]
    assert run(state, "get_transaction_history", start_date="2024-09-17")["transaction_history"] == []
    assert_error_unchanged(state, "get_transaction_history", "invalid start_date", start_date="yesterday")


# ---------------------------------------------------------- prerequisites
def test_prerequisite_checks_against_scratchpad():
    pre = {p.key: p for p in DOMAIN.tools["place_order"].spec.prerequisites}
    scratchpad = Scratchpad({"trading_logged_in": True, "market_status": "Closed", "account_balance": 0.0})
    assert toolgate.check(pre["trading_logged_in"], scratchpad) == "met"
    assert toolgate.check(pre["market_status"], scratchpad) == "not_met"
    assert toolgate.check(pre["account_balance"], scratchpad) == "not_met"
    assert toolgate.check(pre["account_balance"], Scratchpad()) == "absent"
    scratchpad.set("market_status", "Open", "test")
    scratchpad.set("account_balance", 12.5, "test")
    args = {"order_type": "Buy", "symbol": "ZETA", "price": 1.0, "amount": 1}
    assert toolgate.precondition(DOMAIN.tools["place_order"].spec, args, scratchpad) == []


# ------------------------------------------------------------ determinism
def test_snapshot_deterministic_and_json():
    def session() -> dict:
        state = fresh()
        run(state, "trading_login", username="john_doe", password="Secure123")
        run(state, "fund_account", amount=250)
        run(state, "place_order", order_type="Buy", symbol="KO", price=69.71, amount=3)
        run(state, "add_to_watchlist", stock="KO")
        return DOMAIN.snapshot(state)

    first, second = session(), session()
    assert first == second and json.loads(json.dumps(first)) == first
    assert first["orders"]["1001"]["symbol"] == "KO" and first["transactions"][0]["id"] == 1


def test_state_validation():
    with pytest.raises(ValueError, match="watchlist symbol"):
        fresh(stocks={"ZETA": {"name": "Zeta Corp", "price": 1.0}}, watchlist=["AAPL"])
    with pytest.raises(ValueError, match="order_counter"):
        fresh(
            orders={"5": {"id": 5, "order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}}, order_counter=3
        )
    state = fresh(
        orders={7: {"id": 7, "order_type": "Buy", "symbol": "AAPL", "price": 1.0, "amount": 1}}, order_counter=8
    )
    assert "7" in state.orders  # a typed (int) slot used as a key is accepted


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
    for time_text in vals["open_time"]:
        assert run(fresh(), "update_market_status", current_time_str=time_text)["status"] == "Open"
    for time_text in vals["closed_time"]:
        assert run(fresh(), "update_market_status", current_time_str=time_text)["status"] == "Closed"
    assert max(vals["order_number"]) < 9000  # solutions with existing orders start the counter at 9000


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("trading", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
