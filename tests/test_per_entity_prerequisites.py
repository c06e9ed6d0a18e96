"""Per-entity prerequisites (issue 16 part 2, docs/kernel.md "Per-entity prerequisites").

A prerequisite that names an entity parameter is checked on the entry of the entity the task names,
``<key>[<value>]``, so the status of one line, order, ticket or reservation neither blocks nor stands in
for another's. The worked solutions under data_gen/solutions/ tagged ``per_entity_prerequisite`` replay the
scenarios end to end; these tests pin the pieces and the edge cases.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from forethought.data_gen.verify import verify_paths, verify_solution
from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.domains.base import Domain
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.registry.model import Prerequisite, Sat, ToolSpec, entity_key, fact_of
from forethought.kernel.scratchpad import Scratchpad
from forethought.kernel.solution_file import load_solution
from forethought.kernel.specs import establishes

TELECOM = load_domain("telecom")
TICKET = load_domain("ticket")
LINE_ACTIVE = TELECOM.tools["refuel_data"].spec.prerequisites[1]
# The solution that failed before per-entity prerequisites: a suspended line read, then another line topped up.
BLOCKED_BEFORE = Path("data_gen/solutions/telecom/read_suspended_then_refuel_other_line.json")


def test_the_key_syntax():
    assert entity_key("line_status", "L-9009") == "line_status[L-9009]"
    assert entity_key("ticket_status", 57) == entity_key("ticket_status", "57") == "ticket_status[57]"
    assert entity_key("line_status", None) == "line_status[]"
    assert fact_of("line_status[L-9009]") == fact_of("line_status") == "line_status"
    assert fact_of("dir:[draft") == "dir:[draft"  # no closing bracket: not an entity key


def test_check_consults_the_entry_of_the_entity_not_the_plain_key():
    assert LINE_ACTIVE.entity == "line_id"
    scratchpad = Scratchpad(
        {"line_status": "suspended", "line_status[L-9009]": "suspended", "line_status[L-4096]": "active"}
    )
    key = toolgate.prerequisite_key
    assert toolgate.check(LINE_ACTIVE, scratchpad, key(LINE_ACTIVE, "L-4096")) == "met"
    assert toolgate.check(LINE_ACTIVE, scratchpad, key(LINE_ACTIVE, "L-9009")) == "not_met"
    assert (
        toolgate.check(LINE_ACTIVE, scratchpad, key(LINE_ACTIVE, "L-1212")) == "absent"
    )  # another line's entries do not count
    assert toolgate.check(LINE_ACTIVE, scratchpad, key(LINE_ACTIVE, None)) == "absent"  # no entity known
    assert (
        toolgate.check(LINE_ACTIVE, scratchpad) == "not_met"
    )  # the plain key, which the kernel no longer consults for it


def test_the_precondition_checks_the_entity_of_the_call_arguments():
    spec = TELECOM.tools["refuel_data"].spec
    scratchpad = Scratchpad({"customer_identified": True, "line_status": "active", "line_status[L-4096]": "active"})
    assert toolgate.precondition(spec, {"customer_id": "C1", "line_id": "L-4096", "gb_amount": 2}, scratchpad) == []
    errors = toolgate.precondition(spec, {"customer_id": "C1", "line_id": "L-9009", "gb_amount": 2}, scratchpad)
    assert errors == [
        "prerequisite 'line_status[L-9009]' is absent (needs the line is active (get_details_by_id shows its status))"
    ]


def test_a_status_write_goes_to_the_plain_key_and_to_the_entry_of_its_entity():
    details = TELECOM.tools["get_details_by_id"].spec
    line = {"line_id": "L-9009", "line_status": "suspended", "roaming_enabled": False}
    out = toolgate.declared_writes(details, {"id": "L-9009"}, line)
    assert out["line_status"] == out["line_status[L-9009]"] == "suspended"
    customer = {"customer_id": "C2001", "full_name": "Anna"}  # not a line: no line entry at all
    assert not [k for k in toolgate.declared_writes(details, {"id": "C2001"}, customer) if fact_of(k) == "line_status"]
    # the first hit of a search, through a dotted path in the key template; an int id renders as the check does
    search = TICKET.tools["search_tickets"].spec
    hits = {"tickets": [{"id": 57, "status": "Closed"}, {"id": 58, "status": "Open"}], "count": 2}
    assert toolgate.declared_writes(search, {"keyword": "vpn"}, hits)[entity_key("ticket_status", 57)] == "Closed"
    assert entity_key("ticket_status", 58) not in toolgate.declared_writes(search, {"keyword": "vpn"}, hits)
    assert not [
        k for k in toolgate.declared_writes(search, {"keyword": "vpn"}, {"tickets": [], "count": 0}) if "[" in k
    ]


def test_check_prerequisites_accepts_a_per_entity_writer_of_the_same_fact_only():
    assert establishes(["line_status", "line_status[{result.line_id}]"], "line_status[L-1]")
    assert establishes(["line_status"], "line_status")
    assert not establishes(["line_status"], "line_status[L-1]")  # writes the plain key only: not the entity's entry
    assert not establishes(["roaming_enabled", "line_id"], "line_status[L-1]")


def test_an_entity_that_is_not_a_parameter_is_a_located_error():
    params = {"type": "object", "properties": {"line_id": {"type": "string"}}, "required": ["line_id"]}
    bad = Prerequisite(key="line_status", sat=Sat(op="eq", value="active"), entity="lineid")
    with pytest.raises(
        ValidationError,
        match=r"prerequisites\[0\] \('line_status'\): entity 'lineid' is not a parameter of tool 'top_up'",
    ):
        ToolSpec(name="top_up", parameters=params, prerequisites=[bad])
    ToolSpec(name="top_up", parameters=params, prerequisites=[bad.model_copy(update={"entity": "line_id"})])

    dom = Domain("toy", TELECOM.state_model)
    with pytest.raises(ValueError, match=r"domain 'toy', tool 'top_up' \(.*\): .*entity 'lineid' is not a parameter"):

        @dom.tool(prerequisites=[bad])
        def top_up(state, line_id: str) -> dict:
            """Top up.

            Args:
                line_id: The line.
            """
            return {}


def test_a_solution_registry_extra_tool_with_a_wrong_entity_names_its_field(tmp_path):
    solution = json.loads(BLOCKED_BEFORE.read_text())
    solution["registry"] = {
        "extra": [
            {
                "name": "top_up",
                "parameters": {"type": "object", "properties": {"line_id": {"type": "string"}}},
                "prerequisites": [{"key": "line_status", "entity": "lineid"}],
            }
        ]
    }
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(solution))
    [result] = verify_paths([path])
    assert not result.ok
    assert (
        "registry.extra.0: Value error, prerequisites[0] ('line_status'): entity 'lineid' is not a parameter of tool 'top_up'"
        in result.error
    )


def test_imported_registries_have_no_per_entity_prerequisites():
    from forethought.kernel.registry import parse_registry

    tools = parse_registry(
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}], "openai"
    )
    assert [p for t in tools for p in t.prerequisites] == []


def test_the_solution_that_was_blocked_before_verifies_and_S_only_grows():
    [result] = verify_paths([BLOCKED_BEFORE])
    assert result.ok, result.error
    turns = verify_solution(load_solution(BLOCKED_BEFORE), kernel=Kernel(KernelConfig(strict_invariants=True)))
    assert [t.outcomes["t1"].status for t in turns] == ["executed", "executed"]
    assert [(r.key, r.outcome, r.recheck) for r in turns[1].prerequisites["t1"]] == [
        ("customer_identified", "met", None),
        ("line_status[L-4096]", "absent", "met"),
    ]
    assert set(turns[0].scratchpad) <= set(turns[1].scratchpad)  # INV-S: the suspended line's entry is still there
    assert turns[1].scratchpad["line_status[L-9009]"] == "suspended"
    assert all(not t.invariant_violations for t in turns)


def test_with_a_domain_wide_key_the_same_request_is_blocked(tmp_path, monkeypatch):
    """The same scenario against line_status as one key per domain (the declaration before): the top-up is
    blocked by the other line's status. Shows what the entity changes, and that the solution can fail."""
    plain = LINE_ACTIVE.model_copy(update={"entity": None})
    for name in ("refuel_data", "enable_roaming", "change_plan"):
        spec = TELECOM.tools[name].spec
        monkeypatch.setattr(spec, "prerequisites", [plain if p.key == "line_status" else p for p in spec.prerequisites])
    solution = json.loads(BLOCKED_BEFORE.read_text())
    for task in solution["turns"][1]["tasks"]:  # the file as it would be written for that declaration: the plain key
        for prerequisite in task["prerequisites"]:
            prerequisite["key"] = fact_of(prerequisite["key"])
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(solution))
    [result] = verify_paths([path])
    assert not result.ok
    assert (
        "check_prerequisites/line_status: outcome: expected absent, got not_met; recheck: expected met, got none"
        in result.error
    )


