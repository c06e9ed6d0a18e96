"""Contract-compiled decoding (kernel/decoding.py): the grammar admits every contract-valid target and refuses
what the contract refuses that it can know before decoding."""

from __future__ import annotations

import json

import pytest

from forethought.data_gen.row import read_rows
from forethought.kernel.decoding import JSON_FORMAT, admits
from forethought.kernel.specs import (
    PRIMITIVE_NAMES,
    SPECS,
    CheckPrereqInput,
    DecomposeInput,
    MatchFillInput,
    TaskRef,
    ToolBrief,
    tool_rendering,
)

TOOLS = [
    ToolBrief(
        name="get_details_by_id",
        description="Get details",
        params={"id": "string"},
        required=["id"],
        writes=["line_status[{params.id}]"],
    ),
    ToolBrief(
        name="refuel_data",
        description="Add data",
        params={"line_id": "string", "gb_amount": "number"},
        required=["line_id", "gb_amount"],
    ),
    ToolBrief(name="set_mode", description="Set a mode", params={"mode": "enum[eco|sport]", "count": "integer"}),
]


@pytest.mark.parametrize("rendering", ["full", "compact"])
@pytest.mark.parametrize("split", ["train", "validation"])
def test_the_grammar_admits_every_target_of_the_fixture_datasets(generated_data, tmp_path, rendering, split):
    """A grammar that refused a contract-valid target would forbid the right answer: every one must pass."""
    from forethought.cli import main
    from tests.conftest import TINY_GENERATE, sizes_override

    data = generated_data
    if rendering == "compact":
        data = tmp_path / "compact"
        sizes = sizes_override(decompose=24, match_func=24, match_fill=24)
        assert (
            main(
                [
                    "generate",
                    *TINY_GENERATE,
                    f"data.sizes={sizes}",
                    f"data.output_dir={data}",
                    "data.tool_rendering=compact",
                ]
            )
            == 0
        )
    stats = json.loads((data / "stats.json").read_text())
    with tool_rendering(rendering):
        for primitive in PRIMITIVE_NAMES:
            spec = SPECS[primitive]
            rows = read_rows(data, primitive, split)
            assert rows
            for row in rows:
                inp = spec.input_type.model_validate(row.input_value)
                assert admits(spec.decoding_schema(inp), row.completion[0].content) is None, (
                    primitive,
                    row.id,
                    row.completion[0].content,
                )
            assert (
                stats["primitives"][primitive][split]["decoding_coverage"] == 1.0
            )  # what generate measured and records


def _decompose(user: str, **kw) -> DecomposeInput:
    return DecomposeInput(user=user, tools=TOOLS, **kw)


def _task(tool, params, **kw):
    return {
        "id": "t1",
        "text": "x",
        "tool_name": tool,
        "depends_on": [],
        "parameters": params,
        "when": None,
        "for_each": None,
        **kw,
    }


def _text(spec_name: str, answer: dict) -> str:
    return SPECS[spec_name].target_text(answer)


def test_decompose_grammar_admits_grounded_values_and_refuses_invented_ones():
    spec = SPECS["decompose"]
    inp = _decompose("Add 3 GB of data to line L-3141", context={"customer": "Daniel Park"})
    schema = spec.decoding_schema(inp)
    ok = [
        _task("refuel_data", {"line_id": "L-3141", "gb_amount": 3}),
        _task("refuel_data", {"line_id": "l-3141"}),  # the contract folds case, so does the grammar
        _task("get_details_by_id", {"id": "Daniel"}),  # a piece of a context value
        _task("set_mode", {"mode": "eco"}),  # a documented option
        _task(None, {}),
    ]
    for task in ok:
        answer = {"tasks": [task]}
        assert spec.check_output(inp, answer).ok
        assert admits(schema, _text("decompose", answer)) is None, task
    refused = [
        _task("refuel_data", {"line_id": "L-9999"}),  # a value that appears nowhere
        _task("refuel_data", {"gb_amount": 5}),  # a number the request does not state
        _task("refuel_data", {"volume": 3}),  # a parameter the tool does not have
        _task("cancel_everything", {}),  # a tool that is not registered
        _task("set_mode", {"count": 2.5}),  # an integer parameter takes a whole number
    ]
    for task in refused:
        assert admits(schema, _text("decompose", {"tasks": [task]})) is not None, task


