"""Vehicle-control tools (BFCL VehicleControlAPI style), over the simulated car only.

Scratchpad facts the tools establish (declared ``writes``) and require
(declared ``prerequisites``):

* ``doors_locked``   -- written by ``lockDoors`` and ``displayCarStatus(option='doors')``;
  required (truthy) by ``startEngine``.
* ``brake_pressed``  -- True only when the brake pedal is fully pressed; written by
  ``pressBrakePedal``, ``releaseBrakePedal`` and ``displayCarStatus(option='brakePedal')``;
  required (truthy) by ``startEngine``.
* ``engine_running`` -- written by ``startEngine``, ``stopEngine`` and ``displayCarStatus(option='engine')``;
  required True by ``setCruiseControl`` and False by ``fillFuelTank``.
* ``fuel_level``     -- written by ``fillFuelTank`` and ``displayCarStatus(option='fuel')``;
  required (present) by ``estimate_drive_feasibility_by_mileage``.
* ``destination_set`` -- written by ``set_navigation``; required by ``start_route_guidance``.

The scratchpad is what the agent *knows*; every tool also checks the car's
own state and fails with a ``ToolError`` when the car disagrees (e.g. a door
is still unlocked), validating before it changes anything.
"""

from __future__ import annotations

import enum
from typing import Literal

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError
from .state import DOOR_NAMES, VehicleState

DOMAIN = Domain(
    "vehicle",
    VehicleState,
    "A simulated car: doors, brake, engine, fuel, climate, lights, cruise control, tires and navigation.",
)
tool = DOMAIN.tool

MAX_BRAKE_FORCE = 1000.0  # newtons at pedal position 1.0
MILES_PER_GALLON = 20.0
LITERS_PER_GALLON = 3.78541
GALLONS_PER_LITER = 0.264172
HEALTHY_PSI = (30.0, 40.0)
MAX_CRUISE_SPEED = 120.0

DOORS_LOCKED = Prerequisite(key="doors_locked", sat=Sat(op="truthy"), description="all doors are locked (true)")
BRAKE_PRESSED = Prerequisite(
    key="brake_pressed", sat=Sat(op="truthy"), description="the brake pedal is fully pressed (true)"
)
ENGINE_RUNNING = Prerequisite(key="engine_running", sat=Sat(op="truthy"), description="the engine is running (true)")
ENGINE_OFF = Prerequisite(
    key="engine_running", sat=Sat(op="eq", value=False), description="the engine is stopped (engine_running is false)"
)
FUEL_KNOWN = Prerequisite(key="fuel_level", sat=Sat(op="not_null"), description="the current fuel level is known")
DESTINATION_SET = Prerequisite(
    key="destination_set", sat=Sat(op="truthy"), description="a navigation destination is set (true)"
)


class IgnitionMode(str, enum.Enum):
    """Ignition modes of ``startEngine``. An Enum rather than ``Literal["START"]``: a
    one-value Literal renders as JSON Schema ``const``, and the primitives treat only
    ``enum`` values as always grounded."""

    START = "START"


def _unlocked(state: VehicleState) -> list[str]:
    return [d for d in DOOR_NAMES if getattr(state.doors, d) == "unlocked"]


