"""validate_args: located errors for a call's arguments; never raises (a ToolGate precondition)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from forethought.kernel.registry import ToolSpec
from forethought.kernel.registry import validate as validate_mod
from forethought.kernel.registry.callparse import parse_call
from forethought.kernel.registry.importers import load_registry
from forethought.kernel.registry.validate import validate_args

FIX = Path(__file__).parent / "fixtures" / "registries"
WEATHER = load_registry(FIX / "openai_tools.json")["get_weather"]
CLIMATE = load_registry(FIX / "bfcl_multi_domain.jsonl")["adjustClimateControl"]
EVENT = load_registry(FIX / "mcp_tools_list.json")["create_event"]


def test_valid_arguments():
    assert validate_args(WEATHER, {"city": "Paris, FR"}) == []
    assert validate_args(WEATHER, {"city": "Paris", "unit": "fahrenheit", "days": None}) == []
    assert validate_args(CLIMATE, parse_call("adjustClimateControl(temperature=21, unit='celsius')").args) == []
    event = {"title": "standup", "start": "2025-03-01T09:00:00Z", "attendees": [{"email": "a@b.c"}], "recurrence": None}
    assert validate_args(EVENT, event) == []


def test_missing_unknown_and_mismatched():
    assert validate_args(WEATHER, {"unit": "kelvin", "cty": "x", "days": 0}) == [
        "missing required parameter 'city'",
        "unknown parameter 'cty' (did you mean 'city'?)",
        "parameter 'unit': 'kelvin' is not one of ['celsius', 'fahrenheit']",
        "parameter 'days': 0 is less than the minimum of 1",
    ]
    assert validate_args(CLIMATE, {"temperature": "warm", "fanSpeed": 5.5}) == [
        "parameter 'temperature': 'warm' is not of type 'number'",
        "parameter 'fanSpeed': 5.5 is not of type 'integer'",
    ]
    assert validate_args(CLIMATE, {"temperature": True}) == ["parameter 'temperature': True is not of type 'number'"]


def test_nested_paths_and_formats():
    errors = validate_args(
        EVENT, {"title": "t", "start": "x", "attendees": [{"email": 3}], "recurrence": {"freq": "hourly"}}
    )
    assert errors == [
        "parameter 'attendees[0].email': 3 is not of type 'string'",
        "parameter 'recurrence.freq': 'hourly' is not one of ['daily', 'weekly', 'monthly']",
    ]
    flights = load_registry(FIX / "openai_tools.json")["search_flights"]
    # Formats are checked (those jsonschema can check without extra packages).
    assert validate_args(flights, {"origin": "SFO", "destination": "jfk", "date": "2025-02-30"}) == [
        "parameter 'destination': 'jfk' does not match '^[A-Z]{3}$'",
        "parameter 'date': '2025-02-30' is not a 'date'",
    ]


def test_additional_properties_schema_allows_extra_names():
    tool = ToolSpec(
        name="t", parameters={"type": "object", "properties": {}, "additionalProperties": {"type": "integer"}}
    )
    assert validate_args(tool, {"a": 1}) == []
    assert validate_args(tool, {"a": "x"}) == ["parameter 'a': 'x' is not of type 'integer'"]


def test_bad_input_is_reported_not_raised():
    assert validate_args(WEATHER, ["Paris"]) == ["arguments must be an object of name=value pairs, got array"]
    assert validate_args(WEATHER, None) == ["arguments must be an object of name=value pairs, got null"]
    assert validate_args(WEATHER, {1: "x"}) == ["argument names must be strings, got 1"]
    assert validate_args(None, {}) == [
        "cannot validate arguments of '?': AttributeError: 'NoneType' object has no attribute 'parameters'"
    ]  # type: ignore[arg-type]


def test_unusable_schemas_fail_closed():
    broken = ToolSpec(name="b", parameters={"type": "object", "properties": {"x": {"type": "strng"}}})
    assert validate_args(broken, {"x": "a"}) == [
        "tool 'b' has an unusable parameter schema: 'strng' is not valid under any of the given schemas"
    ]
    assert validate_args(broken, {}) != []  # even with nothing to check, the call is not let through
    remote = ToolSpec(
        name="r", parameters={"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}}
    )
    (err,) = validate_args(remote, {"x": 1})
    assert err.startswith("cannot validate arguments of 'r': ")


def test_validators_are_compiled_once_per_schema():
    validate_args(WEATHER, {"city": "a"})
    first = validate_mod._compiled(WEATHER.parameters)[0]
    validate_args(WEATHER, {"city": "b"})
    assert validate_mod._compiled(WEATHER.parameters)[0] is first


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3) | st.tuples(inner)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_values, st.dictionaries(st.sampled_from(["city", "unit", "days", "x"]) | st.integers(), _values)))
def test_never_raises_always_strings(args):
    for tool in (WEATHER, CLIMATE, EVENT):
        out = validate_args(tool, args)
        assert isinstance(out, list) and all(isinstance(e, str) for e in out)