def test_the_json_format_is_the_trained_one():
    """Separators as target_text writes them (", " and ": "), nothing else: the format the models learn."""
    spec = SPECS["match_func"]
    from forethought.kernel.specs import MatchFuncInput

    schema = spec.decoding_schema(MatchFuncInput(task=TaskRef(id="t1", text="x"), tools=TOOLS))
    assert schema["x-guidance"] == JSON_FORMAT
    assert admits(schema, '{"tool_name": "refuel_data"}') is None
    assert admits(schema, '{"tool_name":"refuel_data"}') is not None
    assert admits(schema, '{ "tool_name": "refuel_data"}') is not None


def test_check_prerequisites_grammar_offers_only_tools_that_establish_the_key():
    spec = SPECS["check_prerequisites"]
    inp = CheckPrereqInput(
        task=TaskRef(id="t1", text="Add 3 GB to line L-3141"), key="line_status[L-3141]", outcome="absent", tools=TOOLS
    )
    schema = spec.decoding_schema(inp)
    assert (
        admits(
            schema,
            _text("check_prerequisites", {"task": {"tool_name": "get_details_by_id", "parameters": {"id": "L-3141"}}}),
        )
        is None
    )
    assert admits(schema, _text("check_prerequisites", {"task": None})) is None
    assert (
        admits(schema, _text("check_prerequisites", {"task": {"tool_name": "refuel_data", "parameters": {}}}))
        is not None
    )
    none_writes = CheckPrereqInput(task=TaskRef(id="t1", text="x"), key="unknown_key", outcome="absent", tools=TOOLS)
    assert admits(
        spec.decoding_schema(none_writes),
        _text("check_prerequisites", {"task": {"tool_name": "get_details_by_id", "parameters": {}}}),
    )


def test_check_prerequisites_call_must_name_the_keys_entity_in_contract_and_grammar():
    """get_details_by_id writes line_status[{params.id}]: called on L-777 it does not establish line_status[L-3141]
    (the converge run's adapters wrote such calls: docs/training.md). The contract refuses it; the grammar fixes id."""
    spec = SPECS["check_prerequisites"]
    inp = CheckPrereqInput(
        task=TaskRef(id="t1", text="Add 3 GB to line L-3141, not L-777"),
        key="line_status[L-3141]",
        outcome="absent",
        context={"other_line": "L-777"},
        tools=TOOLS,
    )
    right = {"task": {"tool_name": "get_details_by_id", "parameters": {"id": "L-3141"}}}
    wrong = {"task": {"tool_name": "get_details_by_id", "parameters": {"id": "L-777"}}}
    unnamed = {"task": {"tool_name": "get_details_by_id", "parameters": {}}}
    assert spec.check_output(inp, right).ok
    for bad in (wrong, unnamed):
        res = spec.check_output(inp, bad)
        assert not res.ok and res.violations[0].constraint == "establishes_key"
        assert admits(spec.decoding_schema(inp), _text("check_prerequisites", bad)) is not None
    assert admits(spec.decoding_schema(inp), _text("check_prerequisites", right)) is None
    # an integer entity (ticket_status[15]) is the integer parameter 15; a write templated by the result is taken on trust
    ticket = ToolBrief(name="get_ticket", params={"ticket_id": "integer"}, writes=["ticket_status[{params.ticket_id}]"])
    by_result = ToolBrief(name="find_line", params={"phone": "string"}, writes=["line_status[{result.line_id}]"])
    t_inp = CheckPrereqInput(
        task=TaskRef(id="t1", text="Comment on ticket 15, see 57"),
        key="ticket_status[15]",
        outcome="absent",
        tools=[ticket],
    )
    assert (
        admits(
            spec.decoding_schema(t_inp),
            _text("check_prerequisites", {"task": {"tool_name": "get_ticket", "parameters": {"ticket_id": 15}}}),
        )
        is None
    )
    assert admits(
        spec.decoding_schema(t_inp),
        _text("check_prerequisites", {"task": {"tool_name": "get_ticket", "parameters": {"ticket_id": 57}}}),
    )
    r_inp = CheckPrereqInput(
        task=TaskRef(id="t1", text="Line of 555-0101"), key="line_status[L-1]", outcome="absent", tools=[by_result]
    )
    assert spec.check_output(r_inp, {"task": {"tool_name": "find_line", "parameters": {"phone": "555-0101"}}}).ok