def _no_line_named() -> dict:
    """A request that names no line while S names none either."""
    solution = json.loads(BLOCKED_BEFORE.read_text())
    solution["id"], solution["tags"] = "telecom-refuel-no-line-known", ["prereq_not_met_blocked"]
    solution["config"] = {"customer_identified": True, "customer_id": "${cid}"}
    turn = copy.deepcopy(solution["turns"][1])
    turn.update(user="Please add ${gb} GB of data.", paraphrases=[], calls=[], state=[], scratchpad={}, notes="")
    turn["tasks"] = [
        {
            "id": "t1",
            "text": "Add ${gb} GB of data",
            "tool": "refuel_data",
            "parameters": {"gb_amount": "${gb}"},
            "prerequisites": [
                {"key": "customer_identified", "outcome": "met"},
                {"key": "line_status[]", "outcome": "absent", "retrieval": None, "recheck": "not_met"},
            ],
            "outcome": "blocked",
        }
    ]
    solution["turns"] = [turn]
    return solution


def test_no_entity_value_known_is_absent_then_not_met_and_writes_no_entry(tmp_path):
    path = tmp_path / "no_line.json"
    path.write_text(json.dumps(_no_line_named()))
    [result] = verify_paths([path])
    assert result.ok, result.error
    [turn] = verify_solution(load_solution(path))
    assert "line_status[]" not in turn.scratchpad  # a key that names no entity is never written
    assert turn.outcomes["t1"].blocked_key == "line_status[]"


def test_the_tag_needs_another_entitys_entry_that_is_judged_differently(tmp_path):
    # a per-entity check with no other line's entry in S is no evidence for the tag
    solution = json.loads(Path("data_gen/solutions/telecom/roaming_suspended_line_blocked.json").read_text())
    solution["tags"].append("per_entity_prerequisite")
    path = tmp_path / "unbacked.json"
    path.write_text(json.dumps(solution))
    [result] = verify_paths([path])
    assert (
        not result.ok
        and "tag 'per_entity_prerequisite' needs a prerequisite checked on one entity's key" in result.error
    )
