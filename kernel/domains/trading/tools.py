"""Trading tools (BFCL TradingBot style) over the simulated brokerage state only.

Scratchpad facts the tools establish (their declared ``writes``) and need
(their ``prerequisites``):

- ``trading_logged_in`` — set by ``trading_login`` (true), ``trading_logout``
  (false) and ``trading_get_login_status`` (the world's flag); every
  account, watchlist and order tool needs it true.
- ``market_status`` — set by ``get_market_status`` / ``update_market_status``;
  ``place_order`` needs it ``"Open"``.
- ``account_balance`` — set by ``get_account_info``, ``fund_account``,
  ``make_transaction``, ``place_order`` and ``cancel_order``; ``place_order``
  needs a positive cash balance.
- ``account_id`` — set by ``get_account_info``; ``make_transaction`` needs it.
- ``symbol`` and ``symbol:<company name>`` — set by ``get_symbol_by_name``
  (the most recently resolved symbol, and the symbol of that company).
- ``price`` / ``price:<symbol>`` (``get_stock_info``), ``order_id`` and
  ``order_status`` (order tools), ``stocks`` (``get_available_stocks``),
  ``watchlist``, ``current_time_str`` (``trading_get_current_time``).

No real clock: market hours are computed from a time string given as data.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError
from .state import Order, TradingState, Transaction

DOMAIN = Domain(
    "trading",
    TradingState,
    "A simulated brokerage: log in, look up stocks, manage a watchlist, place and cancel orders, fund the account.",
)
tool = DOMAIN.tool

LOGGED_IN = Prerequisite(
    key="trading_logged_in", sat=Sat(op="truthy"), description="the user must be logged in to the trading account"
)
MARKET_OPEN = Prerequisite(key="market_status", sat=Sat(op="eq", value="Open"), description="the market must be Open")
HAS_FUNDS = Prerequisite(
    key="account_balance", sat=Sat(op="gt", value=0), description="the account must have a positive cash balance"
)
ACCOUNT_KNOWN = Prerequisite(
    key="account_id", sat=Sat(op="not_null"), description="the trading account id must be known"
)

MARKET_OPEN_AT = (9, 30)
MARKET_CLOSE_AT = (16, 0)
_TIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([AaPp][Mm])?\s*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# ------------------------------------------------------------------ helpers
def _money(amount: float) -> float:
    return round(float(amount), 2)


def _need_login(state: TradingState) -> None:
    if not state.authenticated:
        raise ToolError("User not authenticated. Please log in to the trading account first.")


def _listed(state: TradingState, symbol: str) -> str:
    sym = (symbol or "").strip().upper()
    if sym not in state.stocks:
        raise ToolError(f"Invalid stock symbol: {symbol}")
    return sym


def _parse_time(text: str) -> tuple[int, int]:
    match = _TIME.match(text or "")
    if not match:
        raise ToolError(f"Invalid time {text!r}: use HH:MM (24-hour) or HH:MM AM/PM")
    hour, mi, ampm = int(match.group(1)), int(match.group(2)), match.group(3)
    if ampm:
        if not 1 <= hour <= 12:
            raise ToolError(f"Invalid time {text!r}: hour must be 1-12 with AM/PM")
        hour = hour % 12 + (12 if ampm.lower() == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= mi <= 59):
        raise ToolError(f"Invalid time {text!r}")
    return hour, mi


def _status_at(hm: tuple[int, int]) -> Literal["Open", "Closed"]:
    return "Open" if MARKET_OPEN_AT <= hm < MARKET_CLOSE_AT else "Closed"


def _order(state: TradingState, order_id: int) -> Order:
    order = state.orders.get(str(order_id))
    if order is None:
        raise ToolError(f"Order {order_id} not found.")
    return order


def _check_date(date: str | None, what: str) -> None:
    if date is not None and not _DATE.match(date):
        raise ToolError(f"Invalid {what} {date!r}: use YYYY-MM-DD")


def _record(state: TradingState, kind: Literal["deposit", "withdrawal"], amount: float) -> None:
    state.transactions.append(
        Transaction(id=state.transaction_counter, type=kind, amount=_money(amount), date=state.current_date)
    )
    state.transaction_counter += 1


# ----------------------------------------------------------- postconditions
def _post_logged_in(args: dict, result: Any, state: TradingState) -> str | None:
    return None if state.authenticated else "login did not authenticate the session"


def _post_logged_out(args: dict, result: Any, state: TradingState) -> str | None:
    return "logout left the session authenticated" if state.authenticated else None


def _post_order_placed(args: dict, result: Any, state: TradingState) -> str | None:
    order = state.orders.get(str(result.get("order_id")))
    if order is None:
        return f"order {result.get('order_id')} was not recorded"
    want = (args["order_type"], args["symbol"].strip().upper(), _money(args["price"]), int(args["amount"]))
    if (order.order_type, order.symbol, order.price, order.amount) != want or order.status != "Open":
        return f"order {order.id} does not match the request {want}"
    if _money(result.get("balance", -1)) != _money(state.account.balance):
        return "reported balance differs from the account balance"
    return None


def _post_order_cancelled(args: dict, result: Any, state: TradingState) -> str | None:
    order = state.orders.get(str(args["order_id"]))
    return None if order is not None and order.status == "Cancelled" else f"order {args['order_id']} is not cancelled"


def _post_balance(args: dict, result: Any, state: TradingState) -> str | None:
    got = result.get("new_balance")
    return (
        None
        if got is not None and _money(got) == _money(state.account.balance)
        else "reported balance differs from the account balance"
    )


def _post_in_watchlist(args: dict, result: Any, state: TradingState) -> str | None:
    return None if args["stock"].strip().upper() in state.watchlist else f"{args['stock']} is not in the watchlist"


def _post_not_in_watchlist(args: dict, result: Any, state: TradingState) -> str | None:
    return f"{args['symbol']} is still in the watchlist" if args["symbol"].strip().upper() in state.watchlist else None


def _post_market(args: dict, result: Any, state: TradingState) -> str | None:
    want = _status_at(_parse_time(args["current_time_str"]))
    return (
        None if state.market_status == want == result.get("status") else "market status does not follow the given time"
    )


def _post_symbol(args: dict, result: Any, state: TradingState) -> str | None:
    stock = state.stocks.get(result.get("symbol", ""))
    return (
        None
        if stock is not None and stock.name.lower() == args["name"].strip().lower()
        else "resolved symbol does not belong to the company"
    )


_NUM = {"type": "number"}
_STR = {"type": "string"}


# ------------------------------------------------------------ session tools
@tool(
    side_effect=True,
    writes={"trading_logged_in": "const:true", "trading_username": "params.username"},
    post=[_post_logged_in],
    secret=("password",),
)
def trading_login(state: TradingState, username: str, password: str) -> dict:
    """Log in to the trading account with a username and password.

    Args:
        username: Trading account username.
        password: Trading account password.
    """
    acc = state.account
    if username != acc.username or password != acc.password:
        raise ToolError("Invalid username or password.")
    if state.authenticated:
        return {"status": "Already logged in", "username": username}
    state.authenticated = True
    return {"status": "Logged in successfully", "username": username}


@tool(side_effect=True, prerequisites=[LOGGED_IN], writes={"trading_logged_in": "const:false"}, post=[_post_logged_out])
def trading_logout(state: TradingState) -> dict:
    """Log out of the trading account."""
    _need_login(state)
    state.authenticated = False
    return {"status": "Logged out successfully"}


@tool(writes={"trading_logged_in": "result.status"})
def trading_get_login_status(state: TradingState) -> dict:
    """Tell whether the user is currently logged in to the trading account."""
    return {"status": state.authenticated}


# ------------------------------------------------------------- market tools
@tool(writes={"current_time_str": "result.current_time"})
def trading_get_current_time(state: TradingState) -> dict:
    """Return the trading desk's current time (HH:MM, 24-hour)."""
    return {"current_time": state.current_time}


