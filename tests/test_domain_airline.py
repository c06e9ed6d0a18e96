"""The airline domain: tool behaviour, errors leave the state unchanged, prerequisites/writes, determinism."""

from __future__ import annotations

import json

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import Harness, assert_solution_verifies, solution_paths

DOM = load_domain("airline")

SCENARIO = {
    "users": {
        "ethan_nguyen_7360": {
            "name": {"first_name": "Ethan", "last_name": "Nguyen"},
            "dob": "1998-08-02",
            "payment_methods": {
                "credit_card_7815": {"source": "credit_card", "brand": "visa", "last_four": "7815"},
                "gift_card_5063": {"source": "gift_card", "amount": 100.0},
            },
        },
    },
    "flights": {
        "HAT301": {"origin": "JFK", "destination": "SFO", "dates": {"2024-05-20": {}, "2024-05-22": {}}},
        "HAT302": {"origin": "SFO", "destination": "JFK", "dates": {"2024-05-27": {}}},
        "HAT303": {
            "origin": "JFK",
            "destination": "SFO",
            "dates": {"2024-05-21": {"seats": {"basic_economy": 0, "economy": 0, "business": 0}}},
        },
        "HAT304": {
            "origin": "LAX",
            "destination": "SEA",
            "dates": {"2024-05-10": {"status": "landed"}, "2024-05-15": {"status": "delayed"}},
        },
    },
    "reservations": {
        "G2LTC4": {
            "user_id": "ethan_nguyen_7360",
            "origin": "JFK",
            "destination": "SFO",
            "flights": [{"flight_number": "HAT301", "date": "2024-05-20"}],
            "passengers": [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}],
        },
        "BASIC1": {
            "user_id": "ethan_nguyen_7360",
            "origin": "JFK",
            "destination": "SFO",
            "cabin": "basic_economy",
            "flights": [{"flight_number": "HAT301", "date": "2024-05-20", "price": 80}],
            "passengers": [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}],
            "payment_history": [{"payment_id": "gift_card_5063", "amount": 80}],
        },
        "FLOWN1": {
            "user_id": "ethan_nguyen_7360",
            "origin": "LAX",
            "destination": "SEA",
            "cabin": "business",
            "flights": [{"flight_number": "HAT304", "date": "2024-05-10"}],
            "passengers": [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}],
        },
    },
}


_H = Harness(DOM, SCENARIO)
state, call, fails, writes = _H.state, _H.call, _H.fails, _H.writes


# ------------------------------------------------------------------ state
def test_defaults_merge_and_links():
    world = state()
    assert "OG7K2P" in world.reservations and "G2LTC4" in world.reservations  # defaults kept, scenario added
    assert world.users["ethan_nguyen_7360"].reservations == ["G2LTC4", "BASIC1", "FLOWN1"]
    # a reservation without payments was paid with the user's first method
    assert world.reservations["G2LTC4"].payment_history[0].payment_id == "credit_card_7815"
    with pytest.raises(ValueError, match="unknown user"):
        DOM.load_state(
            {
                "reservations": {
                    "X": {"user_id": "nobody", "origin": "JFK", "destination": "SFO", "flights": [], "passengers": []}
                }
            }
        )
    with pytest.raises(ValueError, match="does not operate"):
        DOM.load_state(
            {
                "reservations": {
                    "X": {
                        "user_id": "raj_patel_5120",
                        "origin": "JFK",
                        "destination": "SFO",
                        "flights": [{"flight_number": "HAT001", "date": "2030-01-01"}],
                        "passengers": [],
                    }
                }
            }
        )


def test_snapshot_is_deterministic_and_json():
    first, second = state(), state()
    assert DOM.snapshot(first) == DOM.snapshot(second)
    for world in (first, second):
        call(
            world,
            "book_reservation",
            user_id="ethan_nguyen_7360",
            flight_type="one_way",
            cabin="economy",
            flights=[{"flight_number": "HAT301", "date": "2024-05-22"}],
            passengers=[{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}],
            payment_id="credit_card_7815",
        )
    assert DOM.snapshot(first) == DOM.snapshot(second)
    json.dumps(DOM.snapshot(first))


