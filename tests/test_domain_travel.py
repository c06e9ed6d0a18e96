"""The travel domain plugin: tools, errors (state unchanged), prerequisites/writes, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.domains.travel.state import CreditCard, TravelState
from forethought.kernel.domains.travel.tools import fare, issue_token
from forethought.kernel.environment import Environment
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import assert_solution_verifies, solution_paths

DOMAIN = load_domain("travel")
TOKEN = issue_token("cid", "rt", "read_write")
SOLUTIONS = Path(__file__).resolve().parents[1] / "data_gen" / "solutions" / "travel"


def run(state: TravelState, tool: str, **args):
    return DOMAIN.tools[tool](state, args)


def fresh(**overrides) -> TravelState:
    return DOMAIN.load_state(overrides)


def logged_in(scope: str = "read_write", **overrides) -> TravelState:
    state = fresh(**overrides)
    assert "error" not in run(
        state,
        "authenticate_travel",
        client_id="cid",
        client_secret="sec",
        refresh_token="rt",
        grant_type=scope,
        user_first_name="Maya",
        user_last_name="Chen",
    )
    return state


def with_card(balance: float = 10000.0, **kw) -> TravelState:
    state = logged_in(**kw)
    state.credit_cards["c1"] = CreditCard(
        card_number="4111 1111 1111 1111",
        cardholder_name="Maya Chen",
        expiration_date="09/2028",
        card_verification_number=123,
        balance=balance,
    )
    return state


def fails(state: TravelState, tool: str, contains: str, **args) -> None:
    """The call reports an error containing `contains` and leaves the state exactly as it was."""
    before = state.model_dump(mode="json")
    out = run(state, tool, **args)
    assert "error" in out and contains in out["error"], out
    assert state.model_dump(mode="json") == before


def book(state: TravelState, **kw):
    args = dict(
        access_token=TOKEN,
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    args.update(kw)
    return run(state, "book_flight", **args)


# ------------------------------------------------------------- registry
def test_registry_shape():
    assert len(DOMAIN.tools) >= 12
    specs = {n: t.spec for n, t in DOMAIN.tools.items()}
    assert specs["get_nearest_airport_by_city"].required == ["city"]
    assert specs["book_flight"].required == [
        "access_token",
        "card_id",
        "travel_date",
        "travel_from",
        "travel_to",
        "travel_class",
    ]
    assert specs["get_flight_cost"].parameters["properties"]["travel_class"]["enum"] == ["economy", "business", "first"]


def test_prerequisites_writes_and_side_effects():
    pre = {n: [p.key for p in t.spec.prerequisites] for n, t in DOMAIN.tools.items()}
    assert pre["get_nearest_airport_by_city"] == ["authenticated"]
    assert pre["book_flight"] == ["access_token", "token_scope", "fare_within_budget"]
    assert pre["purchase_insurance"] == ["access_token", "token_scope", "traveler_verified"]
    assert (
        pre["cancel_booking"]
        == pre["register_credit_card"]
        == pre["set_budget_limit"]
        == ["access_token", "token_scope"]
    )
    assert pre["retrieve_invoice"] == pre["get_credit_card_balance"] == ["access_token"]
    assert pre["get_flight_cost"] == pre["list_all_airports"] == pre["compute_exchange_rate"] == []
    side = {n for n, t in DOMAIN.tools.items() if t.spec.side_effect}
    assert side == {
        "authenticate_travel",
        "book_flight",
        "cancel_booking",
        "register_credit_card",
        "set_budget_limit",
        "purchase_insurance",
        "contact_customer_support",
    }
    # Each prerequisite key is established by some tool (check_prerequisites can propose it).
    written = {k for t in DOMAIN.tools.values() for k in t.spec.writes}
    assert {k for ks in pre.values() for k in ks} <= written
    assert DOMAIN.tools["compute_exchange_rate"].spec.alternatives == ["compute_cross_exchange_rate"]


def test_scratchpad_writes_templated_and_from_results():
    spec = DOMAIN.tools["get_nearest_airport_by_city"].spec
    assert toolgate.declared_writes(spec, {"city": "Miami"}, {"nearest_airport": "MIA"}) == {
        "city": "Miami",
        "airport:Miami": "MIA",
    }
    state = fresh()
    args = dict(
        client_id="cid",
        client_secret="sec",
        refresh_token="rt",
        grant_type="read",
        user_first_name="A",
        user_last_name="B",
    )
    written = toolgate.declared_writes(
        DOMAIN.tools["authenticate_travel"].spec, args, run(state, "authenticate_travel", **args)
    )
    assert (
        written["access_token"] == issue_token("cid", "rt", "read")
        and written["token_scope"] == "read"
        and written["authenticated"] is True
    )


def test_prerequisite_sat_predicates():
    spec = DOMAIN.tools["book_flight"].spec
    scratchpad = Scratchpad({"access_token": "x", "token_scope": "read", "fare_within_budget": True})
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "not_met", "met"]
    scratchpad.set("token_scope", "write", "test")
    scratchpad.set("fare_within_budget", False, "test")
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "met", "not_met"]
    assert toolgate.check(DOMAIN.tools["purchase_insurance"].spec.prerequisites[2], scratchpad) == "absent"


# ------------------------------------------------------- session & airports
def test_authenticate_and_login_status():
    state = fresh()
    assert run(state, "travel_get_login_status") == {"login_status": False}
    out = run(
        state,
        "authenticate_travel",
        client_id="cid",
        client_secret="sec",
        refresh_token="rt",
        grant_type="read_write",
        user_first_name="Maya",
        user_last_name="Chen",
    )
    assert out["access_token"] == TOKEN == state.access_token and out["scope"] == "read_write"
    assert run(state, "travel_get_login_status") == {"login_status": True}
    fails(
        fresh(),
        "authenticate_travel",
        "client_secret is empty",
        client_id="cid",
        client_secret=" ",
        refresh_token="rt",
        grant_type="read",
        user_first_name="A",
        user_last_name="B",
    )


def test_nearest_airport_and_list():
    state = fresh()
    assert run(state, "get_nearest_airport_by_city", city="Miami")["nearest_airport"] == "MIA"
    assert run(state, "get_nearest_airport_by_city", city="palo alto")["nearest_airport"] == "SFO"
    assert run(state, "get_nearest_airport_by_city", city="Yokohama")["nearest_airport"] == "HND"
    fails(state, "get_nearest_airport_by_city", "no airport known", city="Atlantis")
    codes = run(state, "list_all_airports")["airports"]
    assert codes == sorted(codes) and {"MIA", "LAX", "JFK", "LHR"} <= set(codes)
    assert all(code in state.airports for code in state.city_airports.values())


# ------------------------------------------------------------------ flights
def test_flight_cost_and_budget():
    state = fresh()
    out = run(
        state, "get_flight_cost", travel_from="LAX", travel_to="JFK", travel_date="2026-04-15", travel_class="business"
    )
    assert out == {"travel_cost": 1341.0, "currency": "USD", "within_budget": True}
    assert fare(state, "LAX", "JFK", "economy") * 5 == fare(state, "LAX", "JFK", "first")
    state.budget_limit = 1000.0
    assert (
        run(
            state,
            "get_flight_cost",
            travel_from="LAX",
            travel_to="JFK",
            travel_date="2026-04-15",
            travel_class="business",
        )["within_budget"]
        is False
    )
    fails(
        state,
        "get_flight_cost",
        "unknown airport",
        travel_from="XXX",
        travel_to="JFK",
        travel_date="2026-04-15",
        travel_class="economy",
    )
    fails(
        state,
        "get_flight_cost",
        "same airport",
        travel_from="JFK",
        travel_to="JFK",
        travel_date="2026-04-15",
        travel_class="economy",
    )
    fails(
        state,
        "get_flight_cost",
        "in the past",
        travel_from="LAX",
        travel_to="JFK",
        travel_date="2025-12-01",
        travel_class="economy",
    )
    fails(
        state,
        "get_flight_cost",
        "YYYY-MM-DD",
        travel_from="LAX",
        travel_to="JFK",
        travel_date="15/04/2026",
        travel_class="economy",
    )


def test_book_flight_and_errors_leave_state_unchanged():
    state = with_card()
    out = book(state)
    assert out["booking_id"] == "BK1001" and state.bookings["BK1001"].status == "confirmed"
    assert state.credit_cards["c1"].balance == 10000.0 - 447.0 and state.next_booking_number == 1002
    assert book(state, travel_date="2026-05-01")["booking_id"] == "BK1002"
    fails(
        state,
        "book_flight",
        "invalid access token",
        access_token="nope",
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    fails(
        state,
        "book_flight",
        "no credit card",
        access_token=TOKEN,
        card_id="zz",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    poor = with_card(balance=100.0)
    fails(
        poor,
        "book_flight",
        "insufficient balance",
        access_token=TOKEN,
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    capped = with_card(budget_limit=300.0)
    fails(
        capped,
        "book_flight",
        "exceeds the budget",
        access_token=TOKEN,
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    reader = with_card(scope="read")
    fails(
        reader,
        "book_flight",
        "does not allow changes",
        access_token=issue_token("cid", "rt", "read"),
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )


def test_cancel_refunds_fare_and_insurance():
    state = with_card()
    book(state)
    assert "error" not in run(
        state,
        "purchase_insurance",
        access_token=TOKEN,
        insurance_type="basic",
        booking_id="BK1001",
        insurance_cost=40,
        card_id="c1",
    )
    assert state.credit_cards["c1"].balance == 10000.0 - 447.0 - 40.0
    out = run(state, "cancel_booking", access_token=TOKEN, booking_id="BK1001")
    assert out == {"cancel_status": True, "refunded": 487.0}
    assert state.bookings["BK1001"].status == "cancelled" and state.credit_cards["c1"].balance == 10000.0
    fails(state, "cancel_booking", "already cancelled", access_token=TOKEN, booking_id="BK1001")
    fails(state, "cancel_booking", "no booking", access_token=TOKEN, booking_id="BK9")
    fails(
        state,
        "purchase_insurance",
        "is cancelled",
        access_token=TOKEN,
        insurance_type="basic",
        booking_id="BK1001",
        insurance_cost=10,
        card_id="c1",
    )


def test_invoice_and_its_writes():
    state = with_card()
    book(state, travel_class="first")
    out = run(state, "retrieve_invoice", access_token=TOKEN, booking_id="BK1001")
    inv = out["invoice"]
    assert inv["total"] == 2235.0 and inv["card_id"] == "c1" and inv["status"] == "confirmed"
    written = toolgate.declared_writes(
        DOMAIN.tools["retrieve_invoice"].spec, {"access_token": TOKEN, "booking_id": "BK1001"}, out
    )
    assert (written["travel_from"], written["travel_to"], written["travel_class"], written["card_id"]) == (
        "LAX",
        "JFK",
        "first",
        "c1",
    )
    fails(state, "retrieve_invoice", "no booking", access_token=TOKEN, booking_id="BK0")
    fails(fresh(), "retrieve_invoice", "not authenticated", access_token=TOKEN, booking_id="BK1001")


# --------------------------------------------------------- cards & budget
def test_register_card_balance_and_listing():
    state = logged_in()
    reg = dict(
        access_token=TOKEN,
        card_number="4111 2222 3333 4444",
        expiration_date="10/2029",
        cardholder_name="Daniel Okafor",
        card_verification_number=321,
    )
    assert run(state, "register_credit_card", **reg) == {"card_id": "card_4444"}
    assert run(state, "get_credit_card_balance", access_token=TOKEN, card_id="card_4444") == {"card_balance": 5000.0}
    assert run(state, "get_all_credit_cards", access_token=TOKEN)["card_ids"] == ["card_4444"]
    fails(state, "register_credit_card", "already registered", **reg)
    fails(state, "register_credit_card", "16 digits", **{**reg, "card_number": "4111"})
    fails(
        state,
        "register_credit_card",
        "expired",
        **{**reg, "card_number": "4111 2222 3333 5555", "expiration_date": "01/2026"},
    )
    fails(
        state,
        "register_credit_card",
        "3 digits",
        **{**reg, "card_number": "4111 2222 3333 5555", "card_verification_number": 12},
    )
    fails(state, "get_credit_card_balance", "no credit card", access_token=TOKEN, card_id="card_0000")


def test_set_budget_limit():
    state = logged_in()
    assert run(state, "set_budget_limit", access_token=TOKEN, budget_limit=2500) == {"budget_limit": 2500.0}
    assert state.budget_limit == 2500.0
    fails(state, "set_budget_limit", "must be positive", access_token=TOKEN, budget_limit=0)
    fails(
        logged_in(scope="read"),
        "set_budget_limit",
        "does not allow changes",
        access_token=issue_token("cid", "rt", "read"),
        budget_limit=10,
    )


# ------------------------------------------------- insurance, support, identity
def test_purchase_insurance_errors():
    state = with_card(balance=500.0)
    book(state)  # 447 charged, 53 left
    fails(
        state,
        "purchase_insurance",
        "insufficient balance",
        access_token=TOKEN,
        insurance_type="basic",
        booking_id="BK1001",
        insurance_cost=60,
        card_id="c1",
    )
    fails(
        state,
        "purchase_insurance",
        "must be positive",
        access_token=TOKEN,
        insurance_type="basic",
        booking_id="BK1001",
        insurance_cost=0,
        card_id="c1",
    )
    out = run(
        state,
        "purchase_insurance",
        access_token=TOKEN,
        insurance_type="comprehensive",
        booking_id="BK1001",
        insurance_cost=50,
        card_id="c1",
    )
    assert out["insurance_id"] == "INS-BK1001" and state.bookings["BK1001"].insurance.insurance_type == "comprehensive"
    fails(
        state,
        "purchase_insurance",
        "already insured",
        access_token=TOKEN,
        insurance_type="basic",
        booking_id="BK1001",
        insurance_cost=1,
        card_id="c1",
    )


def test_contact_customer_support():
    state = with_card()
    book(state)
    assert run(state, "contact_customer_support", booking_id="BK1001", message="Hello")["case_id"] == "CS-001"
    assert run(state, "contact_customer_support", booking_id="BK1001", message="Again")["case_id"] == "CS-002"
    fails(state, "contact_customer_support", "no booking", booking_id="BK7", message="Hi")
    fails(state, "contact_customer_support", "empty", booking_id="BK1001", message="  ")


def test_verify_traveler_information():
    state = fresh()
    ok = run(
        state,
        "verify_traveler_information",
        first_name="Ana",
        last_name="Silva",
        date_of_birth="1990-05-14",
        passport_number="PT1234567",
    )
    assert ok == {"verification_status": True, "verification_failure": None}
    minor = run(
        state,
        "verify_traveler_information",
        first_name="Sofia",
        last_name="Romero",
        date_of_birth="2010-06-30",
        passport_number="ES5550123",
    )
    assert minor["verification_status"] is False and "18" in minor["verification_failure"]
    bad = run(
        state,
        "verify_traveler_information",
        first_name="Ana",
        last_name="Silva",
        date_of_birth="1990-05-14",
        passport_number="US12345",
    )
    assert bad["verification_status"] is False and "passport" in bad["verification_failure"]
    fails(
        state,
        "verify_traveler_information",
        "YYYY-MM-DD",
        first_name="A",
        last_name="B",
        date_of_birth="14.05.1990",
        passport_number="PT1234567",
    )


# ---------------------------------------------------------------- currency
def test_exchange_direct_cross_and_fallback_postcondition():
    state = fresh()
    assert (
        run(state, "compute_exchange_rate", base_currency="USD", target_currency="EUR", value=100)["exchanged_value"]
        == 92.0
    )
    assert (
        run(state, "compute_exchange_rate", base_currency="EUR", target_currency="USD", value=1200)["exchanged_value"]
        == 1304.35
    )
    fails(state, "compute_exchange_rate", "no direct quote", base_currency="EUR", target_currency="JPY", value=300)
    fails(state, "compute_exchange_rate", "unknown currency", base_currency="USD", target_currency="XYZ", value=1)
    assert (
        run(state, "compute_cross_exchange_rate", base_currency="EUR", target_currency="JPY", value=300)[
            "exchanged_value"
        ]
        == 48913.04
    )
    # The direct tool's failure is a ToolGate postcondition failure (which triggers the declared alternative).
    spec, tool = DOMAIN.tools["compute_exchange_rate"].spec, DOMAIN.tools["compute_exchange_rate"]
    args = {"base_currency": "EUR", "target_currency": "JPY", "value": 300}
    assert toolgate.postcondition(spec, tool, args, tool(state, args), state)


def test_semantic_postconditions():
    state = fresh(city_airports={"Nowhere": "ZZZ"})
    spec, tool = DOMAIN.tools["get_nearest_airport_by_city"].spec, DOMAIN.tools["get_nearest_airport_by_city"]
    out = tool(state, {"city": "Nowhere"})
    assert any("not a known airport" in e for e in toolgate.postcondition(spec, tool, {"city": "Nowhere"}, out, state))
    s2 = with_card()
    args = dict(
        access_token=TOKEN,
        card_id="c1",
        travel_date="2026-04-15",
        travel_from="LAX",
        travel_to="JFK",
        travel_class="economy",
    )
    bt = DOMAIN.tools["book_flight"]
    assert toolgate.postcondition(bt.spec, bt, args, bt(s2, args), s2) == []


# ------------------------------------------------------------ determinism
def test_snapshot_deterministic_and_json():
    def session():
        env = Environment(
            ["travel"],
            {
                "travel": {
                    "credit_cards": {
                        "c1": {
                            "card_number": "4111 1111 1111 1111",
                            "cardholder_name": "Maya Chen",
                            "expiration_date": "09/2028",
                            "card_verification_number": 123,
                            "balance": 9000.0,
                        }
                    }
                }
            },
        )
        for tool, args in [
            (
                "authenticate_travel",
                dict(
                    client_id="cid",
                    client_secret="sec",
                    refresh_token="rt",
                    grant_type="read_write",
                    user_first_name="Maya",
                    user_last_name="Chen",
                ),
            ),
            (
                "book_flight",
                dict(
                    access_token=TOKEN,
                    card_id="c1",
                    travel_date="2026-04-15",
                    travel_from="SFO",
                    travel_to="LHR",
                    travel_class="business",
                ),
            ),
            ("contact_customer_support", dict(booking_id="BK1001", message="hi")),
        ]:
            result, staged = env.stage(tool, args)
            assert "error" not in result, result
            env.commit(tool, staged)
        return env.snapshot()

    first, second = session(), session()
    assert first == second and json.loads(json.dumps(first)) == first
    assert DOMAIN.snapshot(fresh()) == DOMAIN.snapshot(fresh())


def test_paper_c3_solution_verifies():
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.solution_file import load_solution

    res = verify_solution(load_solution(SOLUTIONS / "paper_c3_nearest_airport.json"))
    [call] = res[0].committed_calls
    assert (call.tool, call.arguments, call.result["nearest_airport"]) == (
        "get_nearest_airport_by_city",
        {"city": "Miami"},
        "MIA",
    )
    assert [(r.key, r.outcome) for r in res[0].prerequisites["t1"]] == [("authenticated", "met")]


@pytest.mark.parametrize("name", ["paper_d1_example1_business_la_ny", "paper_d2_example2_first_sf_la"])
def test_paper_d_examples_call_order(name):
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.solution_file import load_solution

    res = verify_solution(load_solution(SOLUTIONS / f"{name}.json"))
    tools = [c.tool for c in res[0].committed_calls]
    expected = {
        "paper_d1_example1_business_la_ny": [
            "get_nearest_airport_by_city",
            "get_nearest_airport_by_city",
            "get_flight_cost",
            "authenticate_travel",
            "book_flight",
        ],
        "paper_d2_example2_first_sf_la": [
            "get_nearest_airport_by_city",
            "get_nearest_airport_by_city",
            "authenticate_travel",
            "get_flight_cost",
            "book_flight",
        ],
    }[name]
    assert tools == expected


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("travel", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
