"""State of the simulated brokerage (BFCL TradingBot style).

Reference data (companies, symbols, prices, sectors), one trading account,
the watchlist, orders and cash transactions, all as ``data.json`` beside this
module gives them (the models hold structure only). The clock is data: the market
status is whatever ``update_market_status`` last computed from a time it was
given. Ids come from counters, so every run is deterministic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ..base import ReferenceData


class Stock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str  # company name, e.g. "Apple"
    price: float
    percent_change: float = 0.0
    volume: float = 1.0  # millions of shares traded today
    sector: str = "Technology"


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    order_type: Literal["Buy", "Sell"]
    symbol: str
    price: float
    amount: int  # number of shares
    status: Literal["Open", "Completed", "Cancelled"] = "Open"


class Transaction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    type: Literal["deposit", "withdrawal"]
    amount: float
    date: str  # YYYY-MM-DD


class Account(ReferenceData):
    model_config = ConfigDict(extra="forbid")
    data_section = ("account",)
    account_id: int
    username: str
    password: str
    balance: float
    binding_card: str
    holdings: dict[str, int]  # symbol -> shares not reserved by a sell order


class TradingState(ReferenceData):
    model_config = ConfigDict(extra="forbid")
    stocks: dict[str, Stock]
    account: Account
    authenticated: bool
    current_time: str  # HH:MM (24h), as last given to update_market_status
    current_date: str  # date stamped on transactions
    market_status: Literal["Open", "Closed"]
    watchlist: list[str]
    orders: dict[str, Order]  # str(order id) -> order
    order_counter: int  # the next order id
    transactions: list[Transaction]
    transaction_counter: int  # the next transaction id

    @field_validator("orders", mode="before")
    @classmethod
    def _order_keys(cls, value: Any) -> Any:
        # Order ids are integers; a scenario may key orders by a typed slot (an int), JSON keys are strings.
        return {str(k): o for k, o in value.items()} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _consistent(self) -> TradingState:
        for key, order in self.orders.items():
            if key != str(order.id):
                raise ValueError(f"order stored under {key!r} has id {order.id}")
            if order.id >= self.order_counter:
                raise ValueError(f"order id {order.id} is not below order_counter {self.order_counter}")
        for sym in self.watchlist:
            if sym not in self.stocks:
                raise ValueError(f"watchlist symbol {sym!r} is not a listed stock")
        names = [s.name.lower() for s in self.stocks.values()]
        if len(set(names)) != len(names):
            raise ValueError("two listed stocks share a company name")
        return self