@tool(writes={"market_status": "result.status"})
def get_market_status(state: TradingState) -> dict:
    """Return whether the stock market is Open or Closed (as last updated)."""
    return {"status": state.market_status, "as_of": state.current_time}


@tool(side_effect=True, writes={"market_status": "result.status"}, post=[_post_market])
def update_market_status(state: TradingState, current_time_str: str) -> dict:
    """Update the market status from a time of day: Open from 09:30 to 16:00, Closed otherwise.

    Args:
        current_time_str: Current time, HH:MM (24-hour) or HH:MM AM/PM.
    """
    hm = _parse_time(current_time_str)
    status = _status_at(hm)
    state.market_status = status
    state.current_time = f"{hm[0]:02d}:{hm[1]:02d}"
    return {"status": status, "current_time": state.current_time}


@tool(writes={"symbol": "result.symbol", "symbol:{params.name}": "result.symbol"}, post=[_post_symbol])
def get_symbol_by_name(state: TradingState, name: str) -> dict:
    """Find the stock symbol of a company from its name.

    Args:
        name: Company name, e.g. 'Apple'.
    """
    want = (name or "").strip().lower()
    for sym, stock in state.stocks.items():
        if stock.name.lower() == want:
            return {"symbol": sym, "name": stock.name}
    raise ToolError(f"Stock not found: no listed company named {name!r}.")