def test_a_lookup_by_id_names_the_entity_its_result_templated_write_establishes():
    """get_details_by_id writes line_status[{result.line_id}]: the contract takes it on trust, and the grammar asks a
    lookup whose one parameter is a required id to look up the key's entity (run #3's adapters looked up the other
    line or a customer id: docs/training.md). A lookup by something else (a phone number) is left free."""
    spec = SPECS["check_prerequisites"]
    lookup = ToolBrief(
        name="get_details_by_id", params={"id": "string"}, required=["id"], writes=["line_status[{result.line_id}]"]
    )
    by_phone = ToolBrief(
        name="find_line", params={"phone": "string"}, required=["phone"], writes=["line_status[{result.line_id}]"]
    )
    inp = CheckPrereqInput(
        task=TaskRef(id="t1", text="Enable roaming on line L-5150 of customer C2003"),
        key="line_status[L-5150]",
        outcome="absent",
        context={"other_line": "L-3141"},
        tools=[lookup],
    )
    schema = spec.decoding_schema(inp)
    answer = lambda tool, params: _text("check_prerequisites", {"task": {"tool_name": tool, "parameters": params}})  # noqa: E731
    assert admits(schema, answer("get_details_by_id", {"id": "L-5150"})) is None
    for other in ("L-3141", "C2003"):
        assert spec.check_output(inp, {"task": {"tool_name": "get_details_by_id", "parameters": {"id": other}}}).ok
        assert admits(schema, answer("get_details_by_id", {"id": other})) is not None, other
    phone = inp.model_copy(update={"tools": [by_phone], "task": TaskRef(id="t1", text="Line of 555-0101")})
    assert admits(spec.decoding_schema(phone), answer("find_line", {"phone": "555-0101"})) is None


def test_string_grammar_joins_parts_with_a_space_and_offers_glued_tokens_whole():
    """Parts of a composed string are apart by a space (after at most one closing mark): run #3's adapters wrote
    "For!!!as!!!as--" and "THE!!!42", punctuation gluing grounded words. A token the haystack glues itself (a
    password "Qwerty!42") and every string value of the context come whole."""
    from forethought.kernel.decoding import ValueSpace, with_format

    space = ValueSpace(["Log in as nora_k, then book the economy flight"], [{"password": "Qwerty!42"}])
    schema = with_format(
        {"type": "object", "properties": {"v": space.string_schema()}, "required": ["v"], "additionalProperties": False}
    )
    for ok in ("Qwerty!42", "nora_k", "economy flight", "nora_k, then", "(economy)", "Economy Flight", "Qwerty"):
        assert admits(schema, json.dumps({"v": ok})) is None, ok
    for bad in ("THE!!!42", "For!!!as", "economy!!flight", "economy--flight", "Qwerty!!42"):
        assert admits(schema, json.dumps({"v": bad})) is not None, bad


def test_match_fill_grammar_names_exactly_the_missing_parameters_with_grounded_values():
    spec = SPECS["match_fill"]
    inp = MatchFillInput(
        task=TaskRef(id="t1", text='Tweet "Filed:" followed by the file name'),
        tool=ToolBrief(name="post", params={"content": "string"}),
        missing=["content"],
        state={"mv.file_name": "expenses.csv"},
    )
    schema = spec.decoding_schema(inp)
    assert (
        admits(schema, _text("match_fill", {"values": {"content": "Filed: expenses.csv"}})) is None
    )  # a composition of grounded parts
    assert admits(schema, _text("match_fill", {"values": {"content": None}})) is None
    assert admits(schema, _text("match_fill", {"values": {"content": "Filed: invoice.pdf"}})) is not None
    assert admits(schema, _text("match_fill", {"values": {"other": "x"}})) is not None


def test_whole_numbers_are_written_as_integers():
    """20.0 and 20 are the same grounded number; the target writes it one way, the one the grammar offers."""
    assert SPECS["match_fill"].target_text({"values": {"gallon": 20.0}}) == '{"values": {"gallon": 20}}'