# ------------------------------------------------------------------ reads
def test_get_user_details_and_writes():
    world = state()
    out = call(world, "get_user_details", user_id="ethan_nguyen_7360")
    assert out["payment_method_ids"] == ["credit_card_7815", "gift_card_5063"]
    written = writes("get_user_details", {"user_id": "ethan_nguyen_7360"}, out)
    assert written["airline_user_loaded"] is True and written["user_id"] == "ethan_nguyen_7360"
    assert written["reservation_ids"] == ["G2LTC4", "BASIC1", "FLOWN1"] and written["membership"] == "regular"
    fails(world, "get_user_details", "not found", user_id="nobody_1")


def test_get_reservation_details_writes_the_c4_facts():
    world = state()
    out = call(world, "get_reservation_details", reservation_id="G2LTC4")
    written = writes("get_reservation_details", {"reservation_id": "G2LTC4"}, out)
    assert written["reservation_loaded"] is True
    assert written["passenger_dob_known"] == "1998-08-02"
    assert written["current_passengers"] == [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}]
    assert (
        written["reservation_payment_id"] == "credit_card_7815"
        and written["reservation_user_id"] == "ethan_nguyen_7360"
    )
    assert written["reservation_changeable"] is True and written["cancellation_eligible"] is False
    assert out["flights"][0]["origin"] == "JFK" and out["free_baggage_allowance"] == 1
    fails(world, "get_reservation_details", "not found", reservation_id="NOPE00")


def test_eligibility_rules():
    world = state()
    view = lambda rid: call(world, "get_reservation_details", reservation_id=rid)  # noqa: E731
    assert view("BASIC1")["changeable"] is False
    assert view("FLOWN1")["cancellation_eligible"] is False  # business, but flown
    assert view("OG7K2P")["cancellation_eligible"] is True  # default business reservation
    world.reservations["G2LTC4"].insurance = "yes"
    assert view("G2LTC4")["cancellation_eligible"] is True
    world.reservations["G2LTC4"].insurance = "no"
    world.reservations["G2LTC4"].created_at = "2024-05-15T01:00:00"  # booked today
    assert view("G2LTC4")["cancellation_eligible"] is True


def test_search_direct_flight():
    world = state()
    out = call(world, "search_direct_flight", origin="JFK", destination="SFO", date="2024-05-22")
    assert out["flight_numbers"] == ["HAT301"]
    assert writes("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-22"}, out)[
        "found_flight_numbers"
    ] == ["HAT301"]
    assert call(world, "search_direct_flight", origin="JFK", destination="SFO", date="2024-05-25")["flights"] == []
    fails(world, "search_direct_flight", "unknown airport", origin="XXX", destination="SFO", date="2024-05-22")
    fails(world, "search_direct_flight", "same airport", origin="JFK", destination="JFK", date="2024-05-22")
    fails(world, "search_direct_flight", "YYYY-MM-DD", origin="JFK", destination="SFO", date="22/05/2024")


def test_get_flight_status_and_list_airports():
    world = state()
    out = call(world, "get_flight_status", flight_number="HAT304", date="2024-05-15")
    assert (out["status"], out["disrupted"], out["compensation_per_passenger"]) == ("delayed", True, 50)
    written = writes("get_flight_status", {"flight_number": "HAT304", "date": "2024-05-15"}, out)
    assert written["flight_disrupted"] is True and written["compensation_amount"] == 50
    assert call(world, "get_flight_status", flight_number="HAT304", date="2024-05-10")["disrupted"] is False
    fails(world, "get_flight_status", "not found", flight_number="HAT999", date="2024-05-15")
    fails(world, "get_flight_status", "does not operate", flight_number="HAT304", date="2024-05-16")
    codes = [a["code"] for a in call(world, "list_all_airports_airline")["airports"]]
    assert "JFK" in codes and codes == sorted(codes)


# ----------------------------------------------------------------- changes
PAX = [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "1998-08-02"}]


def test_book_reservation():
    world = state()
    out = call(
        world,
        "book_reservation",
        user_id="ethan_nguyen_7360",
        flight_type="round_trip",
        cabin="economy",
        flights=[{"flight_number": "HAT301", "date": "2024-05-22"}, {"flight_number": "HAT302", "date": "2024-05-27"}],
        passengers=PAX,
        payment_id="credit_card_7815",
        total_baggages=2,
        insurance="yes",
    )
    assert out["reservation_id"] == "BK0001" and out["charged"] == 300 + 50 + 30
    reservation = world.reservations["BK0001"]
    assert (reservation.origin, reservation.destination, reservation.nonfree_baggages) == ("JFK", "SFO", 1)
    assert world.flights["HAT302"].dates["2024-05-27"].seats["economy"] == 9
    assert world.users["ethan_nguyen_7360"].reservations[-1] == "BK0001"
    written = writes("book_reservation", {"user_id": "ethan_nguyen_7360"}, out)
    assert (
        written["reservation_id"] == "BK0001"
        and written["reservation_loaded"] is True
        and written["cancellation_eligible"] is True
    )
    assert [p.key for p in DOM.tools["book_reservation"].spec.prerequisites] == ["airline_user_loaded"]


