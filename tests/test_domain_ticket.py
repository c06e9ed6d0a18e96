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

D = load_domain("ticket")


def fresh(**over):
    return D.load_state(over)


def call(state, name, **args):
    return D.tools[name](state, args)


def snap(state) -> str:
    return json.dumps(D.snapshot(state), sort_keys=True)


def logged_in(user="support_amy", **over):
    return fresh(current_user=user, **over)


def assert_error_unchanged(state, name, fragment, **args):
    before = snap(state)
    out = call(state, name, **args)
    assert "error" in out, out
    assert fragment.lower() in out["error"].lower(), out["error"]
    assert snap(state) == before


def post_ok(name, args, result, state):
    spec = D.tools[name].spec
    return toolgate.postcondition(spec, D.tools[name], args, result, state)


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
    assert set(D.tools) == expected


def test_schemas_from_signatures():
    create = D.tools["create_ticket"].spec
    assert create.required == ["subject", "description", "priority"]
    assert create.param_schema("priority")["type"] == "integer"
    assert D.tools["get_user_tickets"].spec.required == []
    assert D.tools["get_user_tickets"].spec.param_schema("status")["enum"] == [
        "Open",
        "In Progress",
        "Resolved",
        "Closed",
    ]
    assert D.tools["edit_ticket"].spec.param_schema("updates")["type"] == "object"
    assert all(D.tools[n].spec.description for n in D.tools)


def test_side_effect_flags():
    reads = {"ticket_get_login_status", "get_ticket", "get_user_tickets", "search_tickets"}
    for name, t in D.tools.items():
        assert t.spec.side_effect == (name not in reads), name


def test_prerequisites_as_intended():
    pre = {n: [(p.key, p.sat.op, p.sat.value) for p in t.spec.prerequisites] for n, t in D.tools.items()}
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
    written = {k for t in D.tools.values() for k in t.spec.writes}
    assert {k for ps in pre.values() for k, _, _ in ps} <= written


def test_writes_reach_the_scratchpad():
    s = fresh()
    spec = D.tools["ticket_login"].spec
    args = {"username": "support_amy", "password": "Amy$upport1"}
    res = call(s, "ticket_login", **args)
    w = toolgate.declared_writes(spec, args, res)
    assert w["ticket_logged_in"] is True and w["ticket_role"] == "agent" and w["ticket_user"] == "support_amy"
    assert w["username"] == "support_amy"  # bound arguments are written too
    args = {"subject": "X", "description": "Y", "priority": 2}
    res = call(s, "create_ticket", **args)
    w = toolgate.declared_writes(D.tools["create_ticket"].spec, args, res)
    assert w["ticket_id"] == 9 and w["ticket_status"] == "Open" and w["subject"] == "X"
    w = toolgate.declared_writes(
        D.tools["search_tickets"].spec, {"keyword": "export"}, call(s, "search_tickets", keyword="export")
    )
    assert w["ticket_id"] == 4 and w["ticket_status"] == "Open"
    w = toolgate.declared_writes(
        D.tools["search_tickets"].spec, {"keyword": "zzz"}, call(s, "search_tickets", keyword="zzz")
    )
    assert "ticket_id" not in w  # no hit: nothing about a ticket is written
    w = toolgate.declared_writes(D.tools["get_ticket"].spec, {"ticket_id": 2}, call(s, "get_ticket", ticket_id=2))
    assert (w["ticket_status"], w["ticket_priority"], w["ticket_assignee"]) == ("In Progress", 4, "support_amy")
    assert "priority" not in w and "description" not in w  # fields of the ticket are namespaced
    w = toolgate.declared_writes(D.tools["ticket_logout"].spec, {}, call(s, "ticket_logout"))
    assert w == {"ticket_logged_in": False, "ticket_user": None, "ticket_role": None}


def test_prerequisite_checks_against_scratchpad():
    edit = D.tools["edit_ticket"].spec.prerequisites
    S = Scratchpad({"ticket_logged_in": True})
    assert [toolgate.check(p, S) for p in edit] == ["met", "absent"]
    S.set("ticket_status", "Closed", "test")
    assert toolgate.check(edit[1], S) == "not_met"
    role = D.tools["resolve_ticket"].spec.prerequisites[1]
    assert toolgate.check(role, Scratchpad({"ticket_role": "customer"})) == "not_met"
    assert toolgate.check(role, Scratchpad({"ticket_role": "admin"})) == "met"
    assert toolgate.check(role, Scratchpad({"ticket_role": None})) == "not_met"


