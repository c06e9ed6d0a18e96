"""State of the simulated travel booking service (BFCL TravelAPI style).

Reference data (airports with their coordinates, the nearest airport of each
city, exchange rates) lives in the state defaults so that a scenario can
override it; fares are a deterministic function of the great-circle distance
between two airports and the travel class (see ``tools.fare``). There is no
clock: ``current_date`` is part of the state.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Airport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    city: str
    country: str
    lat: float
    lon: float


class CreditCard(BaseModel):
    model_config = ConfigDict(extra="forbid")
    card_number: str
    cardholder_name: str
    expiration_date: str  # MM/YYYY
    card_verification_number: int
    balance: float = 0.0


class Insurance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    insurance_id: str
    insurance_type: str
    insurance_cost: float
    card_id: str


class Booking(BaseModel):
    model_config = ConfigDict(extra="forbid")
    card_id: str
    travel_date: str
    travel_from: str
    travel_to: str
    travel_class: Literal["economy", "business", "first"]
    travel_cost: float
    status: Literal["confirmed", "cancelled"] = "confirmed"
    insurance: Insurance | None = None


class SupportCase(BaseModel):
    model_config = ConfigDict(extra="forbid")
    case_id: str
    booking_id: str
    message: str


def _airports() -> dict[str, Airport]:
    rows = [
        ("ATL", "Hartsfield-Jackson Atlanta International Airport", "Atlanta", "United States", 33.64, -84.43),
        ("BOS", "Logan International Airport", "Boston", "United States", 42.36, -71.01),
        ("DEN", "Denver International Airport", "Denver", "United States", 39.86, -104.67),
        ("DFW", "Dallas/Fort Worth International Airport", "Dallas", "United States", 32.90, -97.04),
        ("IAD", "Washington Dulles International Airport", "Washington", "United States", 38.95, -77.46),
        ("IAH", "George Bush Intercontinental Airport", "Houston", "United States", 29.99, -95.34),
        ("JFK", "John F. Kennedy International Airport", "New York", "United States", 40.64, -73.78),
        ("LAS", "Harry Reid International Airport", "Las Vegas", "United States", 36.08, -115.15),
        ("LAX", "Los Angeles International Airport", "Los Angeles", "United States", 33.94, -118.41),
        ("MCO", "Orlando International Airport", "Orlando", "United States", 28.43, -81.31),
        ("MIA", "Miami International Airport", "Miami", "United States", 25.80, -80.29),
        ("ORD", "O'Hare International Airport", "Chicago", "United States", 41.98, -87.90),
        ("PHX", "Phoenix Sky Harbor International Airport", "Phoenix", "United States", 33.43, -112.01),
        ("SEA", "Seattle-Tacoma International Airport", "Seattle", "United States", 47.45, -122.31),
        ("SFO", "San Francisco International Airport", "San Francisco", "United States", 37.62, -122.38),
        ("YYZ", "Toronto Pearson International Airport", "Toronto", "Canada", 43.68, -79.63),
        ("MEX", "Mexico City International Airport", "Mexico City", "Mexico", 19.44, -99.07),
        ("LHR", "Heathrow Airport", "London", "United Kingdom", 51.47, -0.45),
        ("CDG", "Charles de Gaulle Airport", "Paris", "France", 49.01, 2.55),
        ("AMS", "Amsterdam Airport Schiphol", "Amsterdam", "Netherlands", 52.31, 4.76),
        ("BER", "Berlin Brandenburg Airport", "Berlin", "Germany", 52.37, 13.50),
        ("MAD", "Adolfo Suarez Madrid-Barajas Airport", "Madrid", "Spain", 40.49, -3.57),
        ("FCO", "Leonardo da Vinci-Fiumicino Airport", "Rome", "Italy", 41.80, 12.25),
        ("MUC", "Munich Airport", "Munich", "Germany", 48.35, 11.79),
        ("LIS", "Humberto Delgado Airport", "Lisbon", "Portugal", 38.77, -9.13),
        ("DUB", "Dublin Airport", "Dublin", "Ireland", 53.42, -6.27),
        ("ZRH", "Zurich Airport", "Zurich", "Switzerland", 47.46, 8.55),
        ("VIE", "Vienna International Airport", "Vienna", "Austria", 48.11, 16.57),
        ("CPH", "Copenhagen Airport", "Copenhagen", "Denmark", 55.62, 12.66),
        ("DXB", "Dubai International Airport", "Dubai", "United Arab Emirates", 25.25, 55.36),
        ("SIN", "Singapore Changi Airport", "Singapore", "Singapore", 1.36, 103.99),
        ("HKG", "Hong Kong International Airport", "Hong Kong", "China", 22.31, 113.91),
        ("HND", "Haneda Airport", "Tokyo", "Japan", 35.55, 139.78),
        ("SYD", "Sydney Kingsford Smith Airport", "Sydney", "Australia", -33.94, 151.18),
    ]
    return {c: Airport(name=n, city=city, country=co, lat=la, lon=lo) for c, n, city, co, la, lo in rows}


# The nearest airport of every known city (the airport cities themselves and their surroundings).
_NEAREST = {
    "MIA": [
        "Miami",
        "Miami Beach",
        "Coral Gables",
        "Hialeah",
        "Doral",
        "Key Biscayne",
        "Homestead",
        "Kendall",
        "North Miami",
    ],
    "LAX": [
        "Los Angeles",
        "Santa Monica",
        "Pasadena",
        "Long Beach",
        "Burbank",
        "Inglewood",
        "Malibu",
        "Glendale",
        "Beverly Hills",
        "Culver City",
    ],
    "JFK": [
        "New York",
        "Brooklyn",
        "Queens",
        "Manhattan",
        "Bronx",
        "Staten Island",
        "Long Island City",
        "Yonkers",
        "Hempstead",
    ],
    "SFO": [
        "San Francisco",
        "Palo Alto",
        "San Mateo",
        "Daly City",
        "Redwood City",
        "Burlingame",
        "Menlo Park",
        "South San Francisco",
        "Millbrae",
    ],
    "ORD": [
        "Chicago",
        "Evanston",
        "Oak Park",
        "Skokie",
        "Schaumburg",
        "Des Plaines",
        "Naperville",
        "Elmhurst",
        "Arlington Heights",
    ],
    "BOS": ["Boston", "Cambridge", "Somerville", "Brookline", "Quincy", "Newton", "Medford", "Salem", "Waltham"],
    "LHR": ["London", "Windsor", "Slough", "Reading", "Richmond", "Twickenham", "Staines", "Hounslow", "Uxbridge"],
    "CDG": ["Paris", "Versailles", "Saint-Denis", "Roissy", "Meaux", "Chantilly", "Senlis", "Creil", "Montreuil"],
    "ATL": ["Atlanta"],
    "DEN": ["Denver", "Boulder"],
    "DFW": ["Dallas", "Fort Worth"],
    "IAD": ["Washington"],
    "IAH": ["Houston"],
    "LAS": ["Las Vegas"],
    "MCO": ["Orlando"],
    "PHX": ["Phoenix"],
    "SEA": ["Seattle", "Tacoma"],
    "YYZ": ["Toronto"],
    "MEX": ["Mexico City"],
    "AMS": ["Amsterdam"],
    "BER": ["Berlin"],
    "MAD": ["Madrid"],
    "FCO": ["Rome"],
    "MUC": ["Munich"],
    "LIS": ["Lisbon"],
    "DUB": ["Dublin"],
    "ZRH": ["Zurich"],
    "VIE": ["Vienna"],
    "CPH": ["Copenhagen"],
    "DXB": ["Dubai"],
    "SIN": ["Singapore"],
    "HKG": ["Hong Kong"],
    "HND": ["Tokyo", "Yokohama"],
    "SYD": ["Sydney"],
}


def _city_airports() -> dict[str, str]:
    return {city: code for code, cities in _NEAREST.items() for city in cities}


def _exchange_rates() -> dict[str, float]:
    # Units of each currency per 1 USD (direct quotes against USD only).
    return {
        "EUR": 0.92,
        "GBP": 0.8,
        "JPY": 150.0,
        "CAD": 1.35,
        "AUD": 1.5,
        "CHF": 0.9,
        "CNY": 7.2,
        "INR": 83.0,
        "MXN": 17.0,
        "BRL": 5.0,
        "SGD": 1.35,
        "AED": 3.67,
    }


class TravelState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    current_date: str = "2026-03-01"  # YYYY-MM-DD; the simulation has no clock
    # reference data
    airports: dict[str, Airport] = Field(default_factory=_airports)
    city_airports: dict[str, str] = Field(default_factory=_city_airports)  # city -> nearest airport code
    exchange_rates: dict[str, float] = Field(default_factory=_exchange_rates)  # per 1 USD
    # the session
    access_token: str | None = None
    token_scope: str | None = None
    user_first_name: str | None = None
    user_last_name: str | None = None
    # the account
    credit_cards: dict[str, CreditCard] = Field(default_factory=dict)
    bookings: dict[str, Booking] = Field(default_factory=dict)
    budget_limit: float | None = None
    support_cases: list[SupportCase] = Field(default_factory=list)
    next_booking_number: int = 1001