@tool(
    writes={"price": "result.price", "price:{params.symbol}": "result.price"},
    output_schema={
        "type": "object",
        "required": ["symbol", "name", "price", "percent_change", "volume", "sector"],
        "properties": {
            "symbol": _STR,
            "name": _STR,
            "price": _NUM,
            "percent_change": _NUM,
            "volume": _NUM,
            "sector": _STR,
        },
    },
)
def get_stock_info(state: TradingState, symbol: str) -> dict:
    """Get the current price, daily change, volume and sector of a stock.

    Args:
        symbol: Stock symbol, e.g. 'AAPL'.
    """
    sym = _listed(state, symbol)
    stock = state.stocks[sym]
    return {
        "symbol": sym,
        "name": stock.name,
        "price": stock.price,
        "percent_change": stock.percent_change,
        "volume": stock.volume,
        "sector": stock.sector,
    }


@tool(writes={"stocks": "result.stock_list"})
def get_available_stocks(state: TradingState, sector: str) -> dict:
    """List the symbols of the stocks listed in a sector.

    Args:
        sector: Sector name, e.g. 'Technology' or 'Automobile'.
    """
    want = (sector or "").strip().lower()
    syms = [sym for sym, s in state.stocks.items() if s.sector.lower() == want]
    if not syms:
        known = sorted({s.sector for s in state.stocks.values()})
        raise ToolError(f"No listed stocks in sector {sector!r}; sectors: {', '.join(known)}")
    return {"stock_list": syms}


@tool(writes={"filtered_stocks": "result.filtered_stocks"})
def filter_stocks_by_price(state: TradingState, stocks: list[str], min_price: float, max_price: float) -> dict:
    """Keep the stocks whose current price lies between a minimum and a maximum.

    Args:
        stocks: Stock symbols to filter.
        min_price: Lowest price to keep (inclusive).
        max_price: Highest price to keep (inclusive).
    """
    if min_price > max_price:
        raise ToolError(f"min_price {min_price} is above max_price {max_price}")
    syms = [_listed(state, s) for s in stocks]
    return {"filtered_stocks": [s for s in syms if min_price <= state.stocks[s].price <= max_price]}


# ---------------------------------------------------------- watchlist tools
@tool(side_effect=True, prerequisites=[LOGGED_IN], writes={"watchlist": "result.watchlist"}, post=[_post_in_watchlist])
def add_to_watchlist(state: TradingState, stock: str) -> dict:
    """Add a stock to the watchlist (no change if it is already there).

    Args:
        stock: Stock symbol to add, e.g. 'AAPL'.
    """
    _need_login(state)
    sym = _listed(state, stock)
    if sym not in state.watchlist:
        state.watchlist.append(sym)
    return {"watchlist": list(state.watchlist)}