@pytest.mark.parametrize(
    "args, match",
    [
        ({"payment_id": "credit_card_0000"}, "payment method"),
        ({"payment_id": "gift_card_5063", "cabin": "business"}, "balance"),
        ({"flights": [{"flight_number": "HAT303", "date": "2024-05-21"}]}, "seats left"),
        (
            {
                "flights": [
                    {"flight_number": "HAT301", "date": "2024-05-22"},
                    {"flight_number": "HAT304", "date": "2024-05-15"},
                ]
            },
            "must connect",
        ),
        ({"flight_type": "round_trip"}, "round trip"),
        ({"passengers": [{"first_name": "Ethan", "last_name": "Nguyen"}]}, "invalid passenger"),
        ({"passengers": [{"first_name": "Ethan", "last_name": "Nguyen", "dob": "02/08/1998"}]}, "YYYY-MM-DD"),
        ({"flights": [{"flight_number": "HAT304", "date": "2024-05-10"}]}, "cannot be booked"),
        ({"user_id": "nobody_1"}, "not found"),
    ],
)
def test_book_reservation_errors_leave_state_unchanged(args, match):
    base = {
        "user_id": "ethan_nguyen_7360",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": "HAT301", "date": "2024-05-22"}],
        "passengers": PAX,
        "payment_id": "credit_card_7815",
    }
    fails(state(), "book_reservation", match, **{**base, **args})


def test_update_reservation_passengers():
    world = state()
    new = [{"first_name": "James", "last_name": "Nguyen", "dob": "1998-08-02"}]
    out = call(world, "update_reservation_passengers", reservation_id="G2LTC4", passengers=new)
    assert out["passengers"] == new and world.reservations["G2LTC4"].passengers[0].first_name == "James"
    assert [p.key for p in DOM.tools["update_reservation_passengers"].spec.prerequisites] == [
        "reservation_loaded",
        "passenger_dob_known",
    ]
    fails(world, "update_reservation_passengers", "cannot change", reservation_id="G2LTC4", passengers=new + new)
    fails(world, "update_reservation_passengers", "non-empty", reservation_id="G2LTC4", passengers=[])


def test_update_reservation_flights():
    world = state()
    out = call(
        world,
        "update_reservation_flights",
        reservation_id="G2LTC4",
        cabin="business",
        flights=[{"flight_number": "HAT301", "date": "2024-05-22"}],
        payment_id="credit_card_7815",
    )
    assert out["charged"] == 250 and world.reservations["G2LTC4"].cabin == "business"
    assert world.flights["HAT301"].dates["2024-05-22"].seats["business"] == 3
    assert [p.key for p in DOM.tools["update_reservation_flights"].spec.prerequisites] == [
        "reservation_loaded",
        "reservation_changeable",
    ]
    fails(
        world,
        "update_reservation_flights",
        "basic economy",
        reservation_id="BASIC1",
        cabin="basic_economy",
        flights=[{"flight_number": "HAT301", "date": "2024-05-22"}],
        payment_id="credit_card_7815",
    )
    fails(
        world,
        "update_reservation_flights",
        "the reservation is",
        reservation_id="G2LTC4",
        cabin="economy",
        flights=[{"flight_number": "HAT302", "date": "2024-05-27"}],
        payment_id="credit_card_7815",
    )
    fails(
        world,
        "update_reservation_flights",
        "flown",
        reservation_id="FLOWN1",
        cabin="business",
        flights=[{"flight_number": "HAT304", "date": "2024-05-10"}],
        payment_id="credit_card_7815",
    )


def test_unchanged_segment_keeps_price_and_seat():
    world = state()
    world.flights["HAT301"].dates["2024-05-20"].seats["economy"] = 0  # full, but our seat is already held
    out = call(
        world,
        "update_reservation_flights",
        reservation_id="G2LTC4",
        cabin="economy",
        flights=[{"flight_number": "HAT301", "date": "2024-05-20"}],
        payment_id="credit_card_7815",
    )
    assert out["charged"] == 0 and world.flights["HAT301"].dates["2024-05-20"].seats["economy"] == 0