def test_check_prerequisites_retrieves_an_absent_entity_fact_and_remedies_one_not_met():
    """The converge runs' adapters answered an absent ``line_status[L-2048]`` with the remedy (resume_line) where the
    read-only get_details_by_id is wanted, and a balance that is not met with a re-read (get_account_info) where
    fund_account is: the side-effect flag on the tool brief lets the contract and the grammar rule both out."""
    spec = SPECS["check_prerequisites"]
    read = ToolBrief(name="get_line", params={"line_id": "string"}, writes=["line_status[{params.line_id}]"])
    resume = ToolBrief(
        name="resume_line", params={"line_id": "string"}, writes=["line_status[{params.line_id}]"], side_effect=True
    )
    task = TaskRef(id="t1", text="Add 3 GB to line L-2048")
    call = lambda tool: {"task": {"tool_name": tool, "parameters": {"line_id": "L-2048"}}}  # noqa: E731

    def verdicts(inp):
        out = {}
        for tool in ("get_line", "resume_line"):
            res = spec.check_output(inp, call(tool))
            grammar = admits(spec.decoding_schema(inp), _text("check_prerequisites", call(tool)))
            out[tool] = (res.ok, None if res.ok else res.violations[0].constraint, grammar is None)
        return out

    absent = CheckPrereqInput(task=task, key="line_status[L-2048]", outcome="absent", tools=[read, resume])
    assert verdicts(absent) == {
        "get_line": (True, None, True),
        "resume_line": (False, "retrieval_before_remedy", False),
    }
    not_met = absent.model_copy(update={"outcome": "not_met", "current": "suspended"})
    assert verdicts(not_met) == {
        "get_line": (False, "retrieval_before_remedy", False),
        "resume_line": (True, None, True),
    }
    # with only one kind listed, that kind may answer (a user not found by email is looked up by name)
    for inp in (absent.model_copy(update={"tools": [resume]}), not_met.model_copy(update={"tools": [read]})):
        (tool,) = inp.tools
        assert spec.check_output(inp, call(tool.name)).ok
        assert admits(spec.decoding_schema(inp), _text("check_prerequisites", call(tool.name))) is None
    # a session flag that is absent is established by acting: logging in is how it is learnt
    status = ToolBrief(name="get_login_status", writes=["logged_in"])
    login = ToolBrief(name="login", params={"user": "string"}, writes=["logged_in"], side_effect=True)
    flag = CheckPrereqInput(
        task=TaskRef(id="t1", text="Buy as ana"), key="logged_in", outcome="absent", tools=[status, login]
    )
    answer = {"task": {"tool_name": "login", "parameters": {"user": "ana"}}}
    assert spec.check_output(flag, answer).ok
    assert admits(spec.decoding_schema(flag), _text("check_prerequisites", answer)) is None


def test_a_registry_tools_side_effect_reaches_its_brief():
    from forethought.kernel.domains import load_domain
    from forethought.kernel.specs import tool_brief

    tools = load_domain("telecom").tools
    assert (
        tool_brief(tools["resume_line"].spec).side_effect
        and not tool_brief(tools["get_details_by_id"].spec).side_effect
    )


def test_the_focused_rendering_shows_check_prerequisites_the_tools_its_grammar_admits():
    # focused = compact, and check_prerequisites' prompt lists the tools its contract admits for the key (a third of the
    # prompt's tokens on the generated data): the grammar refuses every other tool, so they were prompt to ignore.
    spec = SPECS["check_prerequisites"]
    absent = CheckPrereqInput(
        task=TaskRef(id="t1", text="Add 3 GB to line L-3141"), key="line_status[L-3141]", outcome="absent", tools=TOOLS
    )
    unknown = CheckPrereqInput(task=TaskRef(id="t1", text="x"), key="unknown_key", outcome="absent", tools=TOOLS)

    def listed(inp):
        user = spec.messages(inp)[-1]["content"]
        return [line[2:].split("(")[0] for line in user.split("Tools:\n", 1)[1].splitlines()]

    with tool_rendering("compact"):
        assert listed(absent) == [t.name for t in TOOLS]
        compact_system = spec.system_text()
        others = {n: SPECS[n].golden_rendering() for n in ("decompose", "get_order", "match_func", "match_fill")}
    with tool_rendering("focused"):
        names = listed(absent)
        alternatives = spec.decoding_schema(absent)["properties"]["task"]["anyOf"]
        admitted = [a["properties"]["tool_name"]["const"] for a in alternatives if "properties" in a]
        assert names == admitted == ["get_details_by_id"]
        assert spec.messages(unknown)[-1]["content"].endswith("Tools:\n(none)")  # no tool can: null is the answer
        assert spec.system_text() == compact_system
        # the other primitives' prompts are the compact ones
        assert {n: SPECS[n].golden_rendering() for n in others} == others