# ------------------------------------------------------------------ session
def test_login_status_logout():
    s = fresh()
    assert call(s, "ticket_get_login_status") == {"login_status": False, "username": None, "role": None}
    assert_error_unchanged(s, "ticket_login", "invalid", username="jsmith", password="wrong")
    assert_error_unchanged(s, "ticket_login", "invalid", username="nobody", password="x")
    assert_error_unchanged(s, "ticket_logout", "not authenticated")
    out = call(s, "ticket_login", username="jsmith", password="Jsmith#2024")
    assert out == {"success": True, "username": "jsmith", "role": "customer"}
    assert not post_ok("ticket_login", {"username": "jsmith"}, out, s)
    assert call(s, "ticket_get_login_status") == {"login_status": True, "username": "jsmith", "role": "customer"}
    call(s, "ticket_login", username="admin_lee", password="AdminLee#99")  # switch user
    assert s.current_user == "admin_lee"
    assert call(s, "ticket_logout") == {"success": True}
    assert s.current_user is None and not post_ok("ticket_logout", {}, {}, s)


# ------------------------------------------------------------------ tickets
def test_create_ticket():
    s = logged_in("jsmith")
    out = call(s, "create_ticket", subject="VPN down", description="No tunnel", priority=5)
    assert out["id"] == 9 and out["status"] == "Open" and out["created_by"] == "jsmith"
    args = {"subject": "VPN down", "description": "No tunnel", "priority": 5}
    assert not post_ok("create_ticket", args, out, s)
    assert call(s, "create_ticket", subject="Two", description="", priority=1)["id"] == 10
    assert s.next_ticket_id == 11


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
    s = fresh()
    t = call(s, "get_ticket", ticket_id=3)
    assert t["status"] == "Resolved" and t["resolution"] and t["comments"] == []
    assert_error_unchanged(s, "get_ticket", "not found", ticket_id=99)
    assert_error_unchanged(s, "get_ticket", "invalid ticket id", ticket_id="3")


def test_get_user_tickets_newest_first_and_filtered():
    s = logged_in("jsmith")
    out = call(s, "get_user_tickets")
    assert [t["id"] for t in out["tickets"]] == [4, 1] and out["count"] == 2
    call(s, "close_ticket", ticket_id=1)
    assert [t["id"] for t in call(s, "get_user_tickets", status="Open")["tickets"]] == [4]
    assert call(s, "get_user_tickets", status="Resolved") == {"tickets": [], "count": 0}
    assert_error_unchanged(fresh(), "get_user_tickets", "not authenticated")


def test_search_tickets():
    s = fresh()
    out = call(s, "search_tickets", keyword="PASSWORD")
    assert [t["id"] for t in out["tickets"]] == [3]  # title, case-insensitive
    assert [t["id"] for t in call(s, "search_tickets", keyword="twice")["tickets"]] == [2]  # description
    assert_error_unchanged(s, "search_tickets", "keyword", keyword=" ")


def test_close_ticket():
    s = logged_in("jsmith")
    out = call(s, "close_ticket", ticket_id=4)
    assert out["status"] == "Closed" and s.tickets[4].status == "Closed"
    assert not post_ok("close_ticket", {"ticket_id": 4}, out, s)
    assert_error_unchanged(s, "close_ticket", "already closed", ticket_id=4)
    assert_error_unchanged(s, "close_ticket", "not found", ticket_id=99)
    assert_error_unchanged(fresh(), "close_ticket", "not authenticated", ticket_id=1)


def test_resolve_ticket():
    s = logged_in("support_raj")
    out = call(s, "resolve_ticket", ticket_id=1, resolution="Fixed the CDN")
    assert out == {"id": 1, "status": "Resolved", "resolution": "Fixed the CDN"}
    assert not post_ok("resolve_ticket", {"ticket_id": 1, "resolution": "Fixed the CDN"}, out, s)
    assert_error_unchanged(s, "resolve_ticket", "only open", ticket_id=1, resolution="again")
    assert_error_unchanged(s, "resolve_ticket", "only open", ticket_id=5, resolution="closed one")
    assert_error_unchanged(s, "resolve_ticket", "resolution", ticket_id=4, resolution="")
    assert_error_unchanged(logged_in("jsmith"), "resolve_ticket", "permission denied", ticket_id=4, resolution="x")


def test_edit_ticket_keeps_other_fields():
    s = logged_in("jsmith")
    before = s.tickets[4].model_copy()
    out = call(s, "edit_ticket", ticket_id=4, updates={"priority": 2})
    t = s.tickets[4]
    assert (t.priority, t.title, t.description, t.status) == (2, before.title, before.description, before.status)
    assert out["priority"] == 2 and not post_ok("edit_ticket", {"ticket_id": 4, "updates": {"priority": 2}}, out, s)
    call(s, "edit_ticket", ticket_id=4, updates={"title": "New", "description": "Desc"})
    assert (s.tickets[4].title, s.tickets[4].description, s.tickets[4].priority) == ("New", "Desc", 2)


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
    s = logged_in("li_wei")
    out = call(s, "reopen_ticket", ticket_id=3)
    assert out == {"id": 3, "status": "Open"} and s.tickets[3].resolution is None
    call(s, "reopen_ticket", ticket_id=5)
    assert s.tickets[5].status == "Open"
    assert_error_unchanged(s, "reopen_ticket", "only resolved or closed", ticket_id=1)


