"""State of the simulated vehicle (BFCL VehicleControlAPI style).

Everything a tool reads or changes lives here: engine, doors, brake pedal,
parking brake, fuel, climate, lights, cruise control, tires, navigation, and
the deterministic "outside world" the car's services report (outside
temperature per weather feed, nearest tire shop, known road distances).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DoorName = Literal["driver", "passenger", "rear_left", "rear_right"]
DOOR_NAMES: tuple[str, ...] = ("driver", "passenger", "rear_left", "rear_right")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Doors(_M):
    driver: Literal["locked", "unlocked"] = "unlocked"
    passenger: Literal["locked", "unlocked"] = "unlocked"
    rear_left: Literal["locked", "unlocked"] = "unlocked"
    rear_right: Literal["locked", "unlocked"] = "unlocked"


class Climate(_M):
    temperature: float = 22.0  # as last set, in `unit`
    unit: Literal["celsius", "fahrenheit"] = "celsius"
    fan_speed: int = Field(default=50, ge=0, le=100)
    mode: Literal["auto", "cool", "heat", "defrost"] = "auto"
    humidity: float = 50.0


class Cruise(_M):
    active: bool = False
    speed: float = 0.0  # mph
    distance_to_next_vehicle: float = 0.0  # metres


class Tires(_M):
    front_left: float = 32.0  # psi
    front_right: float = 32.0
    rear_left: float = 32.0
    rear_right: float = 32.0


class Navigation(_M):
    destination: str | None = None
    guidance_active: bool = False


class Route(_M):
    city_a: str
    city_b: str
    miles: float = Field(gt=0)


class Weather(_M):
    """What the two outside-temperature services report (deterministic)."""

    outside_temperature: float = 18.0  # celsius
    google_online: bool = True  # False: the Google feed has no reading for the car's location
    weather_com_online: bool = True


class VehicleState(_M):
    engine_state: Literal["running", "stopped"] = "stopped"
    doors: Doors = Field(default_factory=Doors)
    brake_pedal: Literal["pressed", "released"] = "released"
    brake_force: float = Field(default=0.0, ge=0, le=1000)  # newtons; 1000 = fully pressed
    parking_brake: Literal["engaged", "released"] = "released"
    fuel_level: float = Field(default=15.0, ge=0)  # gallons
    tank_capacity: float = Field(default=50.0, gt=0)  # gallons
    battery_voltage: float = 12.6
    climate: Climate = Field(default_factory=Climate)
    headlights: Literal["on", "off", "auto"] = "off"
    cruise: Cruise = Field(default_factory=Cruise)
    tires: Tires = Field(default_factory=Tires)
    nearest_tire_shop: str | None = "456 Oakwood Avenue, Rivermist, 83214"
    navigation: Navigation = Field(default_factory=Navigation)
    routes: list[Route] = Field(default_factory=list)
    weather: Weather = Field(default_factory=Weather)

    @model_validator(mode="after")
    def _fuel_fits(self) -> VehicleState:
        if self.fuel_level > self.tank_capacity:
            raise ValueError(f"fuel_level {self.fuel_level:g} exceeds tank_capacity {self.tank_capacity:g}")
        return self
