"""The kernel over a real MCP server (tests/mcp_servers/calendar_server.py, written with the official SDK's server side)
started as a subprocess over stdio, through kernel/mcp_tools.py and a Session: the registry from tools/list with the
server's annotations, a sidecar annotations file for what MCP cannot say (prerequisites, writes, expected results),
S carried across turns, ToolGate's prerequisite blocking a call, a failed postcondition halting a task, and a dead
server raising ToolServerError with nothing committed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from forethought.errors import UserError  # noqa: E402
from forethought.kernel.mcp_tools import McpTools, ToolServerError  # noqa: E402
from forethought.kernel.records import KernelConfig  # noqa: E402
from forethought.kernel.session import Session  # noqa: E402
from tests.oracle_turns import send, task, turn  # noqa: E402

SERVER_FILE = Path(__file__).parent / "mcp_servers" / "calendar_server.py"
SERVER = [sys.executable, str(SERVER_FILE), "--faults"]  # with `crash` and `hang`
ANNOTATIONS = """\
format_version: 1
tools:
  login: {writes: {session: result.token}}
  cancel_event: {prerequisites: [session], expect: {status: cancelled}}
  archive_event: {expect: {status: archived}}
"""


@pytest.fixture
def calendar(tmp_path):
    ann = tmp_path / "calendar.annotations.yaml"
    ann.write_text(ANNOTATIONS)
    with McpTools(SERVER, annotations=ann, timeout_s=60) as tools:
        yield tools


def test_the_registry_comes_from_tools_list_and_the_annotations(calendar):
    reg = calendar.registry()
    assert [t.name for t in reg] == ["get_event", "login", "cancel_event", "archive_event", "crash", "hang"]
    assert {t.name: t.side_effect for t in reg} == {"get_event": False, "login": True, "cancel_event": True,
                                                   "archive_event": True, "crash": False, "hang": False}  # fmt: skip
    assert [p.key for p in reg.get("cancel_event").prerequisites] == ["session"] and reg.get("login").writes == {
        "session": "result.token"
    }
    assert reg.get("get_event").source == "mcp"


def test_turns_over_a_live_server(calendar):
    session = Session(calendar, backend=None, config=KernelConfig(cvc=True))
    # cancel before logging in: the prerequisite (session in S) blocks the call; the server is not called
    blocked = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                                   prerequisites=[{"key": "session", "outcome": "absent", "retrieval": None, "recheck": "not_met"}])]))  # fmt: skip
    assert blocked.outcomes["t1"].status == "blocked" and blocked.calls == []
    assert calendar.stage("get_event", {"event_id": "e1"})[0]["status"] == "scheduled"
    send(session, turn("log in as ann", [task("t1", "login", {"user": "ann"})]))
    assert session.scratchpad.get("session") == "tok-ann"  # the next turn sees it
    done = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                                prerequisites=[{"key": "session", "outcome": "met"}])]))  # fmt: skip
    assert done.outcomes["t1"].status == "executed" and [c.tool for c in done.committed_calls] == ["cancel_event"]
    assert calendar.stage("get_event", {"event_id": "e1"})[0]["status"] == "cancelled"
    # the server's archive leaves the event as it was: the expected result fails, the task halts, nothing reaches S
    failed = send(session, turn("archive e2", [task("t1", "archive_event", {"event_id": "e2"})]))
    assert (
        failed.outcomes["t1"].status == "tool_failed"
        and "result.status is 'scheduled', expected 'archived'" in failed.outcomes["t1"].reason
    )
    assert not failed.calls[0].committed and failed.committed_calls == []


def test_a_dead_server_stops_the_turn_with_nothing_committed(calendar):
    session = Session(calendar, backend=None)
    res = send(session, turn("crash", [task("t1", "crash", {})]))
    assert res.backend_error is not None and "tools/call crash got no answer" in res.backend_error["message"], (
        res.backend_error
    )
    assert res.committed_calls == [] and "t1" not in {k for k, o in res.outcomes.items() if o.status == "executed"}
    with pytest.raises(ToolServerError, match="get_event got no answer"):
        calendar.stage("get_event", {"event_id": "e1"})


def test_a_server_that_cannot_start_and_bad_annotations_are_clear_errors(tmp_path):
    with pytest.raises(ToolServerError, match="cannot start or initialise"):
        McpTools([sys.executable, "-c", "import sys; sys.exit(4)"], timeout_s=30)
    bad = tmp_path / "a.yaml"
    bad.write_text("tools:\n  login: {side_efect: true}\n")
    with pytest.raises(UserError, match=r"tools.login.side_efect: unknown field"):
        McpTools(SERVER, annotations=bad)  # refused before the server starts
    bad.write_text("tools:\n  logout: {side_effect: true}\n")
    with pytest.raises(UserError, match="annotates tools the registry does not have: logout"):
        McpTools(SERVER, annotations=bad, timeout_s=60)


def test_an_is_error_reply_is_a_failed_call_and_the_task_halts(calendar):
    """The server raises for an unknown event: the SDK answers isError, the kernel records a failed call."""
    result, staged = calendar.stage("get_event", {"event_id": "nope"})
    assert staged is None and "no event nope" in result["error"]
    session = Session(calendar, backend=None)
    res = send(session, turn("look up nope", [task("t1", "get_event", {"event_id": "nope"})]))
    assert res.outcomes["t1"].status == "tool_failed" and "no event nope" in res.outcomes["t1"].reason
    assert res.committed_calls == [] and res.backend_error is None


def test_a_server_that_does_not_answer_in_time_stops_the_turn_with_nothing_committed(calendar):
    calendar.timeout_s = 1.0  # each call waits this long (the fixture's start-up allowance was larger)
    session = Session(calendar, backend=None)
    res = send(session, turn("hang", [task("t1", "hang", {})]))
    assert res.backend_error is not None and "tools/call hang got no answer: timed out" in res.backend_error["message"]
    assert res.committed_calls == []


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_turns_over_streamable_http(tmp_path):
    """The same server over streamable HTTP (a subprocess listening on a local port): registry, S across turns, a
    blocked prerequisite; then the server is killed and the next call is a clear error with nothing committed."""
    import subprocess
    import time

    ann = tmp_path / "calendar.annotations.yaml"
    ann.write_text(ANNOTATIONS.replace("  archive_event: {expect: {status: archived}}\n", ""))
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(SERVER_FILE), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        tools = None
        for _ in range(120):  # until it listens (no wall-time assertion: a bounded number of tries)
            try:
                tools = McpTools(url=url, annotations=ann, timeout_s=30)
                break
            except ToolServerError:
                if server.poll() is not None:
                    pytest.fail(f"the HTTP server exited with {server.returncode}")
                time.sleep(0.5)
        assert tools is not None, "the HTTP server did not come up"
        with tools:
            assert tools.registry().get("cancel_event").side_effect and tools.where == url
            session = Session(tools, backend=None)
            blocked = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                        prerequisites=[{"key": "session", "outcome": "absent", "retrieval": None,
                                                        "recheck": "not_met"}])]))  # fmt: skip
            assert blocked.outcomes["t1"].status == "blocked" and blocked.calls == []
            send(session, turn("log in as ann", [task("t1", "login", {"user": "ann"})]))
            done = send(session, turn("cancel e1", [task("t1", "cancel_event", {"event_id": "e1"},
                                                         prerequisites=[{"key": "session", "outcome": "met"}])]))  # fmt: skip
            assert done.outcomes["t1"].status == "executed" and session.scratchpad.get("session") == "tok-ann"
            server.kill()
            server.wait(timeout=60)
            gone = send(session, turn("cancel e2", [task("t1", "cancel_event", {"event_id": "e2"},
                                                         prerequisites=[{"key": "session", "outcome": "met"}])]))  # fmt: skip
            assert gone.backend_error is not None and "got no answer" in gone.backend_error["message"]
            assert gone.committed_calls == []
    finally:
        server.kill()
        server.wait(timeout=60)