def _number(name: str, value: float, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError(f"{name} must be a number, got {value!r}")
    if lo is not None and value < lo:
        raise ToolError(f"{name} must be at least {lo:g}, got {value:g}")
    if hi is not None and value > hi:
        raise ToolError(f"{name} must be at most {hi:g}, got {value:g}")
    return float(value)


def _climate_status(state: VehicleState) -> dict:
    """The climate settings as adjustClimateControl and displayCarStatus report them."""
    climate = state.climate
    return {
        "currentTemperature": climate.temperature,
        "unit": climate.unit,
        "fanSpeed": climate.fan_speed,
        "climateMode": climate.mode,
    }


# ------------------------------------------------------------------ doors and brakes
@tool(side_effect=True, writes={"doors_locked": "result.allDoorsLocked"})
def lockDoors(
    state: VehicleState,
    unlock: bool,
    door: Literal["all", "driver", "passenger", "rear_left", "rear_right"],
) -> dict:
    """Lock or unlock one door of the car, or all four at once.

    Args:
        unlock: True to unlock the door(s), False to lock them.
        door: Which door: 'driver', 'passenger', 'rear_left', 'rear_right', or 'all'.
    """
    if not isinstance(unlock, bool):
        raise ToolError(f"unlock must be true or false, got {unlock!r}")
    if door != "all" and door not in DOOR_NAMES:
        raise ToolError(f"unknown door {door!r}; use one of {', '.join(DOOR_NAMES)} or 'all'")
    status = "unlocked" if unlock else "locked"
    for door_name in DOOR_NAMES if door == "all" else (door,):
        setattr(state.doors, door_name, status)
    remaining = _unlocked(state)
    return {
        "lockStatus": status,
        "remainingUnlockedDoors": len(remaining),
        "unlockedDoors": remaining,
        "allDoorsLocked": not remaining,
    }


@tool(side_effect=True, writes={"brake_pressed": "result.fullyPressed"})
def pressBrakePedal(state: VehicleState, pedalPosition: float = 1.0) -> dict:
    """Press the brake pedal to a position between 0 (released) and 1 (fully pressed).

    Args:
        pedalPosition: How far to press the pedal, from 0.0 to 1.0; 1.0 (fully pressed) by default.
    """
    pos = _number("pedalPosition", pedalPosition, 0.0, 1.0)
    force = pos * MAX_BRAKE_FORCE
    state.brake_pedal = "pressed" if pos > 0 else "released"
    state.brake_force = force
    return {"brakePedalStatus": state.brake_pedal, "brakePedalForce": force, "fullyPressed": force >= MAX_BRAKE_FORCE}


@tool(side_effect=True, writes={"brake_pressed": "const:false"})
def releaseBrakePedal(state: VehicleState) -> dict:
    """Release the brake pedal completely."""
    state.brake_pedal = "released"
    state.brake_force = 0.0
    return {"brakePedalStatus": "released", "brakePedalForce": 0.0}


@tool(side_effect=True, writes={"parking_brake_engaged": "result.parkingBrakeEngaged"})
def activateParkingBrake(state: VehicleState, mode: Literal["engage", "release"]) -> dict:
    """Engage or release the parking brake.

    Args:
        mode: 'engage' to set the parking brake, 'release' to release it.
    """
    want = {"engage": "engaged", "release": "released"}.get(mode)
    if want is None:
        raise ToolError(f"mode must be 'engage' or 'release', got {mode!r}")
    if state.parking_brake == want:
        raise ToolError(f"the parking brake is already {want}")
    state.parking_brake = want  # type: ignore[assignment]
    return {"parkingBrakeStatus": want, "parkingBrakeEngaged": want == "engaged"}


# ------------------------------------------------------------------------- engine
@tool(
    side_effect=True,
    prerequisites=[BRAKE_PRESSED, DOORS_LOCKED],
    writes={"engine_running": "result.engineRunning"},
)
def startEngine(state: VehicleState, ignitionMode: IgnitionMode) -> dict:
    """Start the engine; all doors must be locked and the brake pedal fully pressed.

    Args:
        ignitionMode: 'START' (push-button start; stop the engine with stopEngine).
    """
    if ignitionMode != "START":
        raise ToolError(f"ignitionMode must be 'START', got {ignitionMode!r}; use stopEngine to stop the engine")
    unlocked = _unlocked(state)
    if unlocked:
        raise ToolError(f"all doors must be locked before starting the engine; unlocked: {', '.join(unlocked)}")
    if state.brake_pedal != "pressed":
        raise ToolError("the brake pedal must be pressed when starting the engine")
    if state.brake_force < MAX_BRAKE_FORCE:
        raise ToolError("the brake pedal must be pressed fully before starting the engine")
    if state.fuel_level <= 0:
        raise ToolError("the fuel tank is empty")
    state.engine_state = "running"
    return {
        "engineState": "running",
        "engineRunning": True,
        "fuelLevel": state.fuel_level,
        "batteryVoltage": state.battery_voltage,
    }


@tool(side_effect=True, writes={"engine_running": "const:false"})
def stopEngine(state: VehicleState) -> dict:
    """Stop the engine (cruise control switches off with it)."""
    state.engine_state = "stopped"
    state.cruise.active = False
    state.cruise.speed = 0.0
    return {"engineState": "stopped", "engineRunning": False}


@tool(side_effect=True, prerequisites=[ENGINE_OFF], writes={"fuel_level": "result.fuelLevel"})
def fillFuelTank(state: VehicleState, fuelAmount: float) -> dict:
    """Add fuel to the tank, in gallons; the engine must be off and the tank must not overflow.

    Args:
        fuelAmount: Gallons of fuel to add (more than 0).
    """
    amount = _number("fuelAmount", fuelAmount)
    if amount <= 0:
        raise ToolError(f"fuelAmount must be more than 0, got {amount:g}")
    if state.engine_state == "running":
        raise ToolError("stop the engine before refuelling")
    total = state.fuel_level + amount
    if total > state.tank_capacity:
        raise ToolError(
            f"cannot add {amount:g} gallons: the tank holds {state.tank_capacity:g} and already has {state.fuel_level:g}"
        )
    state.fuel_level = round(total, 4)
    return {"fuelLevel": state.fuel_level, "tankCapacity": state.tank_capacity}


@tool(side_effect=True, prerequisites=[ENGINE_RUNNING], writes={"cruise_control_active": "result.cruiseActive"})
def setCruiseControl(state: VehicleState, speed: float, activate: bool, distanceToNextVehicle: float) -> dict:
    """Turn cruise control on or off at a speed (a multiple of 5 mph, up to 120); needs the engine running.

    Args:
        speed: Cruise speed in mph; a multiple of 5 between 0 and 120.
        activate: True to turn cruise control on, False to turn it off.
        distanceToNextVehicle: Distance to keep to the vehicle ahead, in metres.
    """
    target_speed = _number("speed", speed, 0.0, MAX_CRUISE_SPEED)
    if target_speed % 5 != 0:
        raise ToolError(f"speed must be a multiple of 5, got {target_speed:g}")
    gap = _number("distanceToNextVehicle", distanceToNextVehicle, 0.0)
    if not isinstance(activate, bool):
        raise ToolError(f"activate must be true or false, got {activate!r}")
    if state.engine_state != "running":
        raise ToolError("start the engine before using cruise control")
    state.cruise.active = activate
    state.cruise.speed = target_speed if activate else 0.0
    state.cruise.distance_to_next_vehicle = gap
    return {
        "cruiseStatus": "active" if activate else "inactive",
        "cruiseActive": activate,
        "currentSpeed": state.cruise.speed,
        "distanceToNextVehicle": gap,
    }


# ------------------------------------------------------------------ cabin and lights
@tool(side_effect=True)
def adjustClimateControl(
    state: VehicleState,
    temperature: float,
    unit: Literal["celsius", "fahrenheit"],
    fanSpeed: int | None = None,
    mode: Literal["auto", "cool", "heat", "defrost"] | None = None,
) -> dict:
    """Set the cabin temperature; fan speed and climate mode are kept unless given.

    Args:
        temperature: Target cabin temperature, in the given unit (16-32 celsius or 60-90 fahrenheit).
        unit: 'celsius' or 'fahrenheit'.
        fanSpeed: Fan speed from 0 to 100; omit to keep the current speed.
        mode: 'auto', 'cool', 'heat' or 'defrost'; omit to keep the current mode.
    """
    if unit not in ("celsius", "fahrenheit"):
        raise ToolError(f"unit must be 'celsius' or 'fahrenheit', got {unit!r}")
    lo, hi = (16.0, 32.0) if unit == "celsius" else (60.0, 90.0)
    target = _number("temperature", temperature, lo, hi)
    if fanSpeed is not None:
        if _number("fanSpeed", fanSpeed, 0, 100) != int(fanSpeed):
            raise ToolError(f"fanSpeed must be a whole number, got {fanSpeed!r}")
    if mode is not None and mode not in ("auto", "cool", "heat", "defrost"):
        raise ToolError(f"unknown climate mode {mode!r}")
    state.climate.temperature = target
    state.climate.unit = unit
    if fanSpeed is not None:
        state.climate.fan_speed = int(fanSpeed)
    if mode is not None:
        state.climate.mode = mode
    return _climate_status(state)


@tool(side_effect=True, writes={"headlights": "result.headlightStatus"})
def setHeadlights(state: VehicleState, mode: Literal["on", "off", "auto"]) -> dict:
    """Turn the headlights on, off, or to automatic.

    Args:
        mode: 'on', 'off' or 'auto'.
    """
    if mode not in ("on", "off", "auto"):
        raise ToolError(f"mode must be 'on', 'off' or 'auto', got {mode!r}")
    state.headlights = mode
    return {"headlightStatus": mode}


# -------------------------------------------------------------------- status reads
@tool(
    writes={
        "fuel_level": "result.fuelLevel",
        "doors_locked": "result.allDoorsLocked",
        "brake_pressed": "result.brakeFullyPressed",
        "engine_running": "result.engineRunning",
        "parking_brake_engaged": "result.parkingBrakeEngaged",
        "headlights": "result.headlightStatus",
    }
)
def displayCarStatus(
    state: VehicleState,
    option: Literal["fuel", "battery", "doors", "climate", "headlights", "parkingBrake", "brakePedal", "engine"],
) -> dict:
    """Show one part of the car's status (fuel, battery, doors, climate, lights, brakes or engine).

    Args:
        option: 'fuel', 'battery', 'doors', 'climate', 'headlights', 'parkingBrake', 'brakePedal' or 'engine'.
    """
    if option == "fuel":
        return {"fuelLevel": state.fuel_level, "tankCapacity": state.tank_capacity}
    if option == "battery":
        return {"batteryVoltage": state.battery_voltage}
    if option == "doors":
        return {"doorStatus": state.doors.model_dump(), "allDoorsLocked": not _unlocked(state)}
    if option == "climate":
        return {**_climate_status(state), "humidityLevel": state.climate.humidity}
    if option == "headlights":
        return {"headlightStatus": state.headlights}
    if option == "parkingBrake":
        return {"parkingBrakeStatus": state.parking_brake, "parkingBrakeEngaged": state.parking_brake == "engaged"}
    if option == "brakePedal":
        return {
            "brakePedalStatus": state.brake_pedal,
            "brakePedalForce": state.brake_force,
            "brakeFullyPressed": state.brake_force >= MAX_BRAKE_FORCE,
        }
    if option == "engine":
        return {"engineState": state.engine_state, "engineRunning": state.engine_state == "running"}
    raise ToolError(f"unknown status option {option!r}")


@tool(writes={"tire_pressure_ok": "result.healthyTirePressure"})
def check_tire_pressure(state: VehicleState) -> dict:
    """Read the pressure of all four tires (psi) and whether it is within the healthy range."""
    tires = state.tires
    lo, hi = HEALTHY_PSI
    pressures = tires.model_dump()
    low = [k for k, v in pressures.items() if v < lo]
    return {
        "frontLeftTirePressure": tires.front_left,
        "frontRightTirePressure": tires.front_right,
        "rearLeftTirePressure": tires.rear_left,
        "rearRightTirePressure": tires.rear_right,
        "lowTires": low,
        "healthyTirePressure": all(lo <= v <= hi for v in pressures.values()),
    }


@tool(writes={"shop_location": "result.shopLocation"})
def find_nearest_tire_shop(state: VehicleState) -> dict:
    """Find the address of the nearest tire shop."""
    if not state.nearest_tire_shop:
        raise ToolError("no tire shop found near the current location")
    return {"shopLocation": state.nearest_tire_shop}


def _has_reading(args: dict, result: dict, staged: object) -> str | None:
    reading = result.get("outsideTemperature")
    if isinstance(reading, bool) or not isinstance(reading, (int, float)):
        return "incomplete weather report: outsideTemperature is not a number"
    return None


def _weather_report(source: str, online: bool, state: VehicleState) -> dict:
    """What either weather service reports: the temperature, or none while that service is offline."""
    return {
        "source": source,
        "outsideTemperature": state.weather.outside_temperature if online else None,
        "unit": "celsius",
    }


@tool(
    writes={"outside_temperature": "result.outsideTemperature"},
    post=[_has_reading],
    alternatives=["get_outside_temperature_from_weather_com"],
)
def get_outside_temperature_from_google(state: VehicleState) -> dict:
    """Get the outside temperature (celsius) at the car's location from Google weather."""
    return _weather_report("google", state.weather.google_online, state)


@tool(
    writes={"outside_temperature": "result.outsideTemperature"},
    post=[_has_reading],
    alternatives=["get_outside_temperature_from_google"],
)
def get_outside_temperature_from_weather_com(state: VehicleState) -> dict:
    """Get the outside temperature (celsius) at the car's location from weather.com."""
    return _weather_report("weather.com", state.weather.weather_com_online, state)


# ---------------------------------------------------------------- navigation, trips
@tool(side_effect=True, writes={"destination_set": "const:true"})
def set_navigation(state: VehicleState, destination: str) -> dict:
    """Set the navigation destination (a city or street address); any active guidance is reset.

    Args:
        destination: The place to navigate to.
    """
    if not isinstance(destination, str) or not destination.strip():
        raise ToolError("destination must be a non-empty place name or address")
    state.navigation.destination = destination.strip()
    state.navigation.guidance_active = False
    return {"status": f"Navigating to {state.navigation.destination}", "destination": state.navigation.destination}


@tool(side_effect=True, prerequisites=[DESTINATION_SET], writes={"guidance_active": "const:true"})
def start_route_guidance(state: VehicleState) -> dict:
    """Start turn-by-turn guidance to the destination set in the navigation system."""
    dest = state.navigation.destination
    if not dest:
        raise ToolError("no navigation destination is set")
    state.navigation.guidance_active = True
    return {"guidanceStatus": "active", "destination": dest}


def _route(state: VehicleState, city_a: str, city_b: str):
    na, nb = city_a.strip().lower(), city_b.strip().lower()
    for route in state.routes:
        ra, rb = route.city_a.lower(), route.city_b.lower()
        if (ra, rb) in ((na, nb), (nb, na)):
            return route
    return None


@tool(writes={"distance": "result.distance"})
def estimate_distance(state: VehicleState, cityA: str, cityB: str) -> dict:
    """Estimate the driving distance in miles between two cities.

    Args:
        cityA: The first city.
        cityB: The second city.
    """
    if cityA.strip().lower() == cityB.strip().lower():
        raise ToolError("cityA and cityB must be different cities")
    route = _route(state, cityA, cityB)
    if route is None:
        raise ToolError(f"no route known between {cityA} and {cityB}")
    return {"distance": route.miles, "unit": "miles"}


@tool(prerequisites=[FUEL_KNOWN], writes={"can_drive": "result.canDrive"})
def estimate_drive_feasibility_by_mileage(state: VehicleState, distance: float) -> dict:
    """Estimate whether the car can drive a distance (miles) on the fuel currently in the tank.

    Args:
        distance: The distance to drive, in miles.
    """
    miles = _number("distance", distance)
    if miles <= 0:
        raise ToolError(f"distance must be more than 0, got {miles:g}")
    range_miles = round(state.fuel_level * MILES_PER_GALLON, 2)
    return {"canDrive": range_miles >= miles, "rangeMiles": range_miles}


@tool(writes={"gallon": "result.gallon"})
def liter_to_gallon(state: VehicleState, liter: float) -> dict:
    """Convert liters to gallons (rounded to 2 decimals).

    Args:
        liter: Amount in liters (0 or more).
    """
    liters = _number("liter", liter, 0.0)
    return {"gallon": round(liters * GALLONS_PER_LITER, 2)}


@tool(writes={"liter": "result.liter"})
def gallon_to_liter(state: VehicleState, gallon: float) -> dict:
    """Convert gallons to liters (rounded to 2 decimals).

    Args:
        gallon: Amount in gallons (0 or more).
    """
    gallons = _number("gallon", gallon, 0.0)
    return {"liter": round(gallons * LITERS_PER_GALLON, 2)}
