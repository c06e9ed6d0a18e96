"""The kernel on your own Python tools (kernel/python_tools.py) through a Session (kernel/session.py): the schema from
signatures and docstrings, the scratchpad carried across turns, ToolGate's prerequisite blocking a call, a failed
postcondition halting the task with nothing committed, and live functions (a world outside the process) versus an
object's methods (staged on a copy)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from forethought.kernel.python_tools import PythonTools, tool
from forethought.kernel.records import KernelConfig
from forethought.kernel.session import Session
from tests.oracle_turns import send, task, turn


class Event(BaseModel):
    title: str
    status: str = "scheduled"


def _is_cancelled(args: dict[str, Any], result: Any, state: Any) -> str | None:
    return (
        None if state.events[args["event_id"]].status == "cancelled" else f"event {args['event_id']} is not cancelled"
    )


class Calendar:
    """A calendar whose tools change its own state: calls run on a copy, committed when their checks hold."""

    def __init__(self) -> None:
        self.events: dict[str, Event] = {"e1": Event(title="Standup"), "e2": Event(title="Review")}
        self.user: str | None = None

    @tool(side_effect=True, writes={"session": "result.token"})
    def login(self, user: str) -> dict:
        """Log in to the calendar.

        Args:
            user: The user name.
        """
        self.user = user
        return {"token": f"tok-{user}"}

    @tool(writes={"event": "result"})
    def get_event(self, event_id: str) -> Event:
        """Look up an event.

        Args:
            event_id: The event's id, e.g. e1.
        """
        return self.events[event_id]

    @tool(side_effect=True, prerequisites=["session"], post=[_is_cancelled])
    def cancel_event(self, event_id: str, reason: str = "") -> dict:
        """Cancel an event (needs a session).

        Args:
            event_id: The event's id.
            reason: Why, for the attendees.
        """
        self.events[event_id].status = "cancelled"
        return {"cancelled": event_id}

    @tool(side_effect=True, post=[_is_cancelled])
    def cancel_event_v0(self, event_id: str) -> dict:
        """An older cancel that only marks the event as pending (its postcondition fails).

        Args:
            event_id: The event's id.
        """
        self.events[event_id].status = "pending"
        return {"cancelled": event_id}


def test_the_schema_comes_from_the_signature_and_the_docstring():
    reg = PythonTools(Calendar()).registry()
    spec = reg.get("cancel_event")
    assert spec.description == "Cancel an event (needs a session)."
    assert spec.parameters["properties"]["event_id"] == {"type": "string", "description": "The event's id."}
    assert spec.required == ["event_id"] and spec.parameters["properties"]["reason"]["default"] == ""
    assert (spec.side_effect, [p.key for p in spec.prerequisites], spec.source) == (True, ["session"], "python")
    assert reg.get("get_event").side_effect is False and reg.get("login").writes == {"session": "result.token"}


def test_a_session_carries_the_scratchpad_across_turns_and_toolgate_blocks_a_call_without_its_prerequisite():
    cal = PythonTools(Calendar())
    session = Session(cal, backend=None, config=KernelConfig(cvc=True))
    # Turn 0: cancel before logging in: ToolGate's precondition (session in S) refuses the call; nothing changes.
    blocked = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                                   prerequisites=[{"key": "session", "outcome": "absent", "retrieval": None, "recheck": "not_met"}])]))  # fmt: skip
    assert blocked.outcomes["t1"].status == "blocked" and blocked.committed_calls == []
    assert cal.snapshot()["events"]["e1"]["status"] == "scheduled"
    # Turn 1: log in; turn 2: cancel, with the session turn 1 left in S.
    send(session, turn("log in as ann", [task("t1", "login", {"user": "ann"})]))
    assert session.scratchpad.get("session") == "tok-ann"
    done = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                                prerequisites=[{"key": "session", "outcome": "met"}])]))  # fmt: skip
    assert done.outcomes["t1"].status == "executed", done.outcomes
    assert [c.tool for c in done.committed_calls] == ["cancel_event"]
    assert cal.snapshot()["events"]["e1"]["status"] == "cancelled" and cal.snapshot()["user"] == "ann"
    assert len(session.turns) == len(session.traces) == 3


def test_a_failed_postcondition_halts_the_task_and_the_staged_copy_is_dropped():
    cal = PythonTools(Calendar())
    session = Session(cal, backend=None)
    res = send(session, turn("cancel e2", [task("t1", "cancel_event_v0", {"event_id": "e2"})]))
    assert res.outcomes["t1"].status == "tool_failed" and "event e2 is not cancelled" in res.outcomes["t1"].reason
    assert res.calls[0].rejected == ["post: event e2 is not cancelled"] and not res.calls[0].committed
    assert cal.snapshot()["events"]["e2"]["status"] == "scheduled"  # the world is as it was


SENT: list[dict[str, str]] = []


def _delivered(args: dict[str, Any], result: Any, state: Any) -> str | None:
    return None if result.get("status") == "delivered" else f"the mail to {args['to']} was not delivered"


@tool(side_effect=True, post=[_delivered], writes={"last_mail": "result"}, alternatives=["send_fax"])
def send_mail(to: str, body: str) -> dict:
    """Send an e-mail (a real side effect: it happens when the call runs).

    Args:
        to: The recipient's address.
        body: The text.
    """
    SENT.append({"to": to, "body": body})
    return {"status": "queued" if to.endswith(".invalid") else "delivered"}


@tool(side_effect=True)
def send_fax(to: str, body: str) -> dict:
    """Send a fax.

    Args:
        to: The recipient's number.
        body: The text.
    """
    SENT.append({"fax": to})
    return {"status": "delivered"}


def test_live_functions_run_for_real_and_a_failed_postcondition_halts_without_trying_another_tool():
    SENT.clear()
    tools = PythonTools([send_mail, send_fax])
    assert tools.live
    session = Session(tools, backend=None)
    ok = send(
        session, turn("mail ann@example.com: hi", [task("t1", "send_mail", {"to": "ann@example.com", "body": "hi"})])
    )
    assert ok.outcomes["t1"].status == "executed" and session.scratchpad.get("last_mail") == {"status": "delivered"}
    # The call happened (a live world cannot be copied): the kernel records the failed check, writes nothing to S,
    # and halts the task rather than trying a second tool after a real side effect.
    bad = send(
        session, turn("mail bob@x.invalid: hi", [task("t1", "send_mail", {"to": "bob@x.invalid", "body": "hi"})])
    )
    assert bad.outcomes["t1"].status == "tool_failed" and "was not delivered" in bad.outcomes["t1"].reason
    assert [c.tool for c in bad.calls] == ["send_mail"] and not bad.calls[0].committed
    assert SENT == [{"to": "ann@example.com", "body": "hi"}, {"to": "bob@x.invalid", "body": "hi"}]
    assert session.scratchpad.get("last_mail") == {"status": "delivered"}  # still turn 0's


def test_bad_tool_definitions_are_refused_where_they_are_written():
    with pytest.raises(TypeError):
        tool(side_efect=True)  # a misspelt option

    def varargs(*names: str) -> dict:
        return {}

    with pytest.raises(ValueError, match=r"\*names"):
        PythonTools([varargs])

    class Empty:
        pass

    with pytest.raises(ValueError, match="no @tool methods"):
        PythonTools(Empty())
    with pytest.raises(TypeError, match="no stage"):
        Session(object(), backend=None)


def test_an_imported_openai_tool_is_side_effecting_unless_annotated():
    """OpenAI's tools format cannot say whether a tool changes anything (cancel_event does): assumed, with a note, as
    MCP's spec defaults, so the kernel checks the request's intent before it calls one."""
    from forethought.kernel.registry import parse_registry

    (spec,) = parse_registry([{"type": "function", "function": {"name": "cancel_event", "parameters": {"type": "object", "properties": {}}}}],
                             source="tools.json")  # fmt: skip
    assert spec.side_effect is True and any("side effects" in n for n in spec.notes)


def test_a_tool_result_json_cannot_hold_fails_the_call_and_dates_become_json():
    import datetime
    import math

    @tool
    def reading(sensor: str) -> dict:
        """A sensor reading.

        Args:
            sensor: The sensor's name.
        """
        return {"value": math.nan} if sensor == "broken" else {"at": datetime.date(2026, 12, 3), "value": 1.5}

    tools = PythonTools([reading])
    assert tools.stage("reading", {"sensor": "ok"})[0] == {"at": "2026-12-03", "value": 1.5}
    result, staged = tools.stage("reading", {"sensor": "broken"})
    assert staged is None and "JSON cannot hold" in result["error"]


@pytest.mark.parametrize(
    "body, needle",
    [
        ("format_version: true\ntools: {}\n", "format_version True"),
        (
            "tools:\n  cancel_event: {side_effect: 'yes'}\n",
            "tools.cancel_event.side_effect: Input should be a valid boolean",
        ),
        ("tools:\n  cancel_event: {alternatives: [cancel_event]}\n", "a tool is not its own alternative"),
        ("tools:\n  cancel_event: {writes: {event: param.id}}\n", "'param' is neither params.<parameter> nor result"),
        ("tools:\n  cancel_event: {writes: {event: 'params.event'}}\n", "'event' is not a parameter"),
        ("tools:\n  cancel_event: {writes: {status: 'const:{bad'}}\n", "is not const:<JSON>"),
        ("tools:\n  cancel_event: {writes: {'status[{params.x}]': result}}\n", "'x' is not a parameter"),
    ],
)
def test_an_annotation_that_would_be_guessed_at_is_refused(body, needle, tmp_path):
    """YAML's 'yes' is not taken for true, a tool is not its own alternative, and a declared write the kernel could
    not evaluate (a misspelt root, an unknown parameter, const: that is not JSON) is refused where it is declared."""
    from forethought.errors import UserError
    from forethought.kernel.registry import Registry, parse_registry
    from forethought.kernel.registry.annotations import annotate

    tools = [{"type": "function", "function": {"name": "cancel_event", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]  # fmt: skip
    reg = Registry(parse_registry(tools, source="tools.json"))
    (tmp_path / "a.yaml").write_text(body)
    with pytest.raises(UserError) as err:
        annotate(reg, tmp_path / "a.yaml")
    assert needle in err.value.message, err.value.message
