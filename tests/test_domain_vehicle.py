"""The simulated vehicle domain: tool behaviour, errors (state unchanged), prerequisites, writes, snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.domains.vehicle.state import VehicleState
from forethought.kernel.scratchpad import Scratchpad
from forethought.kernel.specs import tool_brief
from tests.domain_harness import assert_solution_verifies, solution_paths

DOM = load_domain("vehicle")
LOCKED = {"driver": "locked", "passenger": "locked", "rear_left": "locked", "rear_right": "locked"}


def state(**kw) -> VehicleState:
    return DOM.load_state(kw)


def call(world: VehicleState, tool: str, **args):
    return DOM.tools[tool](world, args)


def snap(world: VehicleState) -> str:
    return json.dumps(DOM.snapshot(world), sort_keys=True)


def assert_error_unchanged(world: VehicleState, tool: str, fragment: str, **args) -> None:
    before = snap(world)
    out = call(world, tool, **args)
    assert "error" in out and fragment in out["error"], out
    assert snap(world) == before, f"{tool} changed the state although it failed"


def written(tool: str, args: dict, result: dict) -> dict:
    return toolgate.declared_writes(DOM.tools[tool].spec, args, result)


# ------------------------------------------------------------------ registry shape
def test_tool_set():
    assert len(DOM.tools) >= 14


def test_declared_prerequisites_and_writes():
    pre = {
        n: [(p.key, p.sat.op, p.sat.value) for p in t.spec.prerequisites]
        for n, t in DOM.tools.items()
        if t.spec.prerequisites
    }
    assert pre == {
        "startEngine": [("brake_pressed", "truthy", None), ("doors_locked", "truthy", None)],
        "fillFuelTank": [("engine_running", "eq", False)],
        "setCruiseControl": [("engine_running", "truthy", None)],
        "start_route_guidance": [("destination_set", "truthy", None)],
        "estimate_drive_feasibility_by_mileage": [("fuel_level", "not_null", None)],
    }
    # Every prerequisite key is established by some tool (so check_prerequisites can propose one).
    writers = {k for t in DOM.tools.values() for k in t.spec.writes}
    for keys in pre.values():
        for key, _, _ in keys:
            assert key in writers
    # Side effects: state-changing tools are marked, reads are not.
    effect = {n for n, t in DOM.tools.items() if t.spec.side_effect}
    assert effect == {
        "lockDoors",
        "pressBrakePedal",
        "releaseBrakePedal",
        "activateParkingBrake",
        "startEngine",
        "stopEngine",
        "fillFuelTank",
        "setCruiseControl",
        "adjustClimateControl",
        "setHeadlights",
        "set_navigation",
        "start_route_guidance",
    }
    assert DOM.tools["get_outside_temperature_from_google"].spec.alternatives == [
        "get_outside_temperature_from_weather_com"
    ]
    assert DOM.tools["get_outside_temperature_from_weather_com"].spec.alternatives == [
        "get_outside_temperature_from_google"
    ]


def test_enum_parameters_render_as_enums():
    brief = tool_brief(DOM.tools["startEngine"].spec)
    assert brief.params == {"ignitionMode": "enum[START]"} and brief.required == ["ignitionMode"]
    assert tool_brief(DOM.tools["lockDoors"].spec).params["door"] == "enum[all|driver|passenger|rear_left|rear_right]"
    clim = DOM.tools["adjustClimateControl"].spec
    assert clim.required == ["temperature", "unit"]
    assert DOM.tools["pressBrakePedal"].spec.required == []
    for tool in DOM.tools.values():  # every parameter is documented
        for param, schema in tool.spec.parameters["properties"].items():
            assert schema.get("description"), f"{tool.spec.name}.{param} has no description"


# ------------------------------------------------------------------ doors and brakes
def test_lock_doors_all_and_single():
    world = state()
    out = call(world, "lockDoors", unlock=False, door="all")
    assert out["allDoorsLocked"] is True and out["remainingUnlockedDoors"] == 0
    assert written("lockDoors", {"unlock": False, "door": "all"}, out) == {
        "unlock": False,
        "door": "all",
        "doors_locked": True,
    }
    out = call(world, "lockDoors", unlock=True, door="rear_left")
    assert world.doors.rear_left == "unlocked" and out["unlockedDoors"] == ["rear_left"]
    assert written("lockDoors", {"unlock": True, "door": "rear_left"}, out)["doors_locked"] is False
    assert_error_unchanged(world, "lockDoors", "unknown door", unlock=False, door="trunk")
    assert_error_unchanged(world, "lockDoors", "unlock must be", unlock="no", door="all")


def test_brake_pedal_full_partial_release():
    world = state()
    out = call(world, "pressBrakePedal")
    assert out == {"brakePedalStatus": "pressed", "brakePedalForce": 1000.0, "fullyPressed": True}
    assert written("pressBrakePedal", {}, out) == {"brake_pressed": True}
    out = call(world, "pressBrakePedal", pedalPosition=0.5)
    assert (
        world.brake_force == 500.0 and written("pressBrakePedal", {"pedalPosition": 0.5}, out)["brake_pressed"] is False
    )
    assert_error_unchanged(world, "pressBrakePedal", "at most 1", pedalPosition=1.5)
    assert_error_unchanged(world, "pressBrakePedal", "at least 0", pedalPosition=-0.1)
    out = call(world, "releaseBrakePedal")
    assert world.brake_pedal == "released" and world.brake_force == 0.0
    assert written("releaseBrakePedal", {}, out) == {"brake_pressed": False}


def test_parking_brake():
    world = state(parking_brake="engaged")
    out = call(world, "activateParkingBrake", mode="release")
    assert (
        world.parking_brake == "released"
        and written("activateParkingBrake", {"mode": "release"}, out)["parking_brake_engaged"] is False
    )
    assert_error_unchanged(world, "activateParkingBrake", "already released", mode="release")
    assert_error_unchanged(world, "activateParkingBrake", "mode must be", mode="hold")


# ------------------------------------------------------------------------- engine
def ready_to_start(**kw) -> VehicleState:
    return state(doors=LOCKED, brake_pedal="pressed", brake_force=1000.0, **kw)


def test_start_engine_checks_the_car_itself():
    assert_error_unchanged(
        state(brake_pedal="pressed", brake_force=1000.0), "startEngine", "unlocked: driver", ignitionMode="START"
    )
    assert_error_unchanged(state(doors=LOCKED), "startEngine", "must be pressed", ignitionMode="START")
    assert_error_unchanged(
        state(doors=LOCKED, brake_pedal="pressed", brake_force=400.0),
        "startEngine",
        "pressed fully",
        ignitionMode="START",
    )
    assert_error_unchanged(ready_to_start(fuel_level=0.0), "startEngine", "empty", ignitionMode="START")
    assert_error_unchanged(ready_to_start(), "startEngine", "use stopEngine", ignitionMode="STOP")
    world = ready_to_start()
    out = call(world, "startEngine", ignitionMode="START")
    assert world.engine_state == "running" and out["engineRunning"] is True
    assert written("startEngine", {"ignitionMode": "START"}, out) == {"ignitionMode": "START", "engine_running": True}


def test_stop_engine_turns_off_cruise():
    world = state(engine_state="running", cruise={"active": True, "speed": 60, "distance_to_next_vehicle": 50})
    out = call(world, "stopEngine")
    assert world.engine_state == "stopped" and world.cruise.active is False and world.cruise.speed == 0.0
    assert written("stopEngine", {}, out) == {"engine_running": False}


def test_fill_fuel_tank():
    world = state(fuel_level=10.0)
    out = call(world, "fillFuelTank", fuelAmount=15)
    assert world.fuel_level == 25.0 and written("fillFuelTank", {"fuelAmount": 15}, out)["fuel_level"] == 25.0
    assert_error_unchanged(world, "fillFuelTank", "tank holds 50", fuelAmount=30)
    assert_error_unchanged(world, "fillFuelTank", "more than 0", fuelAmount=0)
    assert_error_unchanged(state(engine_state="running"), "fillFuelTank", "stop the engine", fuelAmount=5)


def test_cruise_control():
    assert_error_unchanged(
        state(), "setCruiseControl", "start the engine", speed=60, activate=True, distanceToNextVehicle=50
    )
    world = state(engine_state="running")
    assert_error_unchanged(
        world, "setCruiseControl", "multiple of 5", speed=62, activate=True, distanceToNextVehicle=50
    )
    assert_error_unchanged(world, "setCruiseControl", "at most 120", speed=125, activate=True, distanceToNextVehicle=50)
    assert_error_unchanged(world, "setCruiseControl", "at least 0", speed=60, activate=True, distanceToNextVehicle=-1)
    out = call(world, "setCruiseControl", speed=65, activate=True, distanceToNextVehicle=100)
    assert world.cruise.active and world.cruise.speed == 65 and out["cruiseStatus"] == "active"
    assert (
        written("setCruiseControl", {"speed": 65, "activate": True, "distanceToNextVehicle": 100}, out)[
            "cruise_control_active"
        ]
        is True
    )
    call(world, "setCruiseControl", speed=65, activate=False, distanceToNextVehicle=100)
    assert not world.cruise.active and world.cruise.speed == 0.0


# ------------------------------------------------------------------ cabin and lights
def test_climate_preserves_unstated_settings():
    world = state(climate={"temperature": 20, "unit": "celsius", "fan_speed": 70, "mode": "cool"})
    out = call(world, "adjustClimateControl", temperature=72, unit="fahrenheit")
    assert (world.climate.temperature, world.climate.unit, world.climate.fan_speed, world.climate.mode) == (
        72,
        "fahrenheit",
        70,
        "cool",
    )
    assert out["fanSpeed"] == 70
    call(world, "adjustClimateControl", temperature=21, unit="celsius", fanSpeed=30, mode="heat")
    assert (world.climate.fan_speed, world.climate.mode) == (30, "heat")
    assert_error_unchanged(world, "adjustClimateControl", "at most 32", temperature=72, unit="celsius")
    assert_error_unchanged(world, "adjustClimateControl", "at least 60", temperature=20, unit="fahrenheit")
    assert_error_unchanged(world, "adjustClimateControl", "unit must be", temperature=20, unit="kelvin")
    assert_error_unchanged(world, "adjustClimateControl", "at most 100", temperature=20, unit="celsius", fanSpeed=150)
    assert_error_unchanged(world, "adjustClimateControl", "climate mode", temperature=20, unit="celsius", mode="turbo")


def test_headlights():
    world = state()
    out = call(world, "setHeadlights", mode="auto")
    assert world.headlights == "auto" and written("setHeadlights", {"mode": "auto"}, out)["headlights"] == "auto"
    assert_error_unchanged(world, "setHeadlights", "mode must be", mode="high")


# -------------------------------------------------------------------- status reads
@pytest.mark.parametrize(
    "option,key,value",
    [
        ("fuel", "fuel_level", 7.5),
        ("doors", "doors_locked", False),
        ("brakePedal", "brake_pressed", False),
        ("engine", "engine_running", False),
        ("parkingBrake", "parking_brake_engaged", False),
        ("headlights", "headlights", "off"),
    ],
)
def test_display_car_status_writes_only_its_fact(option, key, value):
    world = state(fuel_level=7.5)
    before = snap(world)
    out = call(world, "displayCarStatus", option=option)
    assert snap(world) == before
    writes = written("displayCarStatus", {"option": option}, out)
    assert writes == {"option": option, key: value}


def test_display_battery_and_climate_write_no_fact():
    world = state()
    for option in ("battery", "climate"):
        assert set(written("displayCarStatus", {"option": option}, call(world, "displayCarStatus", option=option))) == {
            "option"
        }
    assert "error" in call(world, "displayCarStatus", option="radio")


def test_tire_pressure_and_shop():
    world = state(tires={"front_left": 24.0, "front_right": 32.0, "rear_left": 32.0, "rear_right": 32.0})
    out = call(world, "check_tire_pressure")
    assert out["lowTires"] == ["front_left"] and out["healthyTirePressure"] is False
    assert written("check_tire_pressure", {}, out) == {"tire_pressure_ok": False}
    assert call(state(), "check_tire_pressure")["healthyTirePressure"] is True
    out = call(world, "find_nearest_tire_shop")
    assert written("find_nearest_tire_shop", {}, out) == {"shop_location": "456 Oakwood Avenue, Rivermist, 83214"}
    assert_error_unchanged(state(nearest_tire_shop=None), "find_nearest_tire_shop", "no tire shop")


def test_outside_temperature_postcondition_and_alternative():
    for name in ("get_outside_temperature_from_google", "get_outside_temperature_from_weather_com"):
        tool = DOM.tools[name]
        ok = tool(state(weather={"outside_temperature": 19.0}), {})
        assert ok["outsideTemperature"] == 19.0 and toolgate.postcondition(tool.spec, tool, {}, ok, None) == []
        assert written(name, {}, ok) == {"outside_temperature": 19.0}
    google_tool = DOM.tools["get_outside_temperature_from_google"]
    bad = google_tool(state(weather={"google_online": False}), {})
    errs = toolgate.postcondition(google_tool.spec, google_tool, {}, bad, None)
    assert bad["outsideTemperature"] is None and errs and "incomplete" in errs[0]
    weather_tool = DOM.tools["get_outside_temperature_from_weather_com"]
    assert toolgate.postcondition(
        weather_tool.spec, weather_tool, {}, weather_tool(state(weather={"weather_com_online": False}), {}), None
    )


# ---------------------------------------------------------------- navigation, trips
def test_navigation_and_guidance():
    world = state()
    assert_error_unchanged(world, "start_route_guidance", "no navigation destination")
    assert_error_unchanged(world, "set_navigation", "non-empty", destination="  ")
    out = call(world, "set_navigation", destination="New York")
    assert world.navigation.destination == "New York" and out["status"] == "Navigating to New York"
    assert written("set_navigation", {"destination": "New York"}, out) == {
        "destination": "New York",
        "destination_set": True,
    }
    out = call(world, "start_route_guidance")
    assert world.navigation.guidance_active and written("start_route_guidance", {}, out) == {"guidance_active": True}
    call(world, "set_navigation", destination="Rivermist")
    assert world.navigation.guidance_active is False  # a new destination resets guidance


def test_distance_and_feasibility():
    world = state(fuel_level=10.0, routes=[{"city_a": "Rivermist", "city_b": "Stonebrook", "miles": 150.0}])
    out = call(world, "estimate_distance", cityA="stonebrook", cityB="Rivermist")
    assert out == {"distance": 150.0, "unit": "miles"}
    assert written("estimate_distance", {"cityA": "Stonebrook", "cityB": "Rivermist"}, out)["distance"] == 150.0
    assert_error_unchanged(world, "estimate_distance", "no route", cityA="Rivermist", cityB="Silverpine")
    assert_error_unchanged(world, "estimate_distance", "different", cityA="Rivermist", cityB="rivermist")
    out = call(world, "estimate_drive_feasibility_by_mileage", distance=150.0)
    assert out == {"canDrive": True, "rangeMiles": 200.0}
    assert written("estimate_drive_feasibility_by_mileage", {"distance": 150.0}, out)["can_drive"] is True
    assert call(world, "estimate_drive_feasibility_by_mileage", distance=201)["canDrive"] is False
    assert_error_unchanged(world, "estimate_drive_feasibility_by_mileage", "more than 0", distance=0)


def test_conversions():
    world = state()
    out = call(world, "liter_to_gallon", liter=30)
    assert out == {"gallon": 7.93} and written("liter_to_gallon", {"liter": 30}, out) == {"liter": 30, "gallon": 7.93}
    out = call(world, "gallon_to_liter", gallon=10)
    assert out == {"liter": 37.85} and written("gallon_to_liter", {"gallon": 10}, out) == {"gallon": 10, "liter": 37.85}
    assert_error_unchanged(world, "liter_to_gallon", "at least 0", liter=-1)
    assert_error_unchanged(world, "gallon_to_liter", "must be a number", gallon="ten")


# ------------------------------------------------------------------ gate and snapshot
def test_prerequisites_gate_start_engine():
    spec = DOM.tools["startEngine"].spec
    args = {"ignitionMode": "START"}
    assert toolgate.precondition(spec, args, Scratchpad({"brake_pressed": True, "doors_locked": True})) == []
    errs = toolgate.precondition(spec, args, Scratchpad({"brake_pressed": True, "doors_locked": False}))
    assert len(errs) == 1 and "doors_locked" in errs[0] and "not_met" in errs[0]
    errs = toolgate.precondition(spec, args, Scratchpad({}))
    assert len(errs) == 2 and all("absent" in e for e in errs)
    fill = DOM.tools["fillFuelTank"].spec
    assert toolgate.precondition(fill, {"fuelAmount": 5}, Scratchpad({"engine_running": False})) == []
    assert toolgate.precondition(fill, {"fuelAmount": 5}, Scratchpad({"engine_running": True}))
    assert toolgate.precondition(fill, {"fuelAmount": 5}, Scratchpad({"engine_running": None}))  # unknown is not 'off'


def test_snapshot_is_deterministic_and_round_trips():
    def run() -> str:
        world = state(fuel_level=12.0, routes=[{"city_a": "A", "city_b": "B", "miles": 10}])
        for tool, args in [
            ("lockDoors", {"unlock": False, "door": "all"}),
            ("pressBrakePedal", {}),
            ("startEngine", {"ignitionMode": "START"}),
            ("setCruiseControl", {"speed": 55, "activate": True, "distanceToNextVehicle": 80}),
            ("set_navigation", {"destination": "B"}),
            ("start_route_guidance", {}),
            ("adjustClimateControl", {"temperature": 22, "unit": "celsius"}),
        ]:
            assert "error" not in call(world, tool, **args), tool
        return snap(world)

    first, second = run(), run()
    assert first == second
    again = DOM.load_state(json.loads(first))
    assert snap(again) == first
    with pytest.raises(ValueError):
        DOM.load_state({"doors": {"driver": "ajar"}})
    with pytest.raises(ValueError):
        DOM.load_state({"sunroof": "open"})
    with pytest.raises(ValueError):
        DOM.load_state({"fuel_level": 60.0})


# ------------------------------------------------------------------ worked solutions
SOLUTIONS = solution_paths("vehicle", at_least=42)
SLOT_VALUES = Path(__file__).resolve().parents[1] / "data_gen" / "slot_values" / "vehicle.json"


def test_slot_values_and_paraphrases_cover_the_vehicle_solutions():
    from forethought.kernel.solution_file import load_solution

    values = json.loads(SLOT_VALUES.read_text())
    for path in SOLUTIONS:
        sol = load_solution(path)
        for name, slot in sol.slots.items():
            assert len(values.get(slot.type, [])) >= 8, f"{path.name}: slot type {slot.type} needs >= 8 values"
            assert slot.value in values[slot.type], f"{path.name}: ${{{name}}}={slot.value!r} is not listed"
        for i, turn in enumerate(sol.turns):
            assert len(turn.paraphrases) >= 2, f"{path.name} turn {i}: needs >= 2 paraphrases"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("vehicle", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