@tool(
    side_effect=True, prerequisites=[LOGGED_IN], writes={"watchlist": "result.watchlist"}, post=[_post_not_in_watchlist]
)
def remove_stock_from_watchlist(state: TradingState, symbol: str) -> dict:
    """Remove a stock from the watchlist.

    Args:
        symbol: Stock symbol to remove.
    """
    _need_login(state)
    sym = (symbol or "").strip().upper()
    if sym not in state.watchlist:
        raise ToolError(f"Stock {symbol} is not in the watchlist.")
    state.watchlist.remove(sym)
    return {"status": f"Stock {sym} removed from watchlist successfully.", "watchlist": list(state.watchlist)}


@tool(prerequisites=[LOGGED_IN], writes={"watchlist": "result.watchlist"})
def get_watchlist(state: TradingState) -> dict:
    """Return the symbols on the watchlist."""
    _need_login(state)
    return {"watchlist": list(state.watchlist)}


# -------------------------------------------------------------- order tools
@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, MARKET_OPEN, HAS_FUNDS],
    writes={"order_id": "result.order_id", "order_status": "result.status", "account_balance": "result.balance"},
    post=[_post_order_placed],
    output_schema={
        "type": "object",
        "required": ["order_id", "order_type", "symbol", "price", "amount", "status", "balance"],
        "properties": {"order_id": {"type": "integer"}, "price": _NUM, "amount": {"type": "integer"}, "balance": _NUM},
    },
)
def place_order(
    state: TradingState, order_type: Literal["Buy", "Sell"], symbol: str, price: float, amount: int
) -> dict:
    """Place a buy or sell order for shares of a stock at a limit price.

    Needs a login, an open market and a positive cash balance; a buy reserves its cost,
    a sell reserves the shares.

    Args:
        order_type: 'Buy' or 'Sell'.
        symbol: Stock symbol, e.g. 'AAPL'.
        price: Limit price per share.
        amount: Number of shares.
    """
    _need_login(state)
    if state.market_status != "Open":
        raise ToolError("The market is closed; orders can only be placed while it is Open.")
    sym = _listed(state, symbol)
    if price <= 0 or amount <= 0:
        raise ToolError("Price and amount must be positive values.")
    acc = state.account
    cost = _money(price * amount)
    if order_type == "Buy":
        if cost > acc.balance:
            raise ToolError(f"Insufficient balance: the order costs {cost:.2f}, the balance is {acc.balance:.2f}.")
        acc.balance = _money(acc.balance - cost)
    else:
        held = acc.holdings.get(sym, 0)
        if held < amount:
            raise ToolError(f"Insufficient shares: {held} {sym} held, {amount} to sell.")
        acc.holdings[sym] = held - amount
    oid = state.order_counter
    state.orders[str(oid)] = Order(id=oid, order_type=order_type, symbol=sym, price=_money(price), amount=amount)
    state.order_counter += 1
    return {
        "order_id": oid,
        "order_type": order_type,
        "symbol": sym,
        "price": _money(price),
        "amount": amount,
        "status": "Open",
        "balance": acc.balance,
    }


@tool(prerequisites=[LOGGED_IN], writes={"order_status": "result.status"})
def get_order_details(state: TradingState, order_id: int) -> dict:
    """Get the type, symbol, price, amount and status of an order.

    Args:
        order_id: Id of the order.
    """
    _need_login(state)
    order = _order(state, order_id)
    return {
        "order_id": order.id,
        "order_type": order.order_type,
        "symbol": order.symbol,
        "price": order.price,
        "amount": order.amount,
        "status": order.status,
    }


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN],
    writes={"order_status": "result.status", "account_balance": "result.balance"},
    post=[_post_order_cancelled],
)
def cancel_order(state: TradingState, order_id: int) -> dict:
    """Cancel an open order; a buy order's reserved cash (or a sell order's shares) is released.

    Args:
        order_id: Id of the order to cancel.
    """
    _need_login(state)
    order = _order(state, order_id)
    if order.status != "Open":
        raise ToolError(f"Order {order_id} is {order.status} and cannot be cancelled.")
    acc = state.account
    if order.order_type == "Buy":
        acc.balance = _money(acc.balance + order.price * order.amount)
    else:
        acc.holdings[order.symbol] = acc.holdings.get(order.symbol, 0) + order.amount
    order.status = "Cancelled"
    return {"order_id": order.id, "status": "Cancelled", "balance": acc.balance}