def test_assign_ticket():
    s = logged_in("support_amy")
    out = call(s, "assign_ticket", ticket_id=1, assignee="support_kim")
    assert out == {"id": 1, "status": "In Progress", "assignee": "support_kim"}
    assert not post_ok("assign_ticket", {"ticket_id": 1, "assignee": "support_kim"}, out, s)
    assert_error_unchanged(s, "assign_ticket", "not a support agent", ticket_id=4, assignee="jsmith")
    assert_error_unchanged(s, "assign_ticket", "not a support agent", ticket_id=4, assignee="ghost")
    assert_error_unchanged(s, "assign_ticket", "only open", ticket_id=3, assignee="support_kim")
    assert_error_unchanged(
        logged_in("jsmith"), "assign_ticket", "permission denied", ticket_id=4, assignee="support_kim"
    )


def test_add_ticket_comment():
    s = logged_in("maria_g")
    out = call(s, "add_ticket_comment", ticket_id=2, comment="Any update?")
    assert out["comments"] == 1 and s.tickets[2].comments[0].author == "maria_g"
    assert not post_ok("add_ticket_comment", {"ticket_id": 2, "comment": "Any update?"}, out, s)
    assert call(s, "add_ticket_comment", ticket_id=3, comment="Thanks")["status"] == "Resolved"
    assert_error_unchanged(s, "add_ticket_comment", "closed", ticket_id=5, comment="hello")
    assert_error_unchanged(s, "add_ticket_comment", "comment", ticket_id=2, comment="")


def test_escalate_ticket():
    s = logged_in("jsmith")
    out = call(s, "escalate_ticket", ticket_id=6)
    assert out == {"id": 6, "status": "Open", "priority": 5, "escalated": True}
    assert not post_ok("escalate_ticket", {"ticket_id": 6}, out, s)
    assert_error_unchanged(s, "escalate_ticket", "already escalated", ticket_id=6)
    assert_error_unchanged(s, "escalate_ticket", "only open", ticket_id=3)
    assert_error_unchanged(fresh(), "escalate_ticket", "not authenticated", ticket_id=6)


def test_postcondition_catches_wrong_world():
    s = logged_in("jsmith")
    out = call(s, "close_ticket", ticket_id=4)
    s.tickets[4].status = "Open"  # a world that disagrees with the result
    assert post_ok("close_ticket", {"ticket_id": 4}, out, s)


# ------------------------------------------------------------------ state
def test_state_validation_and_counter():
    s = fresh(tickets={"40": {"id": 40, "title": "T", "created_by": "x"}})
    assert list(s.tickets) == [40] and s.next_ticket_id == 41
    assert fresh(tickets={}, next_ticket_id=500).next_ticket_id == 500
    with pytest.raises(ValueError, match="stored under id"):
        fresh(tickets={"1": {"id": 2, "title": "T", "created_by": "x"}})
    with pytest.raises(ValueError, match="not a registered user"):
        fresh(current_user="ghost")
    with pytest.raises(ValueError):
        fresh(tickets={"1": {"id": 1, "title": "T", "created_by": "x", "priority": 7}})


def test_snapshot_deterministic():
    def run():
        s = logged_in("support_amy")
        call(s, "create_ticket", subject="A", description="B", priority=3)
        call(s, "assign_ticket", ticket_id=9, assignee="support_raj")
        call(s, "add_ticket_comment", ticket_id=9, comment="on it")
        call(s, "resolve_ticket", ticket_id=9, resolution="done")
        return snap(s)

    assert run() == run()
    assert snap(fresh()) == snap(fresh())
    data = D.snapshot(fresh())
    assert sorted(data["tickets"]) == [str(i) for i in range(1, 9)]
    assert D.load_state(data).model_dump() == fresh().model_dump()  # the snapshot round-trips


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
    for k, v in vals.items():
        assert len(v) >= 8 and len(set(map(json.dumps, v))) == len(v), k
    fs = json.loads((root / "slot_values" / "file_system.json").read_text())
    cross = 0
    for f in files:
        sol = load_solution(f)
        cross += len(sol.domains) > 1
        pool = dict(fs if "file_system" in sol.domains else {}, **vals)
        for name, slot in sol.slots.items():
            assert slot.value in pool.get(slot.type, []), f"{f.name}: ${{{name}}}={slot.value!r} is not listed"
        for i, turn in enumerate(sol.turns):
            assert len(turn.paraphrases) >= 2, f"{f.name} turn {i}: needs >= 2 paraphrases"
    assert cross >= 4


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("ticket", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
