"""Importing OpenAI, MCP and BFCL registries into ToolSpecs: shapes, normalisation, located errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import Draft202012Validator

from forethought.errors import UserError
from forethought.kernel.registry import Registry, ToolSpec
from forethought.kernel.registry.importers import RegistryError, detect_format, load_registry, parse_registry

FIX = Path(__file__).parent / "fixtures" / "registries"
BROKEN = FIX / "broken"


def _fn(name="f", **params):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": params}}}


def _one(data, fmt=None) -> ToolSpec:
    (tool,) = parse_registry(data, fmt, source="t.json")
    return tool


def _err(data, fmt=None, source="t.json") -> str:
    with pytest.raises(RegistryError) as info:
        parse_registry(data, fmt, source=source)
    return str(info.value)


# -- the fixture files ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt", "names"),
    [
        ("openai_tools.json", "openai", ["get_weather", "search_flights", "send_email", "get_time"]),
        ("openai_legacy_functions.json", "openai", ["create_ticket", "close_ticket"]),
        ("mcp_tools_list.json", "mcp", ["read_file", "create_event", "list_directory"]),
        (
            "bfcl_multi_domain.jsonl",
            "bfcl",
            ["cd", "ls", "find", "sort", "book_flight", "compute_exchange_rate", "plan_route",
             "adjustClimateControl", "startEngine", "lockDoors"],
        ),
        ("bfcl_list.json", "bfcl", ["math.hypot", "echo"]),
    ],
)  # fmt: skip
def test_fixture_files_import(name, fmt, names):
    reg = load_registry(FIX / name)
    assert isinstance(reg, Registry)
    assert reg.names == names
    assert reg.name == Path(name).stem
    for tool in reg:
        assert tool.source == fmt
        assert tool.prerequisites == [] and tool.writes == {}
        # Whatever the importer produced is valid JSON Schema.
        Draft202012Validator.check_schema(tool.parameters)
        if tool.output_schema is not None:
            Draft202012Validator.check_schema(tool.output_schema)
    # The explicit format gives the same result as detection.
    assert [t.model_dump() for t in load_registry(FIX / name, fmt=fmt)] == [t.model_dump() for t in reg]


def test_openai_fixture_details():
    reg = load_registry(FIX / "openai_tools.json")
    weather = reg["get_weather"]
    assert weather.description == "Get the current weather for a city."
    assert weather.required == ["city"]
    assert weather.param_schema("unit") == {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
    assert weather.param_schema("days")["type"] == ["integer", "null"]
    assert weather.parameters["additionalProperties"] is False
    flights = reg["search_flights"]
    assert flights.param_schema("passengers")["required"] == ["adults"]
    assert flights.param_schema("cabins")["items"]["enum"] == ["economy", "premium", "business", "first"]
    # OpenAPI's nullable: true becomes a type union.
    assert flights.param_schema("max_price") == {"type": ["number", "null"]}
    # x- extensions are kept, not dropped.
    assert reg["send_email"].parameters["x-owner"] == "mail-team"
    # A function without parameters takes none.
    assert reg["get_time"].parameters == {"type": "object", "properties": {}, "required": []}


# -- OpenAI shapes -------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        [_fn("a")],
        {"tools": [_fn("a")]},
        [_fn("a")["function"]],  # bare function objects
        {"functions": [_fn("a")["function"]]},  # the older shape
        {"type": "function", "name": "a", "parameters": {"type": "object", "properties": {}}},  # Responses API
        _fn("a"),  # a single tool
    ],
)
def test_openai_shapes(data):
    tool = _one(data)
    assert (tool.name, tool.source) == ("a", "openai")


def test_openai_text_and_bytes_input():
    text = json.dumps({"tools": [_fn("a", x={"type": "integer"})]})
    assert _one(text).param_names == ["x"]
    assert _one(("\ufeff" + text).encode()).param_names == ["x"]


def test_openai_errors():
    assert _err([{"type": "web_search"}]) == (
        "t.json: tool #0: type: unsupported tool type 'web_search' (only 'function' tools can be imported)"
    )
    bad = _fn("a")
    bad["function"]["paramters"] = {}
    assert _err([bad]) == "t.json: tool #0 'a': paramters: unknown openai tool field (did you mean 'parameters'?)"
    bad = _fn("a")
    bad["function"]["strict"] = "yes"
    assert _err([bad]) == "t.json: tool #0 'a': strict: expected true or false, got 'yes'"
    assert _err({"model": "x", "tools": []}, fmt="openai") == (
        "t.json: unexpected top-level key 'model'; expected 'tools' or 'functions'"
    )
    assert _err([_fn("a", x={"type": "dict"})]) == (
        "t.json: tool #0 'a': parameters.properties.x.type: unknown type 'dict' (a BFCL type name; pass fmt=bfcl)"
    )
    assert _err([_fn("a", x={"type": "strng"})]) == (
        "t.json: tool #0 'a': parameters.properties.x.type: unknown type 'strng' (did you mean 'string'?)"
    )


def test_schema_errors_are_located():
    assert _err([_fn("a", x={"type": "string", "requried": True})]) == (
        "t.json: tool #0 'a': parameters.properties.x.requried: unknown JSON Schema keyword 'requried'"
        " (did you mean 'required'?)"
    )
    # Value shapes are checked against the meta-schema.
    assert _err([_fn("a", x={"type": "integer", "minimum": "5"})]) == (
        "t.json: tool #0 'a': parameters.properties.x.minimum: '5' is not of type 'number'"
    )
    assert _err([_fn("a", x={"type": "array", "items": [{"type": "string"}], "minItems": -1})]).startswith(
        "t.json: tool #0 'a': parameters.properties.x.minItems: -1 is less than the minimum of 0"
    )
    arr = {"type": "function", "function": {"name": "a", "parameters": {"type": "array"}}}
    assert (
        _err([arr]) == "t.json: tool #0 'a': parameters.type: a tool's parameters must be an object schema, got 'array'"
    )
    assert (
        _err([_fn("a", x={"enum": []})])
        == "t.json: tool #0 'a': parameters.properties.x.enum: expected a non-empty array, got []"
    )
    assert (
        _err([_fn("a", x=[1])]) == "t.json: tool #0 'a': parameters.properties.x: expected a schema object, got array"
    )


def test_draft07_tuple_items_become_prefix_items():
    tool = _one(
        [_fn("a", pt={"type": "array", "items": [{"type": "number"}, {"type": "number"}], "additionalItems": False})]
    )
    assert tool.param_schema("pt") == {"type": "array", "prefixItems": [{"type": "number"}] * 2, "items": False}


# -- MCP -------------------------------------------------------------------------


def test_mcp_fixture_details():
    reg = load_registry(FIX / "mcp_tools_list.json")
    read = reg["read_file"]
    # anyOf [X, null] -> X made nullable, outer title/default kept.
    assert read.param_schema("encoding") == {"type": ["string", "null"], "default": None, "title": "Encoding"}
    assert read.param_schema("max_bytes") == {
        "type": ["integer", "null"], "minimum": 1, "default": None, "title": "Max Bytes",
        "description": "Stop after this many bytes.",
    }  # fmt: skip
    assert read.side_effect is False  # readOnlyHint: true
    assert read.output_schema is None

    event = reg["create_event"]
    assert event.side_effect is True  # readOnlyHint: false
    assert "$defs" not in event.parameters
    attendee = event.param_schema("attendees")["items"]
    assert attendee["title"] == "Attendee" and attendee["required"] == ["email"]
    # $ref with a sibling default: the referring site's annotations win.
    assert event.param_schema("priority") == {
        "type": "string", "enum": ["low", "normal", "high"], "title": "Priority", "default": "normal",
    }  # fmt: skip
    rec = event.param_schema("recurrence")
    assert rec["type"] == ["object", "null"] and rec["description"] == "Repeat rule, if any."
    assert rec["properties"]["until"]["type"] == ["string", "null"]
    assert event.output_schema["required"] == ["event_id", "created"]

    # A recursive $ref stays a reference into $defs, and still validates.
    out = reg["list_directory"].output_schema
    assert out["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    validator = Draft202012Validator(out)
    assert validator.is_valid({"root": {"name": "a", "children": [{"name": "b", "children": []}]}})
    assert not validator.is_valid({"root": {"name": "a", "children": [{"children": []}]}})


def _mcp(tool: dict, envelope=True):
    result = {"tools": [tool]}
    return {"jsonrpc": "2.0", "id": 1, "result": result} if envelope else result


def _mcp_tool(**props):
    return {"name": "t", "inputSchema": {"type": "object", "properties": props}}


def test_mcp_shapes():
    assert _one(_mcp(_mcp_tool())).source == "mcp"
    assert _one(_mcp(_mcp_tool(), envelope=False)).source == "mcp"
    assert _one([_mcp_tool()]).source == "mcp"  # a bare list of MCP tools


def test_mcp_nullable_enum_gets_none():
    tool = _one(_mcp(_mcp_tool(u={"anyOf": [{"enum": ["c", "f"], "type": "string"}, {"type": "null"}]})))
    assert tool.param_schema("u") == {"enum": ["c", "f", None], "type": ["string", "null"]}
    assert Draft202012Validator(tool.parameters).is_valid({"u": None})


def test_mcp_anyof_of_several_types_kept():
    schema = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
    assert _one(_mcp(_mcp_tool(v=schema))).param_schema("v") == schema


def test_mcp_ref_with_validation_siblings_uses_allof():
    tool = _mcp_tool(n={"$ref": "#/$defs/N", "maximum": 3, "description": "d"})
    tool["inputSchema"]["$defs"] = {"N": {"type": "integer"}}
    assert _one(_mcp(tool)).param_schema("n") == {"description": "d", "allOf": [{"type": "integer"}, {"maximum": 3}]}


def test_mcp_ref_through_definitions_and_escaped_pointer():
    tool = _mcp_tool(a={"$ref": "#/definitions/a~1b"})
    tool["inputSchema"]["definitions"] = {"a/b": {"type": "string"}}
    assert _one(_mcp(tool)).param_schema("a") == {"type": "string"}


def test_mcp_errors():
    assert _err(_mcp(_mcp_tool(a={"$ref": "https://example.com/s.json"}))) == (
        "t.json: tool #0 't': inputSchema.properties.a.$ref: only local references ('#/...') are supported,"
        " got 'https://example.com/s.json'"
    )
    bad_def = _mcp_tool(a={"$ref": "#/$defs/A"})
    bad_def["inputSchema"]["$defs"] = {"A": {"type": "object", "properties": {"x": {"type": "float"}}}}
    assert (
        _err(_mcp(bad_def))
        == "t.json: tool #0 't': inputSchema.$defs.A.properties.x.type: unknown type 'float' (a BFCL type name; pass fmt=bfcl)"
    )
    assert _err(_mcp({"name": "t", "description": "d"})) == (
        "t.json: tool #0 't': inputSchema: missing (an MCP tool must declare its inputSchema)"
    )
    assert _err(_mcp({**_mcp_tool(), "annotations": {"readOnly": True}})) == (
        "t.json: tool #0 't': annotations.readOnly: unknown MCP tool annotation (did you mean 'readOnlyHint'?)"
    )
    assert _err(_mcp({**_mcp_tool(), "outputSchema": {"type": "object", "properties": {"x": {"type": "nope"}}}})) == (
        "t.json: tool #0 't': outputSchema.properties.x.type: unknown type 'nope'"
    )
    assert (
        _err({"jsonrpc": "2.0", "id": 1, "result": {"tool": []}})
        == "t.json: missing 'tools' (an MCP tools/list result)"
    )


# -- BFCL ------------------------------------------------------------------------


def test_bfcl_type_normalisation():
    reg = load_registry(FIX / "bfcl_multi_domain.jsonl")
    assert reg["book_flight"].param_schema("travel_cost")["type"] == "number"  # float
    assert reg["plan_route"].param_schema("waypoints")["type"] == "array"  # tuple
    assert reg["plan_route"].param_schema("waypoints")["items"] == {"type": "number"}
    assert reg["plan_route"].param_schema("options")["type"] == "object"  # dict
    assert "type" not in reg["sort"].param_schema("key")  # any: no constraint
    assert reg["cd"].parameters["type"] == "object"
    assert reg["cd"].output_schema == {
        "type": "object",
        "properties": {"current_working_directory": {"type": "string", "description": "The new working directory."}},
    }


def test_bfcl_prose_enums_and_defaults():
    reg = load_registry(FIX / "bfcl_multi_domain.jsonl")
    climate = reg["adjustClimateControl"]
    assert climate.param_schema("unit")["enum"] == ["celsius", "fahrenheit"]
    assert climate.param_schema("unit")["default"] == "celsius"
    assert climate.param_schema("unit")["description"].endswith("Default is 'celsius'.")  # prose kept
    assert climate.param_schema("fanSpeed")["default"] == 50
    assert climate.param_schema("mode")["default"] == "auto"
    assert reg["startEngine"].param_schema("ignitionMode")["enum"] == ["START", "STOP"]
    assert reg["book_flight"].param_schema("travel_class")["enum"] == ["economy", "business", "first"]
    assert reg["ls"].param_schema("a")["default"] is False
    assert reg["find"].param_schema("path")["default"] == "."
    assert "default" not in reg["find"].param_schema("name")  # "Default is None"
    opts = reg["plan_route"].param_schema("options")["properties"]  # nested dict properties too
    assert opts["avoid_tolls"]["default"] is True
    assert opts["mode"]["enum"] == ["driving", "walking", "cycling"] and opts["mode"]["default"] == "driving"
    assert load_registry(FIX / "bfcl_list.json")["math.hypot"].param_schema("z")["default"] == 0


def _bfcl_prop(type_, description):
    prop = {"description": description}
    if type_:
        prop["type"] = type_
    doc = {"name": "f", "description": "", "parameters": {"type": "dict", "properties": {"p": prop}}}
    spec = _one(json.dumps(doc) + "\n", fmt="bfcl").param_schema("p")
    return {k: v for k, v in spec.items() if k in ("enum", "default")}


@pytest.mark.parametrize(
    ("type_", "text", "expected"),
    [
        ("string", "One of ['a', 'b'].", {"enum": ["a", "b"]}),
        ("string", 'One of ["a", "b"]. Default is "b".', {"enum": ["a", "b"], "default": "b"}),
        ("string", "Mode, one of 'x', 'y', or 'z'.", {"enum": ["x", "y", "z"]}),
        ("string", "Must be one of: low, mid or high", {"enum": ["low", "mid", "high"]}),
        ("string", "Possible values are: economy, business, first.", {"enum": ["economy", "business", "first"]}),
        ("integer", "Possible values: 1, 2, 4.", {"enum": [1, 2, 4]}),
        ("integer", "Default: 5", {"default": 5}),
        ("float", "Ratio. Default is 0.5.", {"default": 0.5}),
        ("boolean", "Verbose (default: true)", {"default": True}),
        ("boolean", "Verbose. Defaults to False.", {"default": False}),
        ("string", "Model. Default: gpt-4.1.", {"default": "gpt-4.1"}),
        ("array", "Tags. Default is ['x', 'y'].", {"default": ["x", "y"]}),
        ("any", "Anything. Default: 3", {"default": 3}),
        # Not unambiguous: left alone.
        ("string", "Directory. Default is the current directory.", {}),
        ("string", "Name. Default is None.", {}),
        ("string", "One of the following options, or none.", {}),
        ("string", "One of a, b", {}),
        ("string", "One of ['a', 'b']. Default is 'z'.", {"enum": ["a", "b"]}),  # default outside the enum
        ("integer", "Default is 5. Later, default is 6.", {}),  # disagreeing mentions
        ("integer", "Default is 'five'.", {}),  # wrong type
        ("string", "Default: 5", {}),  # a bare number for a string
        ("integer", "One of ['a', 'b'].", {}),
        ("array", "One of ['a', 'b'].", {}),
    ],
)
def test_prose_extraction_cases(type_, text, expected):
    assert _bfcl_prop(type_, text) == expected


def test_bfcl_explicit_enum_and_default_win_over_prose():
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {
        "u": {"type": "string", "enum": ["k"], "default": "k", "description": "One of ['a', 'b']. Default is 'a'."}}}}  # fmt: skip
    assert _one([doc], fmt="bfcl").param_schema("u") == {
        "type": "string", "enum": ["k"], "default": "k", "description": "One of ['a', 'b']. Default is 'a'.",
    }  # fmt: skip


def test_bfcl_type_errors():
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "flaot"}}}}
    # One line is a whole JSON document, so no line number is needed.
    assert _err(json.dumps(doc), fmt="bfcl", source="f.jsonl") == (
        "f.jsonl: tool #0 'f': parameters.properties.x.type: unknown type 'flaot' (did you mean 'float'?)"
    )
    doc = {"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "array", "items": {"type": 3}}}}}
    assert _err([doc], fmt="bfcl") == (
        "t.json: tool #0 'f': parameters.properties.x.items.type: expected a type name or an array of them, got 3"
    )


def test_jsonl_errors_carry_the_line():
    ok = json.dumps({"name": "a", "parameters": {"type": "dict", "properties": {}}})
    bad = json.dumps({"name": "b", "parameters": {"type": "dict", "properties": {"x": {"type": "tuple", "items": 1}}}})
    assert _err(f"{ok}\n\n{bad}\n", source="x.jsonl") == (
        "x.jsonl: line 3: tool #1 'b': parameters.properties.x.items: expected a schema object, got integer"
    )


# -- detection -------------------------------------------------------------------


def test_detection():
    bfcl_line = json.dumps({"name": "a", "parameters": {"type": "dict", "properties": {}}})
    assert detect_format([_fn("a")]) == "openai"
    assert detect_format({"functions": []}) == "openai"
    assert detect_format(_mcp(_mcp_tool())) == "mcp"
    assert detect_format({"tools": [_mcp_tool()]}) == "mcp"
    assert detect_format([json.loads(bfcl_line)]) == "bfcl"
    assert detect_format([{"name": "a", "response": {}}]) == "bfcl"
    # BFCL types anywhere in an otherwise OpenAI-looking function.
    assert (
        detect_format([{"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "float"}}}}])
        == "bfcl"
    )
    assert detect_format([{"name": "a"}], jsonl=True) == "bfcl"
    assert detect_format([{"name": "a"}]) == "openai"
    assert parse_registry(bfcl_line + "\n" + bfcl_line.replace('"a"', '"b"'))[1].source == "bfcl"


def test_detection_refuses_mixed_formats():
    assert _err([_fn("a"), _mcp_tool()]) == (
        "t.json: cannot tell the format: tool #1 looks like mcp, tool #0 looks like openai; pass fmt=openai|mcp|bfcl"
    )


def test_explicit_format_overrides_detection():
    # An OpenAI-shaped bare function read as BFCL accepts BFCL type names.
    fn = {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}
    assert _one([fn], fmt="bfcl").source == "bfcl"
    assert _err([fn], fmt="yaml") == "t.json: unknown format 'yaml'; expected one of openai, mcp, bfcl"


# -- broken files: exact, located messages ---------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad_json.json", "line 7, column 9: invalid JSON: Expecting ',' delimiter"),
        ("bad_line.jsonl", "line 3, column 116: invalid JSON: Expecting ',' delimiter"),
        ("missing_name.json", "tool #1: name: missing"),
        ("bad_type.json", "tool #3 'get_weather': parameters.properties.unit.type: unknown type 'temprature'"),
        ("duplicate_names.json", "tool #2 'search': name: duplicate of tool #0"),
        ("unresolvable_ref.json", "tool #0 'create_user': inputSchema.properties.address.$ref: unresolvable reference '#/$defs/Adress'"),
        ("required_typo.json", "tool #0 'lookup': parameters.required: 'wrod' is not a declared property (did you mean 'word'?)"),
        ("mcp_error.json", "the server returned an error: Method not found (code -32601)"),
    ],
)  # fmt: skip
def test_broken_fixtures(name, message):
    path = BROKEN / name
    with pytest.raises(RegistryError) as info:
        load_registry(path)
    assert str(info.value) == f"{path}: {message}"
    assert isinstance(info.value, UserError) and info.value.where == str(path)


def test_file_level_errors(tmp_path):
    with pytest.raises(RegistryError, match=r"nope\.json: file not found$"):
        load_registry(tmp_path / "nope.json")
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(RegistryError, match=r"empty\.json: file is empty$"):
        load_registry(empty)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'[{"name": "caf\xe9"}]')
    with pytest.raises(RegistryError, match=r"latin\.json: not UTF-8 text \(byte 14\)$"):
        load_registry(latin)
    assert _err("42") == "t.json: expected a JSON object or array of tools, got integer"
    assert _err(["x"], fmt="openai") == "t.json: tool #0: expected a tool object, got string"
    assert (
        _err([{"type": "function", "function": {"name": ""}}])
        == "t.json: tool #0: name: expected a non-empty string without surrounding spaces, got ''"
    )


def test_names_with_surrounding_space_are_refused():
    assert (
        _err([{"name": " cd"}])
        == "t.json: tool #0: name: expected a non-empty string without surrounding spaces, got ' cd'"
    )


def test_empty_tool_list_is_an_empty_registry():
    assert parse_registry({"tools": []}) == []


# -- robustness ------------------------------------------------------------------

_KEYS = [
    "name", "type", "function", "parameters", "inputSchema", "outputSchema", "response", "properties", "items",
    "anyOf", "oneOf", "$ref", "$defs", "enum", "required", "description", "default", "tools", "functions",
    "jsonrpc", "result", "error", "nullable", "additionalProperties", "annotations", "readOnlyHint",
]  # fmt: skip
_scalars = st.sampled_from(
    ["object", "dict", "string", "float", "any", "null", "tuple", "array", "#/$defs/a", "#", "#/x", "f", "", "function"]
) | st.none() | st.booleans() | st.integers(-2, 2)  # fmt: skip
_junk = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(_junk, st.sampled_from([None, "openai", "mcp", "bfcl"]))
def test_any_input_imports_or_raises_a_located_registry_error(data, fmt):
    try:
        tools = parse_registry(data, fmt, source="fuzz.json")
    except RegistryError as exc:
        assert str(exc).startswith("fuzz.json: ")
        return
    for tool in tools:
        Draft202012Validator.check_schema(tool.parameters)
