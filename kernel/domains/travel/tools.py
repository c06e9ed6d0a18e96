"""Travel booking tools (BFCL TravelAPI style) over the in-memory travel state.

Authentication issues an access token (deterministic: derived from the
credentials) whose scope decides whether it may change the account.
ToolGate prerequisites mirror what the service itself enforces: airport
look-ups need a logged-in user (``authenticated``), account reads need an
``access_token``, account changes a token with a write scope
(``token_scope``); a booking also needs a fare quote within the budget
(``fare_within_budget``, written by ``get_flight_cost``) and insurance a
verified traveler (``traveler_verified``). Every tool validates its input
before it changes anything and reports failures as ``ToolError``.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Literal

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, status_is
from .state import Booking, CreditCard, Insurance, SupportCase, TravelState

DOMAIN = Domain(
    "travel",
    TravelState,
    "A travel booking service: authenticate, resolve cities to airports, quote and book flights, manage cards, "
    "budget, insurance, invoices and support, convert currencies.",
)
tool = DOMAIN.tool

TravelClass = Literal["economy", "business", "first"]
GrantType = Literal["read_write", "read", "write"]
InsuranceType = Literal["basic", "comprehensive", "cancellation"]
CLASS_MULTIPLIER = {"economy": 1, "business": 3, "first": 5}
WRITE_SCOPES = ["read_write", "write"]

# ----------------------------------------------------------- prerequisites
AUTHENTICATED = Prerequisite(
    key="authenticated", sat=Sat(op="truthy"), description="the user is logged in to the travel service"
)
HAS_TOKEN = Prerequisite(
    key="access_token", sat=Sat(op="not_null"), description="an access token from authenticate_travel"
)
WRITE_SCOPE = Prerequisite(
    key="token_scope",
    sat=Sat(op="in", value=WRITE_SCOPES),
    description="the access token has a write scope (read_write or write)",
)
FARE_OK = Prerequisite(
    key="fare_within_budget",
    sat=Sat(op="truthy"),
    description="a fare quote (get_flight_cost) that is within the budget limit",
)
TRAVELER_OK = Prerequisite(
    key="traveler_verified",
    sat=Sat(op="truthy"),
    description="the traveler's identity was verified (verify_traveler_information)",
)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# ----------------------------------------------------------------- helpers
def _date(value: str, what: str = "travel_date") -> str:
    if not isinstance(value, str) or not _DATE.match(value):
        raise ToolError(f"invalid {what} {value!r}: use YYYY-MM-DD")
    year, month, day = (int(x) for x in value.split("-"))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise ToolError(f"invalid {what} {value!r}: no such date")
    return value


def _future(state: TravelState, value: str) -> str:
    _date(value)
    if value < state.current_date:
        raise ToolError(f"travel_date {value} is in the past (today is {state.current_date})")
    return value


def _airport(state: TravelState, code: str, what: str) -> str:
    if code not in state.airports:
        raise ToolError(f"{what}: unknown airport code {code!r}; use get_nearest_airport_by_city or list_all_airports")
    return code


def distance_km(state: TravelState, origin: str, destination: str) -> int:
    """Great-circle distance between two airports, rounded to whole kilometres."""
    origin_airport, destination_airport = state.airports[origin], state.airports[destination]
    la1, lo1, la2, lo2 = map(
        math.radians, (origin_airport.lat, origin_airport.lon, destination_airport.lat, destination_airport.lon)
    )
    haversine = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return round(2 * 6371 * math.asin(math.sqrt(haversine)))


def fare(state: TravelState, travel_from: str, travel_to: str, travel_class: str) -> float:
    """Deterministic fare in USD: 50 + 0.1 per km for economy, x3 business, x5 first."""
    economy = 50 + round(distance_km(state, travel_from, travel_to) * 0.1)
    return float(economy * CLASS_MULTIPLIER[travel_class])


def _route(state: TravelState, travel_from: str, travel_to: str, travel_class: str, travel_date: str) -> float:
    _airport(state, travel_from, "travel_from")
    _airport(state, travel_to, "travel_to")
    if travel_from == travel_to:
        raise ToolError("travel_from and travel_to are the same airport")
    if travel_class not in CLASS_MULTIPLIER:
        raise ToolError(f"invalid travel_class {travel_class!r}: use economy, business or first")
    _future(state, travel_date)
    return fare(state, travel_from, travel_to, travel_class)


def issue_token(client_id: str, refresh_token: str, grant_type: str) -> str:
    """The token the service issues for these credentials (deterministic)."""
    digest = hashlib.sha256(f"{client_id}|{refresh_token}|{grant_type}".encode()).hexdigest()
    return "trv_" + digest[:10]


def _token(state: TravelState, access_token: str, write: bool = False) -> None:
    if state.access_token is None:
        raise ToolError("not authenticated: call authenticate_travel first")
    if access_token != state.access_token:
        raise ToolError("invalid access token")
    if write and state.token_scope not in WRITE_SCOPES:
        raise ToolError(f"the access token's scope {state.token_scope!r} does not allow changes")


def _card(state: TravelState, card_id: str) -> CreditCard:
    card = state.credit_cards.get(card_id)
    if card is None:
        raise ToolError(f"no credit card with id {card_id!r}")
    return card


def _booking(state: TravelState, booking_id: str) -> Booking:
    booking = state.bookings.get(booking_id)
    if booking is None:
        raise ToolError(f"no booking with id {booking_id!r}")
    return booking


def _money(amount: float) -> float:
    return round(float(amount), 2)


# ---------------------------------------------------- semantic postconditions
def _post_airport_known(args, result, state) -> str | None:
    code = result.get("nearest_airport")
    if code not in state.airports:
        return f"nearest airport {code!r} is not a known airport"
    return None


def _post_positive_cost(args, result, state) -> str | None:
    cost = result.get("travel_cost")
    if not isinstance(cost, (int, float)) or cost <= 0:
        return f"travel cost {cost!r} is not a positive amount"
    return None


def _post_booking_recorded(args, result, state) -> str | None:
    booking = state.bookings.get(result.get("booking_id", ""))
    if (
        booking is None
        or booking.status != "confirmed"
        or booking.travel_from != args["travel_from"]
        or booking.travel_to != args["travel_to"]
    ):
        return "the booking was not recorded as confirmed for the requested route"
    return None


_post_cancelled = status_is("bookings", "booking_id", "cancelled", "booking", name="_post_cancelled", quote=True)


def _post_card_registered(args, result, state) -> str | None:
    card = state.credit_cards.get(result.get("card_id", ""))
    if card is None or card.card_number != args["card_number"]:
        return "the card was not registered"
    return None


def _post_budget_set(args, result, state) -> str | None:
    if state.budget_limit != _money(args["budget_limit"]):
        return f"budget limit is {state.budget_limit!r}, not {args['budget_limit']!r}"
    return None


def _post_nonnegative_value(args, result, state) -> str | None:
    value = result.get("exchanged_value")
    if not isinstance(value, (int, float)) or value < 0:
        return f"exchanged value {value!r} is not a non-negative amount"
    return None


# ------------------------------------------------------------------ session
@tool(
    side_effect=True,
    writes={"access_token": "result.access_token", "token_scope": "result.scope", "authenticated": "const:true"},
    secret=("client_secret", "refresh_token"),
)
def authenticate_travel(
    state: TravelState,
    client_id: str,
    client_secret: str,
    refresh_token: str,
    grant_type: GrantType,
    user_first_name: str,
    user_last_name: str,
) -> dict:
    """Authenticate the user with the travel service and obtain an access token.

    Args:
        client_id: The client application id.
        client_secret: The client application secret.
        refresh_token: The user's refresh token.
        grant_type: Scope of the token: 'read_write', 'read' or 'write'.
        user_first_name: First name of the user.
        user_last_name: Last name of the user.
    """
    for name, value in (("client_id", client_id), ("client_secret", client_secret), ("refresh_token", refresh_token)):
        if not isinstance(value, str) or not value.strip():
            raise ToolError(f"authentication failed: {name} is empty")
    if grant_type not in ("read_write", "read", "write"):
        raise ToolError(f"invalid grant_type {grant_type!r}")
    token = issue_token(client_id, refresh_token, grant_type)
    state.access_token = token
    state.token_scope = grant_type
    state.user_first_name, state.user_last_name = user_first_name, user_last_name
    return {"access_token": token, "token_type": "Bearer", "scope": grant_type, "expires_in": 3600}


@tool(writes={"authenticated": "result.login_status"})
def travel_get_login_status(state: TravelState) -> dict:
    """Tell whether the user is currently logged in to the travel service."""
    return {"login_status": state.access_token is not None}


# ----------------------------------------------------------------- airports
@tool(
    prerequisites=[AUTHENTICATED],
    writes={"airport:{params.city}": "result.nearest_airport"},
    post=[_post_airport_known],
)
def get_nearest_airport_by_city(state: TravelState, city: str) -> dict:
    """Find the airport code of the airport nearest to a city.

    Args:
        city: Name of the city, e.g. 'Miami'.
    """
    key = next((c for c in state.city_airports if c.lower() == city.strip().lower()), None)
    if key is None:
        raise ToolError(f"no airport known near {city!r}")
    code = state.city_airports[key]
    airport = state.airports.get(code)  # a table that names an unknown code is caught by the postcondition
    return {"nearest_airport": code, "airport_name": airport.name if airport else None}


@tool()
def list_all_airports(state: TravelState) -> dict:
    """List the codes of all airports the service flies to."""
    return {"airports": sorted(state.airports)}


# ------------------------------------------------------------------ flights
@tool(
    writes={"travel_cost": "result.travel_cost", "fare_within_budget": "result.within_budget"},
    post=[_post_positive_cost],
)
def get_flight_cost(
    state: TravelState, travel_from: str, travel_to: str, travel_date: str, travel_class: TravelClass
) -> dict:
    """Get the cost of a flight between two airports on a date, and whether it is within the budget limit.

    Args:
        travel_from: Airport code of the departure airport, e.g. 'LAX'.
        travel_to: Airport code of the arrival airport, e.g. 'JFK'.
        travel_date: Date of travel, YYYY-MM-DD.
        travel_class: Travel class: 'economy', 'business' or 'first'.
    """
    cost = _route(state, travel_from, travel_to, travel_class, travel_date)
    within = state.budget_limit is None or cost <= state.budget_limit
    return {"travel_cost": cost, "currency": "USD", "within_budget": within}


@tool(
    side_effect=True,
    prerequisites=[HAS_TOKEN, WRITE_SCOPE, FARE_OK],
    writes={"booking_id": "result.booking_id", "travel_cost": "result.travel_cost"},
    post=[_post_booking_recorded],
)
def book_flight(
    state: TravelState,
    access_token: str,
    card_id: str,
    travel_date: str,
    travel_from: str,
    travel_to: str,
    travel_class: TravelClass,
) -> dict:
    """Book a flight and charge it to a registered credit card.

    Args:
        access_token: Access token from authenticate_travel.
        card_id: Id of the registered credit card to charge.
        travel_date: Date of travel, YYYY-MM-DD.
        travel_from: Airport code of the departure airport.
        travel_to: Airport code of the arrival airport.
        travel_class: Travel class: 'economy', 'business' or 'first'.
    """
    _token(state, access_token, write=True)
    card = _card(state, card_id)
    cost = _route(state, travel_from, travel_to, travel_class, travel_date)
    if state.budget_limit is not None and cost > state.budget_limit:
        raise ToolError(f"the fare {cost:.2f} USD exceeds the budget limit {state.budget_limit:.2f} USD")
    if card.balance < cost:
        raise ToolError(f"insufficient balance on card {card_id}: {card.balance:.2f} USD < {cost:.2f} USD")
    booking_id = f"BK{state.next_booking_number}"
    card.balance = _money(card.balance - cost)
    state.bookings[booking_id] = Booking(
        card_id=card_id,
        travel_date=travel_date,
        travel_from=travel_from,
        travel_to=travel_to,
        travel_class=travel_class,
        travel_cost=cost,
    )
    state.next_booking_number += 1
    return {"booking_id": booking_id, "booking_status": True, "travel_cost": cost}


@tool(
    side_effect=True,
    prerequisites=[HAS_TOKEN, WRITE_SCOPE],
    writes={"cancelled:{params.booking_id}": "const:true"},
    post=[_post_cancelled],
)
def cancel_booking(state: TravelState, access_token: str, booking_id: str) -> dict:
    """Cancel a booking; the fare and any insurance are refunded to the card that paid.

    Args:
        access_token: Access token from authenticate_travel.
        booking_id: Id of the booking to cancel.
    """
    _token(state, access_token, write=True)
    booking = _booking(state, booking_id)
    if booking.status == "cancelled":
        raise ToolError(f"booking {booking_id} is already cancelled")
    refund = booking.travel_cost
    booking.status = "cancelled"
    card = state.credit_cards.get(booking.card_id)
    if card is not None:
        card.balance = _money(card.balance + refund)
    if booking.insurance is not None:
        icard = state.credit_cards.get(booking.insurance.card_id)
        if icard is not None:
            icard.balance = _money(icard.balance + booking.insurance.insurance_cost)
            refund += booking.insurance.insurance_cost
    return {"cancel_status": True, "refunded": _money(refund)}


@tool(
    prerequisites=[HAS_TOKEN],
    writes={
        "invoice_total": "result.invoice.total",
        "travel_from": "result.invoice.travel_from",
        "travel_to": "result.invoice.travel_to",
        "travel_date": "result.invoice.travel_date",
        "travel_class": "result.invoice.travel_class",
        "card_id": "result.invoice.card_id",
    },
)
def retrieve_invoice(state: TravelState, access_token: str, booking_id: str) -> dict:
    """Retrieve the invoice of a booking.

    Args:
        access_token: Access token from authenticate_travel.
        booking_id: Id of the booking.
    """
    _token(state, access_token)
    booking = _booking(state, booking_id)
    ins = booking.insurance.insurance_cost if booking.insurance else 0.0
    return {
        "invoice": {
            "booking_id": booking_id,
            "card_id": booking.card_id,
            "travel_date": booking.travel_date,
            "travel_from": booking.travel_from,
            "travel_to": booking.travel_to,
            "travel_class": booking.travel_class,
            "travel_cost": booking.travel_cost,
            "insurance_cost": ins,
            "total": _money(booking.travel_cost + ins),
            "status": booking.status,
        }
    }


# ---------------------------------------------------------- cards & budget
@tool(
    side_effect=True,
    prerequisites=[HAS_TOKEN, WRITE_SCOPE],
    writes={"card_id": "result.card_id"},
    post=[_post_card_registered],
)
def register_credit_card(
    state: TravelState,
    access_token: str,
    card_number: str,
    expiration_date: str,
    cardholder_name: str,
    card_verification_number: int,
) -> dict:
    """Register a credit card with the travel account; returns its card id.

    Args:
        access_token: Access token from authenticate_travel.
        card_number: The 16-digit card number.
        expiration_date: Expiration date, MM/YYYY.
        cardholder_name: Name on the card.
        card_verification_number: The 3-digit security code.
    """
    _token(state, access_token, write=True)
    digits = card_number.replace(" ", "")
    if not (digits.isdigit() and len(digits) == 16):
        raise ToolError("invalid card number: need 16 digits")
    expiry = re.fullmatch(r"(\d{2})/(\d{4})", expiration_date)
    if not expiry or not 1 <= int(expiry.group(1)) <= 12:
        raise ToolError(f"invalid expiration date {expiration_date!r}: use MM/YYYY")
    if f"{expiry.group(2)}-{expiry.group(1)}" < state.current_date[:7]:
        raise ToolError(f"the card expired in {expiration_date}")
    if not 100 <= int(card_verification_number) <= 999:
        raise ToolError("invalid card verification number: need 3 digits")
    card_id = f"card_{digits[-4:]}"
    if card_id in state.credit_cards:
        raise ToolError(f"a card ending in {digits[-4:]} is already registered")
    state.credit_cards[card_id] = CreditCard(
        card_number=card_number,
        cardholder_name=cardholder_name,
        expiration_date=expiration_date,
        card_verification_number=int(card_verification_number),
        balance=5000.0,
    )
    return {"card_id": card_id}


@tool(prerequisites=[HAS_TOKEN], writes={"card_balance": "result.card_balance"})
def get_credit_card_balance(state: TravelState, access_token: str, card_id: str) -> dict:
    """Get the available balance of a registered credit card.

    Args:
        access_token: Access token from authenticate_travel.
        card_id: Id of the registered credit card.
    """
    _token(state, access_token)
    return {"card_balance": _card(state, card_id).balance}


@tool(prerequisites=[HAS_TOKEN], writes={"card_ids": "result.card_ids"})
def get_all_credit_cards(state: TravelState, access_token: str) -> dict:
    """List the credit cards registered with the account.

    Args:
        access_token: Access token from authenticate_travel.
    """
    _token(state, access_token)
    return {
        "card_ids": sorted(state.credit_cards),
        "credit_cards": {
            cid: {
                "last_digits": c.card_number.replace(" ", "")[-4:],
                "cardholder_name": c.cardholder_name,
                "expiration_date": c.expiration_date,
            }
            for cid, c in sorted(state.credit_cards.items())
        },
    }


@tool(side_effect=True, prerequisites=[HAS_TOKEN, WRITE_SCOPE], post=[_post_budget_set])
def set_budget_limit(state: TravelState, access_token: str, budget_limit: float) -> dict:
    """Set the maximum fare (USD) the account may book.

    Args:
        access_token: Access token from authenticate_travel.
        budget_limit: The budget limit in USD.
    """
    _token(state, access_token, write=True)
    if budget_limit <= 0:
        raise ToolError("the budget limit must be positive")
    state.budget_limit = _money(budget_limit)
    return {"budget_limit": state.budget_limit}


# ------------------------------------------------- insurance & support
@tool(
    side_effect=True,
    prerequisites=[HAS_TOKEN, WRITE_SCOPE, TRAVELER_OK],
    writes={"insurance_id": "result.insurance_id"},
)
def purchase_insurance(
    state: TravelState,
    access_token: str,
    insurance_type: InsuranceType,
    booking_id: str,
    insurance_cost: float,
    card_id: str,
) -> dict:
    """Buy travel insurance for a booking, charged to a registered credit card.

    Args:
        access_token: Access token from authenticate_travel.
        insurance_type: 'basic', 'comprehensive' or 'cancellation'.
        booking_id: Id of the booking to insure.
        insurance_cost: Price of the insurance in USD.
        card_id: Id of the credit card to charge.
    """
    _token(state, access_token, write=True)
    booking = _booking(state, booking_id)
    if booking.status != "confirmed":
        raise ToolError(f"booking {booking_id} is cancelled")
    if booking.insurance is not None:
        raise ToolError(f"booking {booking_id} is already insured")
    if insurance_cost <= 0:
        raise ToolError("insurance_cost must be positive")
    card = _card(state, card_id)
    if card.balance < insurance_cost:
        raise ToolError(f"insufficient balance on card {card_id}")
    card.balance = _money(card.balance - insurance_cost)
    iid = f"INS-{booking_id}"
    booking.insurance = Insurance(
        insurance_id=iid, insurance_type=insurance_type, insurance_cost=_money(insurance_cost), card_id=card_id
    )
    return {"insurance_id": iid, "insurance_status": True}


@tool(side_effect=True, writes={"support_case_id": "result.case_id"})
def contact_customer_support(state: TravelState, booking_id: str, message: str) -> dict:
    """Send a message about a booking to customer support; returns the support case id.

    Args:
        booking_id: Id of the booking the message is about.
        message: The message for customer support.
    """
    _booking(state, booking_id)
    if not message.strip():
        raise ToolError("the message is empty")
    case_id = f"CS-{len(state.support_cases) + 1:03d}"
    state.support_cases.append(SupportCase(case_id=case_id, booking_id=booking_id, message=message))
    return {"case_id": case_id, "customer_support_message": f"Support case {case_id} opened for {booking_id}."}


@tool(writes={"traveler_verified": "result.verification_status"})
def verify_traveler_information(
    state: TravelState, first_name: str, last_name: str, date_of_birth: str, passport_number: str
) -> dict:
    """Verify a traveler's identity (adult, valid passport number); the result says whether it passed.

    Args:
        first_name: The traveler's first name.
        last_name: The traveler's last name.
        date_of_birth: Date of birth, YYYY-MM-DD.
        passport_number: Passport number: two letters then seven digits, e.g. 'US1234567'.
    """
    _date(date_of_birth, "date_of_birth")
    if not first_name.strip() or not last_name.strip():
        raise ToolError("first and last name are required")
    failure = None
    year, month, day = (int(x) for x in date_of_birth.split("-"))
    cy, cm, cd = (int(x) for x in state.current_date.split("-"))
    age = cy - year - ((cm, cd) < (month, day))
    if age < 18:
        failure = f"the traveler must be at least 18 years old (is {age})"
    elif not re.fullmatch(r"[A-Z]{2}\d{7}", passport_number):
        failure = f"passport number {passport_number!r} is not valid (two letters then seven digits)"
    return {"verification_status": failure is None, "verification_failure": failure}


# ---------------------------------------------------------------- currency
def _rate(state: TravelState, currency: str) -> float:
    if currency == "USD":
        return 1.0
    if currency not in state.exchange_rates:
        raise ToolError(f"unknown currency {currency!r}")
    return state.exchange_rates[currency]


@tool(
    writes={"exchanged_value": "result.exchanged_value"},
    post=[_post_nonnegative_value],
    alternatives=["compute_cross_exchange_rate"],
)
def compute_exchange_rate(state: TravelState, base_currency: str, target_currency: str, value: float) -> dict:
    """Convert an amount between USD and another currency at the direct quote.

    Args:
        base_currency: Currency code of the amount, e.g. 'USD'.
        target_currency: Currency code to convert to, e.g. 'EUR'.
        value: The amount to convert.
    """
    if "USD" not in (base_currency, target_currency):
        raise ToolError(f"no direct quote for {base_currency}/{target_currency}: one side must be USD")
    if value < 0:
        raise ToolError("value must not be negative")
    rate = _rate(state, target_currency) / _rate(state, base_currency)
    return {"exchanged_value": _money(value * rate), "rate": round(rate, 6)}


@tool(writes={"exchanged_value": "result.exchanged_value"}, post=[_post_nonnegative_value])
def compute_cross_exchange_rate(state: TravelState, base_currency: str, target_currency: str, value: float) -> dict:
    """Convert an amount between any two currencies through their USD cross rate.

    Args:
        base_currency: Currency code of the amount, e.g. 'EUR'.
        target_currency: Currency code to convert to, e.g. 'JPY'.
        value: The amount to convert.
    """
    if value < 0:
        raise ToolError("value must not be negative")
    rate = _rate(state, target_currency) / _rate(state, base_currency)
    return {"exchanged_value": _money(value * rate), "rate": round(rate, 6), "via": "USD"}