@tool(prerequisites=[LOGGED_IN], writes={"order_history": "result.history"})
def get_order_history(state: TradingState) -> dict:
    """Return the ids of all orders placed from the account."""
    _need_login(state)
    return {"history": sorted(o.id for o in state.orders.values())}


# ------------------------------------------------------------ account tools
@tool(
    prerequisites=[LOGGED_IN],
    writes={"account_id": "result.account_id", "account_balance": "result.balance"},
    output_schema={
        "type": "object",
        "required": ["account_id", "balance", "binding_card", "holdings"],
        "properties": {
            "account_id": {"type": "integer"},
            "balance": _NUM,
            "binding_card": _STR,
            "holdings": {"type": "object"},
        },
    },
)
def get_account_info(state: TradingState) -> dict:
    """Get the account id, cash balance, linked card and share holdings."""
    _need_login(state)
    acc = state.account
    return {
        "account_id": acc.account_id,
        "balance": acc.balance,
        "binding_card": acc.binding_card,
        "holdings": dict(acc.holdings),
    }


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, ACCOUNT_KNOWN],
    writes={"account_balance": "result.new_balance"},
    post=[_post_balance],
)
def make_transaction(
    state: TradingState, account_id: int, xact_type: Literal["deposit", "withdrawal"], amount: float
) -> dict:
    """Deposit cash into or withdraw cash from the trading account.

    Args:
        account_id: Id of the trading account.
        xact_type: 'deposit' or 'withdrawal'.
        amount: Amount of money.
    """
    _need_login(state)
    acc = state.account
    if account_id != acc.account_id:
        raise ToolError(f"Unknown account id {account_id}.")
    if amount <= 0:
        raise ToolError("Transaction amount must be positive.")
    if xact_type == "withdrawal" and amount > acc.balance:
        raise ToolError(f"Insufficient funds: the balance is {acc.balance:.2f}.")
    acc.balance = _money(acc.balance + amount if xact_type == "deposit" else acc.balance - amount)
    _record(state, xact_type, amount)
    return {"status": "Transaction successful", "new_balance": acc.balance}


@tool(
    side_effect=True, prerequisites=[LOGGED_IN], writes={"account_balance": "result.new_balance"}, post=[_post_balance]
)
def fund_account(state: TradingState, amount: float) -> dict:
    """Add money to the trading account from the linked card.

    Args:
        amount: Amount of money to add.
    """
    _need_login(state)
    if amount <= 0:
        raise ToolError("Funding amount must be positive.")
    acc = state.account
    acc.balance = _money(acc.balance + amount)
    _record(state, "deposit", amount)
    return {"status": "Account funded successfully", "new_balance": acc.balance}


@tool(prerequisites=[LOGGED_IN])
def get_transaction_history(state: TradingState, start_date: str | None = None, end_date: str | None = None) -> dict:
    """List the account's deposits and withdrawals, optionally between two dates.

    Args:
        start_date: First date to include, YYYY-MM-DD.
        end_date: Last date to include, YYYY-MM-DD.
    """
    _need_login(state)
    _check_date(start_date, "start_date")
    _check_date(end_date, "end_date")
    rows = [
        t.model_dump()
        for t in state.transactions
        if (start_date is None or t.date >= start_date) and (end_date is None or t.date <= end_date)
    ]
    return {"transaction_history": rows}
