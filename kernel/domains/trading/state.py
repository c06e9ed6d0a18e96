"""State of the simulated brokerage (BFCL TradingBot style).

Reference data (companies, symbols, prices, sectors), one trading account,
the watchlist, orders and cash transactions. The clock is data: the market
status is whatever ``update_market_status`` last computed from a time it was
given. Ids come from counters, so every run is deterministic.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


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


class Account(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account_id: int = 12345
    username: str = "john_doe"
    password: str = "Secure123"
    balance: float = 10000.0
    binding_card: str = "1974202140965533"
    holdings: dict[str, int] = Field(default_factory=dict)  # symbol -> shares not reserved by a sell order


def _default_stocks() -> dict[str, Stock]:
    rows = [
        ("AAPL", "Apple", 227.16, 0.17, 2.552, "Technology"),
        ("GOOG", "Google", 172.35, -0.42, 1.413, "Technology"),
        ("MSFT", "Microsoft", 415.6, 0.31, 1.882, "Technology"),
        ("NVDA", "Nvidia", 121.44, 1.24, 5.214, "Technology"),
        ("META", "Meta", 498.2, -0.65, 1.126, "Technology"),
        ("TSLA", "Tesla", 245.8, 2.15, 4.877, "Automobile"),
        ("GM", "General Motors", 47.83, -0.22, 1.032, "Automobile"),
        ("AMZN", "Amazon", 186.9, 0.54, 3.221, "Retail"),
        ("NFLX", "Netflix", 612.15, 1.02, 0.874, "Media"),
        ("DIS", "Disney", 98.52, -1.1, 1.445, "Media"),
        ("PFE", "Pfizer", 28.94, 0.35, 2.019, "Healthcare"),
        ("KO", "Coca-Cola", 69.71, 0.08, 1.331, "Consumer Goods"),
        ("XOM", "ExxonMobil", 118.3, -0.47, 1.765, "Energy"),
        ("JPM", "JPMorgan Chase", 210.42, 0.63, 1.204, "Finance"),
        ("ALPH", "Alpha Tech", 60.45, -0.89, 0.318, "Technology"),
        ("OMEG", "Omega Industries", 457.23, 0.12, 0.221, "Energy"),
        ("NEPT", "Neptune Systems", 48.63, 0.44, 0.157, "Technology"),
        ("ZETA", "Zeta Corp", 22.09, -0.31, 0.098, "Finance"),
    ]
    return {s: Stock(name=n, price=p, percent_change=c, volume=v, sector=sec) for s, n, p, c, v, sec in rows}


class TradingState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stocks: dict[str, Stock] = Field(default_factory=_default_stocks)
    account: Account = Field(default_factory=Account)
    authenticated: bool = False
    current_time: str = "10:30"  # HH:MM (24h), as last given to update_market_status
    current_date: str = "2024-09-16"  # date stamped on transactions
    market_status: Literal["Open", "Closed"] = "Open"
    watchlist: list[str] = Field(default_factory=list)
    orders: dict[str, Order] = Field(default_factory=dict)  # str(order id) -> order
    order_counter: int = 1001  # the next order id
    transactions: list[Transaction] = Field(default_factory=list)
    transaction_counter: int = 1  # the next transaction id

    @field_validator("orders", mode="before")
    @classmethod
    def _order_keys(cls, v: Any) -> Any:
        # Order ids are integers; a scenario may key orders by a typed slot (an int), JSON keys are strings.
        return {str(k): o for k, o in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _consistent(self) -> TradingState:
        for key, o in self.orders.items():
            if key != str(o.id):
                raise ValueError(f"order stored under {key!r} has id {o.id}")
            if o.id >= self.order_counter:
                raise ValueError(f"order id {o.id} is not below order_counter {self.order_counter}")
        for sym in self.watchlist:
            if sym not in self.stocks:
                raise ValueError(f"watchlist symbol {sym!r} is not a listed stock")
        names = [s.name.lower() for s in self.stocks.values()]
        if len(set(names)) != len(names):
            raise ValueError("two listed stocks share a company name")
        return self
