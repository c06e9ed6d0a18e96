"""State of the simulated airline reservation service (tau2-bench airline style).

The world holds airports, flights (each with a status, seats left and a
price per cabin on every date it operates), users (with their payment
methods and reservations) and reservations (passengers, flight segments,
cabin, baggage, insurance, payment history). There is no clock: the current
time is part of the state.

Reference data lives in the state defaults; a scenario's ``initial_state``
only names what it adds or overrides: every entity dictionary given there is
merged over the defaults (a key given in the scenario replaces the default
entry with that key). A reservation is listed on its user automatically, and
one without a payment history was paid in full with its user's first
payment method. Flight dates default to bookable, with default prices and
seats per cabin.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import MergedOverReferenceData

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


# ------------------------------------------------------------ reference data
def default_airports() -> dict[str, Airport]:
    rows = {
        "ATL": ("Atlanta", "Hartsfield-Jackson Atlanta International Airport"),
        "BOS": ("Boston", "Logan International Airport"),
        "DEN": ("Denver", "Denver International Airport"),
        "DFW": ("Dallas", "Dallas/Fort Worth International Airport"),
        "EWR": ("Newark", "Newark Liberty International Airport"),
        "IAH": ("Houston", "George Bush Intercontinental Airport"),
        "JFK": ("New York", "John F. Kennedy International Airport"),
        "LAS": ("Las Vegas", "Harry Reid International Airport"),
        "LAX": ("Los Angeles", "Los Angeles International Airport"),
        "MCO": ("Orlando", "Orlando International Airport"),
        "MIA": ("Miami", "Miami International Airport"),
        "MSP": ("Minneapolis", "Minneapolis-Saint Paul International Airport"),
        "ORD": ("Chicago", "O'Hare International Airport"),
        "PHL": ("Philadelphia", "Philadelphia International Airport"),
        "PHX": ("Phoenix", "Phoenix Sky Harbor International Airport"),
        "SEA": ("Seattle", "Seattle-Tacoma International Airport"),
        "SFO": ("San Francisco", "San Francisco International Airport"),
    }
    return {k: Airport(city=c, name=n) for k, (c, n) in rows.items()}


def default_flights() -> dict[str, Flight]:
    def f(o: str, d: str, dep: str, arr: str, dates: dict[str, str]) -> Flight:
        return Flight(
            origin=o,
            destination=d,
            departure_time=dep,
            arrival_time=arr,
            dates={k: FlightDate(status=v) for k, v in dates.items()},
        )  # type: ignore[arg-type]

    # Bookable dates are in June; the 2024-05-14/15 dates carry the day's operational status.
    return {
        "HAT001": f("JFK", "SFO", "07:00", "10:30", {"2024-05-14": "landed", "2024-06-03": "available"}),
        "HAT002": f("SFO", "JFK", "12:00", "20:30", {"2024-06-10": "available"}),
        "HAT045": f("ORD", "BOS", "09:15", "12:30", {"2024-05-15": "delayed", "2024-06-05": "available"}),
        "HAT046": f("BOS", "ORD", "14:00", "16:10", {"2024-06-07": "available"}),
        "HAT110": f("LAX", "SEA", "06:30", "09:20", {"2024-05-15": "cancelled", "2024-06-04": "available"}),
        "HAT111": f("SEA", "LAX", "18:00", "20:45", {"2024-06-08": "available"}),
        "HAT207": f("MIA", "ATL", "10:00", "12:00", {"2024-05-15": "on_time", "2024-06-06": "available"}),
        "HAT208": f("ATL", "MIA", "15:00", "17:00", {"2024-06-09": "available"}),
    }


def default_users() -> dict[str, User]:
    return {
        "olivia_gray_2034": User(
            name=Name(first_name="Olivia", last_name="Gray"),
            email="olivia.gray2034@example.com",
            dob="1986-02-11",
            membership="gold",
            payment_methods={"credit_card_3180": PaymentMethod(source="credit_card", brand="visa", last_four="3180")},
            reservations=["OG7K2P"],
        ),
        "raj_patel_5120": User(
            name=Name(first_name="Raj", last_name="Patel"),
            email="raj.patel5120@example.com",
            dob="1979-09-30",
            payment_methods={"gift_card_6611": PaymentMethod(source="gift_card", amount=120.0)},
        ),
    }


def default_reservations() -> dict[str, Reservation]:
    return {
        "OG7K2P": Reservation(
            user_id="olivia_gray_2034",
            origin="ORD",
            destination="BOS",
            cabin="business",
            flights=[Segment(flight_number="HAT045", date="2024-06-05", price=400)],
            passengers=[Passenger(first_name="Olivia", last_name="Gray", dob="1986-02-11")],
            payment_history=[Payment(payment_id="credit_card_3180", amount=400)],
        ),
    }


class AirlineState(_M, MergedOverReferenceData):
    merged_tables = ("airports", "flights", "users", "reservations")
    current_time: str = "2024-05-15T15:00:00"
    airports: dict[str, Airport] = Field(default_factory=default_airports)
    flights: dict[str, Flight] = Field(default_factory=default_flights)
    users: dict[str, User] = Field(default_factory=default_users)
    reservations: dict[str, Reservation] = Field(default_factory=default_reservations)
    certificates_issued: int = 0  # numbers the certificate payment methods
    bookings_made: int = 0  # numbers new reservations

    @model_validator(mode="after")
    def _references(self) -> AirlineState:
        for rid, r in self.reservations.items():
            user = self.users.get(r.user_id)
            if user is None:
                raise ValueError(f"reservation {rid}: unknown user {r.user_id!r}")
            if rid not in user.reservations:  # a reservation is always listed on its user
                user.reservations.append(rid)
            if not r.payment_history and user.payment_methods:  # paid in full with the first method on file
                total = sum(s.price for s in r.flights) * len(r.passengers)
                r.payment_history.append(Payment(payment_id=next(iter(user.payment_methods)), amount=total))
            for s in r.flights:
                fl = self.flights.get(s.flight_number)
                if fl is None or s.date not in fl.dates:
                    raise ValueError(f"reservation {rid}: flight {s.flight_number} does not operate on {s.date}")
        for code in {c for f in self.flights.values() for c in (f.origin, f.destination)}:
            if code not in self.airports:
                raise ValueError(f"flight airport {code!r} is not a known airport")
        return self
