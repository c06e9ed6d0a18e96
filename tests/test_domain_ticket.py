"""The simulated support-ticket domain: tools, errors, prerequisites/writes, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.environment import Environment
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import assert_solution_verifies, solution_paths

DOMAIN = load_domain("ticket")


def fresh(**over):
    return DOMAIN.load_state(over)


def call(state, name, **args):
    return DOMAIN.tools[name](state, args)


def snap(state) -> str:
    return json.dumps(DOMAIN.snapshot(state), sort_keys=True)


def logged_in(user="support_amy", **over):
    return fresh(current_user=user, **over)


def assert_error_unchanged(state, name, fragment, **args):
    before = snap(state)
    out = call(state, name, **args)
    assert "error" in out, out
    assert fragment.lower() in out["error"].lower(), out["error"]
    assert snap(state) == before


def post_ok(name, args, result, state):
    spec = DOMAIN.tools[name].spec
    return toolgate.postcondition(spec, DOMAIN.tools[name], args, result, state)


# ------------------------------------------------------------------ registry
def test_tools_registered():
    expected = {
        "ticket_login",
        "ticket_get_login_status",
        "ticket_logout",
        "create_ticket",
        "get_ticket",
        "get_user_tickets",
        "search_tickets",
        "close_ticket",
        "resolve_ticket",
        "edit_ticket",
        "reopen_ticket",
        "assign_ticket",
        "add_ticket_comment",
        "escalate_ticket",
    }
    assert set(DOMAIN.tools) == expected


def test_schemas_from_signatures():
    create = DOMAIN.tools["create_ticket"].spec
    assert create.required == ["subject", "description", "priority"]
    assert create.param_schema("priority")["type"] == "integer"
    assert DOMAIN.tools["get_user_tickets"].spec.required == []
    assert DOMAIN.tools["get_user_tickets"].spec.param_schema("status")["enum"] == [
        "Open",
        "In Progress",
        "Resolved",
        "Closed",
    ]
    assert DOMAIN.tools["edit_ticket"].spec.param_schema("updates")["type"] == "object"
    assert all(DOMAIN.tools[n].spec.description for n in DOMAIN.tools)


def test_side_effect_flags():
    reads = {"ticket_get_login_status", "get_ticket", "get_user_tickets", "search_tickets"}
    for name, tool in DOMAIN.tools.items():
        assert tool.spec.side_effect == (name not in reads), name


def test_prerequisites_as_intended():
    pre = {n: [(p.key, p.sat.op, p.sat.value) for p in t.spec.prerequisites] for n, t in DOMAIN.tools.items()}
    login = ("ticket_logged_in", "truthy", None)
    staff = ("ticket_role", "in", ["agent", "admin"])
    assert pre["ticket_login"] == [] and pre["get_ticket"] == [] and pre["search_tickets"] == []
    assert pre["create_ticket"] == [login] and pre["close_ticket"] == [login] and pre["get_user_tickets"] == [login]
    assert pre["edit_ticket"] == [login, ("ticket_status", "ne", "Closed")]
    assert pre["add_ticket_comment"] == [login, ("ticket_status", "ne", "Closed")]
    assert pre["resolve_ticket"] == [login, staff, ("ticket_status", "in", ["Open", "In Progress"])]
    assert pre["assign_ticket"] == [login, staff, ("ticket_status", "in", ["Open", "In Progress"])]
    assert pre["escalate_ticket"] == [login, ("ticket_status", "in", ["Open", "In Progress"])]
    assert pre["reopen_ticket"] == [login, ("ticket_status", "in", ["Resolved", "Closed"])]
    # every prerequisite key can be established by some tool (retrieval/remediation is possible)
    written = {k for t in DOMAIN.tools.values() for k in t.spec.writes}
    assert {k for ps in pre.values() for k, _, _ in ps} <= written


def test_writes_reach_the_scratchpad():
    state = fresh()
    spec = DOMAIN.tools["ticket_login"].spec
    args = {"username": "support_amy", "password": "Amy$upport1"}
    res = call(state, "ticket_login", **args)
    written = toolgate.declared_writes(spec, args, res)
    assert (
        written["ticket_logged_in"] is True
        and written["ticket_role"] == "agent"
        and written["ticket_user"] == "support_amy"
    )
    assert written["username"] == "support_amy"  # bound arguments are written too
    args = {"subject": "X", "description": "Y", "priority": 2}
    res = call(state, "create_ticket", **args)
    written = toolgate.declared_writes(DOMAIN.tools["create_ticket"].spec, args, res)
    assert written["ticket_id"] == 9 and written["ticket_status"] == "Open" and written["subject"] == "X"
    written = toolgate.declared_writes(
        DOMAIN.tools["search_tickets"].spec, {"keyword": "export"}, call(state, "search_tickets", keyword="export")
    )
    assert written["ticket_id"] == 4 and written["ticket_status"] == "Open"
    written = toolgate.declared_writes(
        DOMAIN.tools["search_tickets"].spec, {"keyword": "zzz"}, call(state, "search_tickets", keyword="zzz")
    )
    assert "ticket_id" not in written  # no hit: nothing about a ticket is written
    written = toolgate.declared_writes(
        DOMAIN.tools["get_ticket"].spec, {"ticket_id": 2}, call(state, "get_ticket", ticket_id=2)
    )
    assert (written["ticket_status"], written["ticket_priority"], written["ticket_assignee"]) == (
        "In Progress",
        4,
        "support_amy",
    )
    assert "priority" not in written and "description" not in written  # fields of the ticket are namespaced
    written = toolgate.declared_writes(DOMAIN.tools["ticket_logout"].spec, {}, call(state, "ticket_logout"))
    assert written == {"ticket_logged_in": False, "ticket_user": None, "ticket_role": None}


def test_prerequisite_checks_against_scratchpad():
    edit = DOMAIN.tools["edit_ticket"].spec.prerequisites
    scratchpad = Scratchpad({"ticket_logged_in": True})
    assert [toolgate.check(p, scratchpad) for p in edit] == ["met", "absent"]
    scratchpad.set("ticket_status", "Closed", "test")
    assert toolgate.check(edit[1], scratchpad) == "not_met"
    role = DOMAIN.tools["resolve_ticket"].spec.prerequisites[1]
    assert toolgate.check(role, Scratchpad({"ticket_role": "customer"})) == "not_met"
    assert toolgate.check(role, Scratchpad({"ticket_role": "admin"})) == "met"
    assert toolgate.check(role, Scratchpad({"ticket_role": None})) == "not_met"


# ------------------------------------------------------------------ session
def test_login_status_logout():
    state = fresh()
    assert call(state, "ticket_get_login_status") == {"login_status": False, "username": None, "role": None}
    assert_error_unchanged(state, "ticket_login", "invalid", username="jsmith", password="wrong")
    assert_error_unchanged(state, "ticket_login", "invalid", username="nobody", password="x")
    assert_error_unchanged(state, "ticket_logout", "not authenticated")
    out = call(state, "ticket_login", username="jsmith", password="Jsmith#2024")
    assert out == {"success": True, "username": "jsmith", "role": "customer"}
    assert not post_ok("ticket_login", {"username": "jsmith"}, out, state)
    assert call(state, "ticket_get_login_status") == {"login_status": True, "username": "jsmith", "role": "customer"}
    call(state, "ticket_login", username="admin_lee", password="AdminLee#99")  # switch user
    assert state.current_user == "admin_lee"
    assert call(state, "ticket_logout") == {"success": True}
    assert state.current_user is None and not post_ok("ticket_logout", {}, {}, state)


# ------------------------------------------------------------------ tickets
def test_create_ticket():
    state = logged_in("jsmith")
    out = call(state, "create_ticket", subject="VPN down", description="No tunnel", priority=5)
    assert out["id"] == 9 and out["status"] == "Open" and out["created_by"] == "jsmith"
    args = {"subject": "VPN down", "description": "No tunnel", "priority": 5}
    assert not post_ok("create_ticket", args, out, state)
    assert call(state, "create_ticket", subject="Two", description="", priority=1)["id"] == 10
    assert state.next_ticket_id == 11


@pytest.mark.parametrize(
    "args,fragment",
    [
        ({"subject": "X", "description": "Y", "priority": 0}, "priority"),
        ({"subject": "X", "description": "Y", "priority": 6}, "priority"),
        ({"subject": "X", "description": "Y", "priority": True}, "priority"),
        ({"subject": "  ", "description": "Y", "priority": 2}, "subject"),
    ],
)
def test_create_ticket_invalid(args, fragment):
    assert_error_unchanged(logged_in("jsmith"), "create_ticket", fragment, **args)


def test_create_ticket_needs_login():
    assert_error_unchanged(fresh(), "create_ticket", "not authenticated", subject="X", description="Y", priority=2)


def test_get_ticket_and_errors():
    state = fresh()
    ticket = call(state, "get_ticket", ticket_id=3)
    assert ticket["status"] == "Resolved" and ticket["resolution"] and ticket["comments"] == []
    assert_error_unchanged(state, "get_ticket", "not found", ticket_id=99)
    assert_error_unchanged(state, "get_ticket", "invalid ticket id", ticket_id="3")


def test_get_user_tickets_newest_first_and_filtered():
    state = logged_in("jsmith")
    out = call(state, "get_user_tickets")
    assert [t["id"] for t in out["tickets"]] == [4, 1] and out["count"] == 2
    call(state, "close_ticket", ticket_id=1)
    assert [t["id"] for t in call(state, "get_user_tickets", status="Open")["tickets"]] == [4]
    assert call(state, "get_user_tickets", status="Resolved") == {"tickets": [], "count": 0}
    assert_error_unchanged(fresh(), "get_user_tickets", "not authenticated")


def test_search_tickets():
    state = fresh()
    out = call(state, "search_tickets", keyword="PASSWORD")
    assert [t["id"] for t in out["tickets"]] == [3]  # title, case-insensitive
    assert [t["id"] for t in call(state, "search_tickets", keyword="twice")["tickets"]] == [2]  # description
    assert_error_unchanged(state, "search_tickets", "keyword", keyword=" ")


def test_close_ticket():
    state = logged_in("jsmith")
    out = call(state, "close_ticket", ticket_id=4)
    assert out["status"] == "Closed" and state.tickets[4].status == "Closed"
    assert not post_ok("close_ticket", {"ticket_id": 4}, out, state)
    assert_error_unchanged(state, "close_ticket", "already closed", ticket_id=4)
    assert_error_unchanged(state, "close_ticket", "not found", ticket_id=99)
    assert_error_unchanged(fresh(), "close_ticket", "not authenticated", ticket_id=1)


def test_resolve_ticket():
    state = logged_in("support_raj")
    out = call(state, "resolve_ticket", ticket_id=1, resolution="Fixed the CDN")
    assert out == {"id": 1, "status": "Resolved", "resolution": "Fixed the CDN"}
    assert not post_ok("resolve_ticket", {"ticket_id": 1, "resolution": "Fixed the CDN"}, out, state)
    assert_error_unchanged(state, "resolve_ticket", "only open", ticket_id=1, resolution="again")
    assert_error_unchanged(state, "resolve_ticket", "only open", ticket_id=5, resolution="closed one")
    assert_error_unchanged(state, "resolve_ticket", "resolution", ticket_id=4, resolution="")
    assert_error_unchanged(logged_in("jsmith"), "resolve_ticket", "permission denied", ticket_id=4, resolution="x")


def test_edit_ticket_keeps_other_fields():
    state = logged_in("jsmith")
    before = state.tickets[4].model_copy()
    out = call(state, "edit_ticket", ticket_id=4, updates={"priority": 2})
    ticket = state.tickets[4]
    assert (ticket.priority, ticket.title, ticket.description, ticket.status) == (
        2,
        before.title,
        before.description,
        before.status,
    )
    assert out["priority"] == 2 and not post_ok("edit_ticket", {"ticket_id": 4, "updates": {"priority": 2}}, out, state)
    call(state, "edit_ticket", ticket_id=4, updates={"title": "New", "description": "Desc"})
    assert (state.tickets[4].title, state.tickets[4].description, state.tickets[4].priority) == ("New", "Desc", 2)


@pytest.mark.parametrize(
    "tid,updates,fragment",
    [
        (4, {}, "at least one"),
        (4, {"status": "Closed"}, "invalid fields"),
        (4, {"priority": 2, "assignee": "x"}, "invalid fields"),  # nothing applied, not even the priority
        (4, {"priority": 9}, "priority"),
        (4, {"title": ""}, "title"),
        (5, {"priority": 2}, "closed"),
        (99, {"priority": 2}, "not found"),
    ],
)
def test_edit_ticket_invalid(tid, updates, fragment):
    assert_error_unchanged(logged_in("jsmith"), "edit_ticket", fragment, ticket_id=tid, updates=updates)


def test_reopen_ticket():
    state = logged_in("li_wei")
    out = call(state, "reopen_ticket", ticket_id=3)
    assert out == {"id": 3, "status": "Open"} and state.tickets[3].resolution is None
    call(state, "reopen_ticket", ticket_id=5)
    assert state.tickets[5].status == "Open"
    assert_error_unchanged(state, "reopen_ticket", "only resolved or closed", ticket_id=1)


def test_assign_ticket():
    state = logged_in("support_amy")
    out = call(state, "assign_ticket", ticket_id=1, assignee="support_kim")
    assert out == {"id": 1, "status": "In Progress", "assignee": "support_kim"}
    assert not post_ok("assign_ticket", {"ticket_id": 1, "assignee": "support_kim"}, out, state)
    assert_error_unchanged(state, "assign_ticket", "not a support agent", ticket_id=4, assignee="jsmith")
    assert_error_unchanged(state, "assign_ticket", "not a support agent", ticket_id=4, assignee="ghost")
    assert_error_unchanged(state, "assign_ticket", "only open", ticket_id=3, assignee="support_kim")
    assert_error_unchanged(
        logged_in("jsmith"), "assign_ticket", "permission denied", ticket_id=4, assignee="support_kim"
    )


def test_add_ticket_comment():
    state = logged_in("maria_g")
    out = call(state, "add_ticket_comment", ticket_id=2, comment="Any update?")
    assert out["comments"] == 1 and state.tickets[2].comments[0].author == "maria_g"
    assert not post_ok("add_ticket_comment", {"ticket_id": 2, "comment": "Any update?"}, out, state)
    assert call(state, "add_ticket_comment", ticket_id=3, comment="Thanks")["status"] == "Resolved"
    assert_error_unchanged(state, "add_ticket_comment", "closed", ticket_id=5, comment="hello")
    assert_error_unchanged(state, "add_ticket_comment", "comment", ticket_id=2, comment="")


def test_escalate_ticket():
    state = logged_in("jsmith")
    out = call(state, "escalate_ticket", ticket_id=6)
    assert out == {"id": 6, "status": "Open", "priority": 5, "escalated": True}
    assert not post_ok("escalate_ticket", {"ticket_id": 6}, out, state)
    assert_error_unchanged(state, "escalate_ticket", "already escalated", ticket_id=6)
    assert_error_unchanged(state, "escalate_ticket", "only open", ticket_id=3)
    assert_error_unchanged(fresh(), "escalate_ticket", "not authenticated", ticket_id=6)


def test_postcondition_catches_wrong_world():
    state = logged_in("jsmith")
    out = call(state, "close_ticket", ticket_id=4)
    state.tickets[4].status = "Open"  # a world that disagrees with the result
    assert post_ok("close_ticket", {"ticket_id": 4}, out, state)


# ------------------------------------------------------------------ state
def test_state_validation_and_counter():
    state = fresh(tickets={"40": {"id": 40, "title": "T", "created_by": "x"}})
    assert list(state.tickets) == [40] and state.next_ticket_id == 41
    assert fresh(tickets={}, next_ticket_id=500).next_ticket_id == 500
    with pytest.raises(ValueError, match="stored under id"):
        fresh(tickets={"1": {"id": 2, "title": "T", "created_by": "x"}})
    with pytest.raises(ValueError, match="not a registered user"):
        fresh(current_user="ghost")
    with pytest.raises(ValueError):
        fresh(tickets={"1": {"id": 1, "title": "T", "created_by": "x", "priority": 7}})


def test_snapshot_deterministic():
    def run():
        state = logged_in("support_amy")
        call(state, "create_ticket", subject="A", description="B", priority=3)
        call(state, "assign_ticket", ticket_id=9, assignee="support_raj")
        call(state, "add_ticket_comment", ticket_id=9, comment="on it")
        call(state, "resolve_ticket", ticket_id=9, resolution="done")
        return snap(state)

    assert run() == run()
    assert snap(fresh()) == snap(fresh())
    data = DOMAIN.snapshot(fresh())
    assert sorted(data["tickets"]) == [str(i) for i in range(1, 9)]
    assert DOMAIN.load_state(data).model_dump() == fresh().model_dump()  # the snapshot round-trips


def test_environment_stage_leaves_world_on_error():
    env = Environment(["ticket"], {"ticket": {"current_user": "jsmith"}})
    before = env.snapshot()
    result, staged = env.stage("edit_ticket", {"ticket_id": 5, "updates": {"priority": 2}})
    assert "error" in result and env.snapshot() == before
    result, staged = env.stage("edit_ticket", {"ticket_id": 4, "updates": {"priority": 2}})
    assert env.snapshot() == before  # staged, not yet committed
    env.commit("edit_ticket", staged)
    assert env.snapshot()["ticket"]["tickets"]["4"]["priority"] == 2


# ------------------------------------------------------------------ worked solutions
def test_slot_values_and_paraphrases_cover_the_ticket_solutions():
    from forethought.kernel.solution_file import load_solution

    root = Path(__file__).resolve().parents[1] / "data_gen"
    files = solution_paths("ticket", at_least=42)
    vals = json.loads((root / "slot_values" / "ticket.json").read_text())
    for k, values in vals.items():
        assert len(values) >= 8 and len(set(map(json.dumps, values))) == len(values), k
    fs = json.loads((root / "slot_values" / "file_system.json").read_text())
    cross = 0
    for path in files:
        sol = load_solution(path)
        cross += len(sol.domains) > 1
        pool = dict(fs if "file_system" in sol.domains else {}, **vals)
        for name, slot in sol.slots.items():
            assert slot.value in pool.get(slot.type, []), f"{path.name}: ${{{name}}}={slot.value!r} is not listed"
        for i, turn in enumerate(sol.turns):
            assert len(turn.paraphrases) >= 2, f"{path.name} turn {i}: needs >= 2 paraphrases"
    assert cross >= 4


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("ticket", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
