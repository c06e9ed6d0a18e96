"""Airline customer-service tools (tau2-bench airline style) over the in-memory airline state.

ToolGate prerequisites carry the airline's policy: a reservation may only be
changed after its details were retrieved (``reservation_loaded``), a
passenger update needs the stored date of birth to preserve
(``passenger_dob_known``), flights of a basic-economy reservation cannot be
changed (``reservation_changeable``), a cancellation must be eligible
(``cancellation_eligible``: booked within 24 hours, business cabin, travel
insurance, or a flight cancelled by the airline), a booking needs the user's
profile (``airline_user_loaded``) and a compensation certificate a disrupted
flight (``flight_disrupted``). The retrieval tools write these facts. The four
reservation facts are per reservation (entity ``reservation_id``): a task is
checked on the entry of the reservation it names, ``reservation_loaded[<id>]``
and so on, which the reservation views write besides the plain keys of the
reservation read last (docs/kernel.md, "Per-entity prerequisites"), so loading
one reservation neither clears nor blocks a change to another.

Prices are per passenger and cabin on each flight date; checked bags beyond
the free allowance cost 50 each; travel insurance costs 30 per passenger.
Every tool validates its input before it changes anything and reports
failures as ``ToolError``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, find, status_is
from .state import CABINS, AirlineState, Passenger, Payment, PaymentMethod, Reservation, Segment, User

DOMAIN = Domain(
    "airline",
    AirlineState,
    "An airline's customer service: look up users, reservations and flights, book, change flights, cabin, "
    "passengers and baggage, cancel reservations and issue compensation certificates.",
)
tool = DOMAIN.tool

CabinName = Literal["basic_economy", "economy", "business"]
BAG_FEE = 50
INSURANCE_FEE = 30
# free checked bags per passenger, by membership and cabin
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 3},
}
COMPENSATION = {"delayed": 50, "cancelled": 100}  # certificate value per passenger

# ----------------------------------------------------------- prerequisites
RESERVATION_LOADED = Prerequisite(
    key="reservation_loaded",
    sat=Sat(op="truthy"),
    entity="reservation_id",
    description="the reservation's details were retrieved (get_reservation_details)",
)
DOB_KNOWN = Prerequisite(
    key="passenger_dob_known",
    sat=Sat(op="not_null"),
    entity="reservation_id",
    description="the stored date of birth of the passengers is known (get_reservation_details)",
)
CHANGEABLE = Prerequisite(
    key="reservation_changeable",
    sat=Sat(op="truthy"),
    entity="reservation_id",
    description="the reservation's flights may be changed (not basic economy)",
)
CANCELLABLE = Prerequisite(
    key="cancellation_eligible",
    sat=Sat(op="truthy"),
    entity="reservation_id",
    description="the reservation may be cancelled (booked within 24 h, business, insured, or airline-cancelled flight)",
)
USER_LOADED = Prerequisite(
    key="airline_user_loaded",
    sat=Sat(op="truthy"),
    description="the user's profile was retrieved (get_user_details)",
)
DISRUPTED = Prerequisite(
    key="flight_disrupted",
    sat=Sat(op="truthy"),
    description="the flight was delayed or cancelled (get_flight_status)",
)

# What a reservation view puts into the scratchpad (retrieval and booking).
RESERVATION_WRITES = {
    "reservation_loaded": "const:true",
    "current_passengers": "result.passengers",
    "passenger_dob_known": "result.passengers.0.dob",
    "current_cabin": "result.cabin",
    "current_flights": "result.flights",
    "current_total_baggages": "result.total_baggages",
    "reservation_changeable": "result.changeable",
    "cancellation_eligible": "result.cancellation_eligible",
    "reservation_payment_id": "result.payment_history.0.payment_id",
    "reservation_user_id": "result.user_id",
    # the same facts per reservation, the entries the per-entity prerequisites consult
    "reservation_loaded[{result.reservation_id}]": "const:true",
    "passenger_dob_known[{result.reservation_id}]": "result.passengers.0.dob",
    "reservation_changeable[{result.reservation_id}]": "result.changeable",
    "cancellation_eligible[{result.reservation_id}]": "result.cancellation_eligible",
}

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PassengerInfo(BaseModel):
    """A passenger as given in a call."""

    model_config = ConfigDict(extra="forbid")
    first_name: str
    last_name: str
    dob: str


class FlightChoice(BaseModel):
    """One flight segment as given in a call."""

    model_config = ConfigDict(extra="forbid")
    flight_number: str
    date: str


# ----------------------------------------------------------------- helpers
def _now(state: AirlineState) -> datetime:
    return datetime.fromisoformat(state.current_time)


def _today(state: AirlineState) -> str:
    return state.current_time[:10]


def _date(value: Any, what: str = "date") -> str:
    if not isinstance(value, str) or not _DATE.match(value):
        raise ToolError(f"invalid {what} {value!r}: use YYYY-MM-DD")
    try:
        datetime.strptime(value, "%Y-%m-%d")
    except ValueError:
        raise ToolError(f"invalid {what} {value!r}: no such date") from None
    return value


def _user(state: AirlineState, user_id: str) -> User:
    return find(state.users, user_id, "user")


def _reservation(state: AirlineState, reservation_id: str, active: bool = True) -> Reservation:
    reservation = find(state.reservations, reservation_id, "reservation")
    if active and reservation.status != "active":
        raise ToolError(f"reservation {reservation_id} is {reservation.status}")
    return reservation


def _cabin(cabin: Any) -> str:
    if cabin not in CABINS:
        raise ToolError(f"invalid cabin {cabin!r}: use basic_economy, economy or business")
    return cabin


def _airport(state: AirlineState, code: Any, what: str) -> str:
    if not isinstance(code, str) or code not in state.airports:
        raise ToolError(f"{what}: unknown airport code {code!r}; see list_all_airports_airline")
    return code


def _flown(state: AirlineState, seg: Segment) -> bool:
    fd = state.flights[seg.flight_number].dates[seg.date]
    return seg.date < _today(state) or fd.status == "landed"


def _free_bags(state: AirlineState, reservation: Reservation) -> int:
    membership = state.users[reservation.user_id].membership
    return FREE_BAGS[membership][reservation.cabin] * len(reservation.passengers)


def _eligible_to_cancel(state: AirlineState, reservation: Reservation) -> bool:
    if reservation.status != "active" or any(_flown(state, s) for s in reservation.flights):
        return False
    recent = _now(state) - datetime.fromisoformat(reservation.created_at) <= timedelta(hours=24)
    airline_cancelled = any(
        state.flights[s.flight_number].dates[s.date].status == "cancelled" for s in reservation.flights
    )
    return recent or reservation.cabin == "business" or reservation.insurance == "yes" or airline_cancelled


def _view(state: AirlineState, rid: str) -> dict:
    reservation = state.reservations[rid]
    flights = []
    for segment in reservation.flights:
        fl = state.flights[segment.flight_number]
        flights.append(
            {
                "flight_number": segment.flight_number,
                "date": segment.date,
                "origin": fl.origin,
                "destination": fl.destination,
                "price": segment.price,
            }
        )
    return {
        "reservation_id": rid,
        "user_id": reservation.user_id,
        "origin": reservation.origin,
        "destination": reservation.destination,
        "flight_type": reservation.flight_type,
        "cabin": reservation.cabin,
        "flights": flights,
        "passengers": [p.model_dump() for p in reservation.passengers],
        "payment_history": [p.model_dump() for p in reservation.payment_history],
        "created_at": reservation.created_at,
        "total_baggages": reservation.total_baggages,
        "nonfree_baggages": reservation.nonfree_baggages,
        "free_baggage_allowance": _free_bags(state, reservation),
        "insurance": reservation.insurance,
        "status": reservation.status,
        "changeable": reservation.status == "active"
        and reservation.cabin != "basic_economy"
        and not any(_flown(state, s) for s in reservation.flights),
        "cancellation_eligible": _eligible_to_cancel(state, reservation),
    }


def _passengers(passengers: Any) -> list[Passenger]:
    if not isinstance(passengers, list) or not passengers:
        raise ToolError("passengers must be a non-empty list of {first_name, last_name, dob}")
    out = []
    for passenger in passengers:
        try:
            info = PassengerInfo.model_validate(passenger)
        except ValidationError:
            raise ToolError(f"invalid passenger {passenger!r}: give first_name, last_name and dob") from None
        if not info.first_name.strip() or not info.last_name.strip():
            raise ToolError(f"invalid passenger {passenger!r}: empty name")
        _date(info.dob, "dob")
        out.append(Passenger(**info.model_dump()))
    if len(out) > 9:
        raise ToolError("at most 9 passengers per reservation")
    return out


def _segments(
    state: AirlineState, flights: Any, cabin: str, n_passengers: int, keep: list[Segment] | None = None
) -> list[Segment]:
    """Validate the chosen flights and price each new one at today's fare.

    Segments in ``keep`` (already held in this cabin) are reused as they are, with the price paid.
    """
    if not isinstance(flights, list) or not flights:
        raise ToolError("flights must be a non-empty list of {flight_number, date}")
    kept = {(s.flight_number, s.date): s for s in keep or []}
    out: list[Segment] = []
    prev_dest = None
    for flight in flights:
        try:
            choice = FlightChoice.model_validate(flight)
        except ValidationError:
            raise ToolError(f"invalid flight {flight!r}: give flight_number and date") from None
        _date(choice.date)
        fl = find(state.flights, choice.flight_number, "flight")
        fd = fl.dates.get(choice.date)
        if fd is None:
            raise ToolError(f"flight {choice.flight_number} does not operate on {choice.date}")
        if prev_dest is not None and fl.origin != prev_dest:
            raise ToolError(
                f"flight {choice.flight_number} departs from {fl.origin}, not {prev_dest}: the flights must connect"
            )
        prev_dest = fl.destination
        old = kept.get((choice.flight_number, choice.date))
        if old is not None:
            out.append(old)
            continue
        if fd.status != "available" or choice.date < _today(state):
            raise ToolError(f"flight {choice.flight_number} on {choice.date} cannot be booked ({fd.status})")
        if fd.seats[cabin] < n_passengers:  # type: ignore[index]
            raise ToolError(
                f"flight {choice.flight_number} on {choice.date} has only {fd.seats[cabin]} {cabin} seats left"
            )  # type: ignore[index]
        out.append(Segment(flight_number=choice.flight_number, date=choice.date, price=fd.prices[cabin]))  # type: ignore[index]
    if len({(s.flight_number, s.date) for s in out}) != len(out):
        raise ToolError("the same flight is listed twice")
    return out


def _route(state: AirlineState, segs: list[Segment], flight_type: str) -> tuple[str, str]:
    """Origin and destination of a trip (a round trip turns around after its first half)."""
    origin = state.flights[segs[0].flight_number].origin
    end = state.flights[segs[-1].flight_number].destination
    if flight_type == "one_way":
        if end == origin:
            raise ToolError("a one-way trip cannot end where it starts")
        return origin, end
    if end != origin or len(segs) < 2:
        raise ToolError("a round trip must return to its origin")
    return origin, state.flights[segs[(len(segs) + 1) // 2 - 1].flight_number].destination


def _pay(state: AirlineState, user: User, payment_id: str, amount: float) -> None:
    """Charge (amount > 0) or refund (amount < 0) a payment method of the user."""
    pm = user.payment_methods.get(payment_id)
    if pm is None:
        raise ToolError(f"payment method {payment_id!r} not found for this user")
    if amount > 0 and pm.source in ("gift_card", "certificate"):
        if (pm.amount or 0.0) < amount:
            raise ToolError(f"{payment_id} has a balance of {pm.amount or 0.0:.2f}, not enough for {amount:.2f}")
    if amount < 0 and pm.source == "certificate":
        raise ToolError("a refund cannot be paid to a certificate")
    if pm.source in ("gift_card", "certificate"):
        pm.amount = round((pm.amount or 0.0) - amount, 2)


def _check_payment(user: User, payment_id: Any) -> str:
    if not isinstance(payment_id, str) or payment_id not in user.payment_methods:
        raise ToolError(f"payment method {payment_id!r} not found for this user")
    return payment_id


def _take_seats(state: AirlineState, segs: list[Segment], cabin: str, n: int, sign: int = -1) -> None:
    for segment in segs:
        seats = state.flights[segment.flight_number].dates[segment.date].seats
        seats[cabin] = seats[cabin] + sign * n  # type: ignore[index]


def _new_reservation_id(state: AirlineState) -> str:
    """Deterministic ids for new bookings: BK0001, BK0002, ... (skipping ids already taken)."""
    while True:
        state.bookings_made += 1
        rid = f"BK{state.bookings_made:04d}"
        if rid not in state.reservations:
            return rid


# ---------------------------------------------------- semantic postconditions
def _post_passengers(args, result, state) -> str | None:
    reservation = state.reservations.get(args["reservation_id"])
    want = [PassengerInfo.model_validate(p).model_dump() for p in args["passengers"]]
    if reservation is None or [p.model_dump() for p in reservation.passengers] != want:
        return "the reservation's passengers are not the requested ones"
    return None


def _post_flights(args, result, state) -> str | None:
    reservation = state.reservations.get(args["reservation_id"])
    want = [(f["flight_number"], f["date"]) for f in args["flights"]]
    if (
        reservation is None
        or [(s.flight_number, s.date) for s in reservation.flights] != want
        or reservation.cabin != args["cabin"]
    ):
        return "the reservation does not hold the requested flights and cabin"
    return None


def _post_bags(args, result, state) -> str | None:
    reservation = state.reservations.get(args["reservation_id"])
    if reservation is None or reservation.total_baggages != args["total_baggages"]:
        return "the reservation does not hold the requested number of bags"
    return None


def _post_cabin(args, result, state) -> str | None:
    reservation = state.reservations.get(args["reservation_id"])
    if reservation is None or reservation.cabin != args["cabin"]:
        return "the reservation is not in the requested cabin"
    return None


_post_cancelled = status_is(
    "reservations", "reservation_id", "cancelled", "reservation", name="_post_cancelled", quote=True
)


def _post_booked(args, result, state) -> str | None:
    reservation = state.reservations.get(result.get("reservation_id", ""))
    if (
        reservation is None
        or reservation.user_id != args["user_id"]
        or len(reservation.passengers) != len(args["passengers"])
    ):
        return "the booking was not recorded for the user"
    return None


def _post_certificate(args, result, state) -> str | None:
    user = state.users.get(args["user_id"])
    pm = user.payment_methods.get(result.get("certificate_id", "")) if user else None
    if pm is None or pm.source != "certificate" or pm.amount != float(args["amount"]):
        return "the certificate was not added to the user's payment methods"
    return None


# ------------------------------------------------------------------- reads
@tool(
    writes={
        "airline_user_loaded": "const:true",
        "membership": "result.membership",
        "payment_method_ids": "result.payment_method_ids",
        "reservation_ids": "result.reservations",
    }
)
def get_user_details(state: AirlineState, user_id: str) -> dict:
    """Get an airline user's profile: name, membership, payment methods and reservations.

    Args:
        user_id: The user id, such as 'sara_doe_496'.
    """
    user = _user(state, user_id)
    return {
        "user_id": user_id,
        "name": user.name.model_dump(),
        "email": user.email,
        "dob": user.dob,
        "membership": user.membership,
        "payment_methods": [
            {"payment_id": k, **v.model_dump(exclude_none=True)} for k, v in user.payment_methods.items()
        ],
        "payment_method_ids": list(user.payment_methods),
        "saved_passengers": [p.model_dump() for p in user.saved_passengers],
        "reservations": list(user.reservations),
    }


@tool(writes=RESERVATION_WRITES)
def get_reservation_details(state: AirlineState, reservation_id: str) -> dict:
    """Get the details of a reservation: passengers, flights, cabin, baggage, payments, eligibility.

    Args:
        reservation_id: The reservation id, such as '8JX2WO'.
    """
    _reservation(state, reservation_id, active=False)
    return _view(state, reservation_id)


@tool(writes={"flight_options": "result.flights", "found_flight_numbers": "result.flight_numbers"})
def search_direct_flight(state: AirlineState, origin: str, destination: str, date: str) -> dict:
    """Search direct flights between two airports on a date that can still be booked.

    Args:
        origin: Origin airport code, such as 'JFK'.
        destination: Destination airport code, such as 'LAX'.
        date: Departure date, YYYY-MM-DD.
    """
    _airport(state, origin, "origin")
    _airport(state, destination, "destination")
    if origin == destination:
        raise ToolError("origin and destination are the same airport")
    _date(date)
    found = []
    for num, fl in sorted(state.flights.items()):
        fd = fl.dates.get(date)
        if fl.origin == origin and fl.destination == destination and fd is not None and fd.status == "available":
            found.append(
                {
                    "flight_number": num,
                    "date": date,
                    "origin": origin,
                    "destination": destination,
                    "departure_time": fl.departure_time,
                    "arrival_time": fl.arrival_time,
                    "prices": dict(fd.prices),
                    "seats": dict(fd.seats),
                }
            )
    return {"flights": found, "flight_numbers": [f["flight_number"] for f in found]}


@tool(
    writes={
        "flight_status": "result.status",
        "flight_disrupted": "result.disrupted",
        "compensation_amount": "result.compensation_per_passenger",
    }
)
def get_flight_status(state: AirlineState, flight_number: str, date: str) -> dict:
    """Get the status of a flight on a date (available, on_time, delayed, cancelled or landed).

    Args:
        flight_number: The flight number, such as 'HAT001'.
        date: The date of the flight, YYYY-MM-DD.
    """
    _date(date)
    fl = find(state.flights, flight_number, "flight")
    fd = fl.dates.get(date)
    if fd is None:
        raise ToolError(f"flight {flight_number} does not operate on {date}")
    return {
        "flight_number": flight_number,
        "date": date,
        "status": fd.status,
        "disrupted": fd.status in COMPENSATION,
        "compensation_per_passenger": COMPENSATION.get(fd.status, 0),
    }


@tool()
def list_all_airports_airline(state: AirlineState) -> dict:
    """List every airport the airline serves, with its city."""
    return {"airports": [{"code": k, "city": a.city} for k, a in sorted(state.airports.items())]}


# ----------------------------------------------------------------- changes
@tool(
    side_effect=True,
    prerequisites=[USER_LOADED],
    writes={"reservation_id": "result.reservation_id", **RESERVATION_WRITES},
    post=[_post_booked],
)
def book_reservation(
    state: AirlineState,
    user_id: str,
    flight_type: Literal["one_way", "round_trip"],
    cabin: CabinName,
    flights: list[FlightChoice],
    passengers: list[PassengerInfo],
    payment_id: str,
    total_baggages: int = 0,
    insurance: Literal["yes", "no"] = "no",
) -> dict:
    """Book a new reservation for a user and pay for it with one of the user's payment methods.

    Args:
        user_id: The user who books.
        flight_type: 'one_way' or 'round_trip'.
        cabin: 'basic_economy', 'economy' or 'business'.
        flights: The flight segments, each {flight_number, date}, in travel order.
        passengers: The passengers, each {first_name, last_name, dob}.
        payment_id: The payment method to charge, such as 'credit_card_7815'.
        total_baggages: Checked bags in total; bags beyond the free allowance cost 50 each.
        insurance: 'yes' to add travel insurance (30 per passenger).
    """
    user = _user(state, user_id)
    if flight_type not in ("one_way", "round_trip"):
        raise ToolError(f"invalid flight_type {flight_type!r}")
    _cabin(cabin)
    pax = _passengers(passengers)
    segs = _segments(state, flights, cabin, len(pax))
    origin, destination = _route(state, segs, flight_type)
    if not isinstance(total_baggages, int) or total_baggages < 0:
        raise ToolError("total_baggages must be a non-negative integer")
    if insurance not in ("yes", "no"):
        raise ToolError(f"invalid insurance {insurance!r}: use 'yes' or 'no'")
    _check_payment(user, payment_id)
    reservation = Reservation(
        user_id=user_id,
        origin=origin,
        destination=destination,
        flight_type=flight_type,
        cabin=cabin,
        flights=segs,
        passengers=pax,
        created_at=state.current_time,
        total_baggages=total_baggages,
        insurance=insurance,
    )
    reservation.nonfree_baggages = max(0, total_baggages - FREE_BAGS[user.membership][cabin] * len(pax))
    total = sum(s.price for s in segs) * len(pax) + BAG_FEE * reservation.nonfree_baggages
    total += INSURANCE_FEE * len(pax) if insurance == "yes" else 0
    _pay(state, user, payment_id, total)
    reservation.payment_history.append(Payment(payment_id=payment_id, amount=total))
    _take_seats(state, segs, cabin, len(pax))
    rid = _new_reservation_id(state)
    state.reservations[rid] = reservation
    user.reservations.append(rid)
    return {**_view(state, rid), "charged": total}


@tool(
    side_effect=True,
    prerequisites=[RESERVATION_LOADED, CHANGEABLE],
    writes={"current_flights": "result.flights", "current_cabin": "result.cabin"},
    post=[_post_flights],
)
def update_reservation_flights(
    state: AirlineState, reservation_id: str, cabin: CabinName, flights: list[FlightChoice], payment_id: str
) -> dict:
    """Change the flights (and cabin) of a reservation; the fare difference is charged or refunded.

    Args:
        reservation_id: The reservation to change.
        cabin: The cabin for all flights: 'basic_economy', 'economy' or 'business'.
        flights: All flight segments of the updated reservation, each {flight_number, date}, including unchanged ones.
        payment_id: The payment method for the fare difference.
    """
    reservation = _reservation(state, reservation_id)
    user = state.users[reservation.user_id]
    _cabin(cabin)
    if reservation.cabin == "basic_economy":
        raise ToolError("the flights of a basic economy reservation cannot be changed")
    if any(_flown(state, s) for s in reservation.flights):
        raise ToolError("a reservation with a flown segment cannot be changed")
    # unchanged segments in an unchanged cabin keep the price paid (and their seats)
    segs = _segments(
        state,
        flights,
        cabin,
        len(reservation.passengers),
        keep=reservation.flights if cabin == reservation.cabin else None,
    )
    origin, destination = _route(state, segs, reservation.flight_type)
    if (origin, destination) != (reservation.origin, reservation.destination):
        raise ToolError(
            f"the new flights go {origin}-{destination}; the reservation is {reservation.origin}-{reservation.destination}"
        )
    _check_payment(user, payment_id)
    diff = (sum(s.price for s in segs) - sum(s.price for s in reservation.flights)) * len(reservation.passengers)
    if diff:
        _pay(state, user, payment_id, diff)
        reservation.payment_history.append(Payment(payment_id=payment_id, amount=diff))
    _take_seats(state, reservation.flights, reservation.cabin, len(reservation.passengers), sign=+1)
    _take_seats(state, segs, cabin, len(reservation.passengers))
    reservation.flights, reservation.cabin = segs, cabin  # type: ignore[assignment]
    return {**_view(state, reservation_id), "charged": diff}


@tool(
    side_effect=True,
    prerequisites=[RESERVATION_LOADED],
    writes={
        "current_cabin": "result.cabin",
        "reservation_changeable": "result.changeable",
        "reservation_changeable[{params.reservation_id}]": "result.changeable",
    },
    post=[_post_cabin],
)
def upgrade_reservation_cabin(state: AirlineState, reservation_id: str, cabin: CabinName, payment_id: str) -> dict:
    """Move every flight of a reservation to another cabin; the fare difference is charged or refunded.

    Args:
        reservation_id: The reservation to change.
        cabin: The new cabin: 'basic_economy', 'economy' or 'business'.
        payment_id: The payment method for the fare difference.
    """
    reservation = _reservation(state, reservation_id)
    user = state.users[reservation.user_id]
    _cabin(cabin)
    if cabin == reservation.cabin:
        raise ToolError(f"reservation {reservation_id} is already in {cabin}")
    if any(_flown(state, s) for s in reservation.flights):
        raise ToolError("a reservation with a flown segment cannot be changed")
    _check_payment(user, payment_id)
    segs = []
    for segment in reservation.flights:
        fd = state.flights[segment.flight_number].dates[segment.date]
        if fd.seats[cabin] < len(reservation.passengers):  # type: ignore[index]
            raise ToolError(f"flight {segment.flight_number} on {segment.date} has no {cabin} seats left")
        segs.append(Segment(flight_number=segment.flight_number, date=segment.date, price=fd.prices[cabin]))  # type: ignore[index]
    diff = (sum(s.price for s in segs) - sum(s.price for s in reservation.flights)) * len(reservation.passengers)
    if diff:
        _pay(state, user, payment_id, diff)
        reservation.payment_history.append(Payment(payment_id=payment_id, amount=diff))
    _take_seats(state, reservation.flights, reservation.cabin, len(reservation.passengers), sign=+1)
    _take_seats(state, segs, cabin, len(reservation.passengers))
    reservation.flights, reservation.cabin = segs, cabin  # type: ignore[assignment]
    return {**_view(state, reservation_id), "charged": diff}


@tool(
    side_effect=True,
    prerequisites=[RESERVATION_LOADED, DOB_KNOWN],
    writes={"current_passengers": "result.passengers"},
    post=[_post_passengers],
)
def update_reservation_passengers(state: AirlineState, reservation_id: str, passengers: list[PassengerInfo]) -> dict:
    """Replace the passenger details of a reservation (same number of passengers).

    Args:
        reservation_id: The reservation to change.
        passengers: Every passenger of the reservation, each {first_name, last_name, dob}, in the stored order.
    """
    reservation = _reservation(state, reservation_id)
    pax = _passengers(passengers)
    if len(pax) != len(reservation.passengers):
        raise ToolError(
            f"reservation {reservation_id} has {len(reservation.passengers)} passengers; the number cannot change"
        )
    reservation.passengers = pax
    return _view(state, reservation_id)


@tool(
    side_effect=True,
    prerequisites=[RESERVATION_LOADED],
    writes={"current_total_baggages": "result.total_baggages"},
    post=[_post_bags],
)
def update_reservation_baggages(
    state: AirlineState, reservation_id: str, total_baggages: int, payment_id: str, nonfree_baggages: int | None = None
) -> dict:
    """Set the number of checked bags of a reservation (bags can only be added); extra bags cost 50 each.

    Args:
        reservation_id: The reservation to change.
        total_baggages: The new total number of checked bags.
        payment_id: The payment method for the bag fees.
        nonfree_baggages: Bags that are paid for; omit to compute it from the free allowance.
    """
    reservation = _reservation(state, reservation_id)
    user = state.users[reservation.user_id]
    if not isinstance(total_baggages, int) or total_baggages < 0:
        raise ToolError("total_baggages must be a non-negative integer")
    if total_baggages < reservation.total_baggages:
        raise ToolError(f"bags cannot be removed: the reservation already has {reservation.total_baggages}")
    nonfree = max(0, total_baggages - _free_bags(state, reservation)) if nonfree_baggages is None else nonfree_baggages
    if not isinstance(nonfree, int) or not 0 <= nonfree <= total_baggages:
        raise ToolError("nonfree_baggages must be between 0 and total_baggages")
    _check_payment(user, payment_id)
    fee = BAG_FEE * max(0, nonfree - reservation.nonfree_baggages)
    if fee:
        _pay(state, user, payment_id, fee)
        reservation.payment_history.append(Payment(payment_id=payment_id, amount=fee))
    reservation.total_baggages, reservation.nonfree_baggages = total_baggages, nonfree
    return {**_view(state, reservation_id), "charged": fee}


@tool(
    side_effect=True,
    prerequisites=[RESERVATION_LOADED, CANCELLABLE],
    writes={"reservation_status": "result.status"},
    post=[_post_cancelled],
)
def cancel_reservation(state: AirlineState, reservation_id: str) -> dict:
    """Cancel a whole reservation; every payment is refunded to the method it came from.

    Args:
        reservation_id: The reservation to cancel.
    """
    reservation = _reservation(state, reservation_id)
    if any(_flown(state, s) for s in reservation.flights):
        raise ToolError("a reservation with a flown segment cannot be cancelled")
    user = state.users[reservation.user_id]
    refunds = []
    for payment in list(reservation.payment_history):
        if payment.amount > 0:
            pm = user.payment_methods.get(payment.payment_id)
            if pm is not None and pm.source == "gift_card":
                pm.amount = round((pm.amount or 0.0) + payment.amount, 2)
            refunds.append(Payment(payment_id=payment.payment_id, amount=-payment.amount))
    reservation.payment_history.extend(refunds)
    _take_seats(state, reservation.flights, reservation.cabin, len(reservation.passengers), sign=+1)
    reservation.status = "cancelled"
    return {**_view(state, reservation_id), "refunded": -sum(p.amount for p in refunds)}


@tool(
    side_effect=True,
    prerequisites=[USER_LOADED, DISRUPTED],
    writes={"certificate_id": "result.certificate_id"},
    post=[_post_certificate],
)
def send_certificate(state: AirlineState, user_id: str, amount: float) -> dict:
    """Send a travel certificate to a user as compensation; it is added to their payment methods.

    Args:
        user_id: The user to compensate.
        amount: The certificate value in USD (at most 500).
    """
    user = _user(state, user_id)
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not 0 < amount <= 500:
        raise ToolError(f"invalid certificate amount {amount!r}: between 0 and 500")
    state.certificates_issued += 1
    cid = f"certificate_{state.certificates_issued:04d}"
    user.payment_methods[cid] = PaymentMethod(source="certificate", amount=float(amount))
    return {"certificate_id": cid, "user_id": user_id, "amount": float(amount)}
