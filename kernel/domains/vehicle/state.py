"""State of the simulated vehicle (BFCL VehicleControlAPI style).

Everything a tool reads or changes lives here: engine, doors, brake pedal,
parking brake, fuel, climate, lights, cruise control, tires, navigation, and
the deterministic "outside world" the car's services report (outside
temperature per weather feed, nearest tire shop, known road distances).
The car as it starts is ``data.json`` beside this module, a section per
record (the models hold structure only); a scenario overrides any field, and
a record it gives in part keeps the file's values for the rest.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData

DoorName = Literal["driver", "passenger", "rear_left", "rear_right"]
DOOR_NAMES: tuple[str, ...] = ("driver", "passenger", "rear_left", "rear_right")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Doors(_M, ReferenceData):
    data_section = ("doors",)
    driver: Literal["locked", "unlocked"]
    passenger: Literal["locked", "unlocked"]
    rear_left: Literal["locked", "unlocked"]
    rear_right: Literal["locked", "unlocked"]


class Climate(_M, ReferenceData):
    data_section = ("climate",)
    temperature: float  # as last set, in `unit`
    unit: Literal["celsius", "fahrenheit"]
    fan_speed: int = Field(ge=0, le=100)
    mode: Literal["auto", "cool", "heat", "defrost"]
    humidity: float


class Cruise(_M, ReferenceData):
    data_section = ("cruise",)
    active: bool
    speed: float  # mph
    distance_to_next_vehicle: float  # metres


class Tires(_M, ReferenceData):
    data_section = ("tires",)
    front_left: float  # psi
    front_right: float
    rear_left: float
    rear_right: float


class Navigation(_M, ReferenceData):
    data_section = ("navigation",)
    destination: str | None
    guidance_active: bool


class Route(_M):
    city_a: str
    city_b: str
    miles: float = Field(gt=0)


class Weather(_M, ReferenceData):
    """What the two outside-temperature services report (deterministic)."""

    data_section = ("weather",)
    outside_temperature: float  # celsius
    google_online: bool  # False: the Google feed has no reading for the car's location
    weather_com_online: bool


class VehicleState(_M, ReferenceData):
    engine_state: Literal["running", "stopped"]
    doors: Doors
    brake_pedal: Literal["pressed", "released"]
    brake_force: float = Field(ge=0, le=1000)  # newtons; 1000 = fully pressed
    parking_brake: Literal["engaged", "released"]
    fuel_level: float = Field(ge=0)  # gallons
    tank_capacity: float = Field(gt=0)  # gallons
    battery_voltage: float
    climate: Climate
    headlights: Literal["on", "off", "auto"]
    cruise: Cruise
    tires: Tires
    nearest_tire_shop: str | None
    navigation: Navigation
    routes: list[Route]
    weather: Weather

    @model_validator(mode="after")
    def _fuel_fits(self) -> VehicleState:
        if self.fuel_level > self.tank_capacity:
            raise ValueError(f"fuel_level {self.fuel_level:g} exceeds tank_capacity {self.tank_capacity:g}")
        return self
