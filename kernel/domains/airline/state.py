"""State of the simulated airline reservation service (tau2-bench airline style).

The world holds airports, flights (each with a status, seats left and a
price per cabin on every date it operates), users (with their payment
methods and reservations) and reservations (passengers, flight segments,
cabin, baggage, insurance, payment history). There is no clock: the current
time is part of the state.

Reference data lives in ``data.json`` beside this module (the model holds
structure only); a scenario's ``initial_state`` only names what it adds or
overrides: every entity dictionary given there is merged over the reference
data (a key given in the scenario replaces the entry with that key). A reservation is listed on its user automatically, and
one without a payment history was paid in full with its user's first
payment method. Flight dates default to bookable, with default prices and
seats per cabin.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData

Cabin = Literal["basic_economy", "economy", "business"]
CABINS: tuple[str, ...] = ("basic_economy", "economy", "business")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Airport(_M):
    city: str
    name: str


def _prices() -> dict[str, int]:
    return {"basic_economy": 80, "economy": 150, "business": 400}


def _seats() -> dict[str, int]:
    return {"basic_economy": 10, "economy": 10, "business": 4}


class FlightDate(_M):
    # available: bookable; delayed / cancelled / on_time / landed: operational status on the day
    status: Literal["available", "on_time", "delayed", "cancelled", "landed"] = "available"
    prices: dict[Cabin, int] = Field(default_factory=_prices)
    seats: dict[Cabin, int] = Field(default_factory=_seats)


class Flight(_M):
    origin: str
    destination: str
    departure_time: str = "08:00"
    arrival_time: str = "11:00"
    dates: dict[str, FlightDate] = Field(default_factory=dict)


class Name(_M):
    first_name: str
    last_name: str


class Passenger(_M):
    first_name: str
    last_name: str
    dob: str  # YYYY-MM-DD


class PaymentMethod(_M):
    source: Literal["credit_card", "gift_card", "certificate"]
    brand: str | None = None
    last_four: str | None = None
    amount: float | None = None  # remaining balance of a gift card or certificate


class User(_M):
    name: Name
    email: str = ""
    dob: str = ""
    membership: Literal["regular", "silver", "gold"] = "regular"
    payment_methods: dict[str, PaymentMethod] = Field(default_factory=dict)
    saved_passengers: list[Passenger] = Field(default_factory=list)
    reservations: list[str] = Field(default_factory=list)


class Segment(_M):
    flight_number: str
    date: str
    price: int = 150  # paid per passenger


class Payment(_M):
    payment_id: str
    amount: float  # negative: a refund


class Reservation(_M):
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["one_way", "round_trip"] = "one_way"
    cabin: Cabin = "economy"
    flights: list[Segment]
    passengers: list[Passenger]
    payment_history: list[Payment] = Field(default_factory=list)
    created_at: str = "2024-05-01T10:00:00"
    total_baggages: int = 0
    nonfree_baggages: int = 0
    insurance: Literal["yes", "no"] = "no"
    status: Literal["active", "cancelled"] = "active"


class AirlineState(_M, ReferenceData):
    merged_tables = ("airports", "flights", "users", "reservations")
    current_time: str
    airports: dict[str, Airport]
    flights: dict[str, Flight]
    users: dict[str, User]
    reservations: dict[str, Reservation]
    certificates_issued: int  # numbers the certificate payment methods
    bookings_made: int  # numbers new reservations

    @model_validator(mode="after")
    def _references(self) -> AirlineState:
        for rid, reservation in self.reservations.items():
            user = self.users.get(reservation.user_id)
            if user is None:
                raise ValueError(f"reservation {rid}: unknown user {reservation.user_id!r}")
            if rid not in user.reservations:  # a reservation is always listed on its user
                user.reservations.append(rid)
            if not reservation.payment_history and user.payment_methods:  # paid in full with the first method on file
                total = sum(s.price for s in reservation.flights) * len(reservation.passengers)
                reservation.payment_history.append(Payment(payment_id=next(iter(user.payment_methods)), amount=total))
            for segment in reservation.flights:
                fl = self.flights.get(segment.flight_number)
                if fl is None or segment.date not in fl.dates:
                    raise ValueError(
                        f"reservation {rid}: flight {segment.flight_number} does not operate on {segment.date}"
                    )
        for code in {c for f in self.flights.values() for c in (f.origin, f.destination)}:
            if code not in self.airports:
                raise ValueError(f"flight airport {code!r} is not a known airport")
        return self
