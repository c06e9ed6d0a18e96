"""State of the simulated travel booking service (BFCL TravelAPI style).

Reference data (airports with their coordinates, the nearest airport of each
city, exchange rates) lives in ``data.json`` beside this module (the model
holds structure only) and a scenario can override it; fares are a deterministic function of the great-circle distance
between two airports and the travel class (see ``tools.fare``). There is no
clock: ``current_date`` is part of the state.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..base import ReferenceData


class Airport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    city: str
    country: str
    lat: float
    lon: float


class CreditCard(BaseModel):
    model_config = ConfigDict(extra="forbid")
    card_number: str
    cardholder_name: str
    expiration_date: str  # MM/YYYY
    card_verification_number: int
    balance: float = 0.0


class Insurance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    insurance_id: str
    insurance_type: str
    insurance_cost: float
    card_id: str


class Booking(BaseModel):
    model_config = ConfigDict(extra="forbid")
    card_id: str
    travel_date: str
    travel_from: str
    travel_to: str
    travel_class: Literal["economy", "business", "first"]
    travel_cost: float
    status: Literal["confirmed", "cancelled"] = "confirmed"
    insurance: Insurance | None = None


class SupportCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    case_id: str
    booking_id: str
    message: str


class TravelState(ReferenceData):
    model_config = ConfigDict(extra="forbid")
    current_date: str  # YYYY-MM-DD; the simulation has no clock
    # reference data
    airports: dict[str, Airport]
    city_airports: dict[str, str]  # city -> nearest airport code
    exchange_rates: dict[str, float]  # units of each currency per 1 USD (direct quotes against USD only)
    # the session
    access_token: str | None
    token_scope: str | None
    user_first_name: str | None
    user_last_name: str | None
    # the account
    credit_cards: dict[str, CreditCard]
    bookings: dict[str, Booking]
    budget_limit: float | None
    support_cases: list[SupportCase]
    next_booking_number: int