def test_upgrade_reservation_cabin():
    world = state()
    out = call(
        world, "upgrade_reservation_cabin", reservation_id="BASIC1", cabin="economy", payment_id="gift_card_5063"
    )
    assert out["charged"] == 70 and out["changeable"] is True
    assert world.users["ethan_nguyen_7360"].payment_methods["gift_card_5063"].amount == 30.0
    written = writes("upgrade_reservation_cabin", {"reservation_id": "BASIC1"}, out)
    assert written["reservation_changeable"] is True and written["current_cabin"] == "economy"
    fails(
        world,
        "upgrade_reservation_cabin",
        "already in",
        reservation_id="BASIC1",
        cabin="economy",
        payment_id="credit_card_7815",
    )
    fails(
        world,
        "upgrade_reservation_cabin",
        "balance",
        reservation_id="BASIC1",
        cabin="business",
        payment_id="gift_card_5063",
    )


def test_update_reservation_baggages():
    world = state()
    out = call(
        world, "update_reservation_baggages", reservation_id="G2LTC4", total_baggages=3, payment_id="credit_card_7815"
    )
    assert (out["total_baggages"], out["nonfree_baggages"], out["charged"]) == (3, 2, 100)
    fails(
        world,
        "update_reservation_baggages",
        "cannot be removed",
        reservation_id="G2LTC4",
        total_baggages=1,
        payment_id="credit_card_7815",
    )
    fails(
        world,
        "update_reservation_baggages",
        "between 0",
        reservation_id="G2LTC4",
        total_baggages=4,
        nonfree_baggages=9,
        payment_id="credit_card_7815",
    )
    fails(
        world,
        "update_reservation_baggages",
        "payment method",
        reservation_id="G2LTC4",
        total_baggages=4,
        payment_id="credit_card_0000",
    )


def test_cancel_reservation_refunds():
    world = state()
    out = call(world, "cancel_reservation", reservation_id="BASIC1")
    assert out["status"] == "cancelled" and out["refunded"] == 80
    assert world.users["ethan_nguyen_7360"].payment_methods["gift_card_5063"].amount == 180.0
    assert [p.key for p in DOM.tools["cancel_reservation"].spec.prerequisites] == [
        "reservation_loaded",
        "cancellation_eligible",
    ]
    fails(world, "cancel_reservation", "is cancelled", reservation_id="BASIC1")
    fails(world, "cancel_reservation", "flown", reservation_id="FLOWN1")


def test_send_certificate():
    world = state()
    out = call(world, "send_certificate", user_id="ethan_nguyen_7360", amount=100)
    assert out["certificate_id"] == "certificate_0001"
    assert world.users["ethan_nguyen_7360"].payment_methods["certificate_0001"].amount == 100.0
    assert [p.key for p in DOM.tools["send_certificate"].spec.prerequisites] == [
        "airline_user_loaded",
        "flight_disrupted",
    ]
    fails(world, "send_certificate", "invalid certificate amount", user_id="ethan_nguyen_7360", amount=900)
    fails(world, "send_certificate", "not found", user_id="nobody_1", amount=50)


# ------------------------------------------------------------ registry facts
def test_side_effects():
    specs = {n: t.spec for n, t in DOM.tools.items()}
    assert len(specs) >= 10
    reads = {
        "get_user_details",
        "get_reservation_details",
        "search_direct_flight",
        "get_flight_status",
        "list_all_airports_airline",
    }
    assert {n for n, s in specs.items() if not s.side_effect} == reads


def test_prerequisites_drive_toolgate():
    spec = DOM.tools["update_reservation_passengers"].spec
    scratchpad = Scratchpad()
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["absent", "absent"]
    world = state()
    out = call(world, "get_reservation_details", reservation_id="G2LTC4")
    for k, value in writes("get_reservation_details", {"reservation_id": "G2LTC4"}, out).items():
        scratchpad.set(k, value, "test")
    assert [toolgate.check(p, scratchpad) for p in spec.prerequisites] == ["met", "met"]
    assert toolgate.check(DOM.tools["update_reservation_flights"].spec.prerequisites[1], scratchpad) == "met"
    out = call(world, "get_reservation_details", reservation_id="BASIC1")
    scratchpad.set("reservation_changeable", out["changeable"], "test")
    assert toolgate.check(DOM.tools["update_reservation_flights"].spec.prerequisites[1], scratchpad) == "not_met"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("airline", at_least=36), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
