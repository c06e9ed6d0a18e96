"""A small MCP server written with the official SDK's server side (``mcp.server.mcpserver``), run as a subprocess by
tests/test_own_tools_mcp.py and docs/own_tools.md. Its state lives in the process: the kernel sees a live world.

    python calendar_server.py                       # stdio
    python calendar_server.py --http PORT           # streamable HTTP on 127.0.0.1:PORT/mcp
    python calendar_server.py --faults              # also `crash` (the process exits) and `hang` (never answers)
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

app = MCPServer("calendar")
EVENTS = {"e1": {"title": "Standup", "status": "scheduled"}, "e2": {"title": "Review", "status": "scheduled"}}
SESSIONS: set[str] = set()


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def get_event(event_id: str) -> dict:
    """Look up an event by id."""
    if event_id not in EVENTS:
        raise ToolError(f"no event {event_id}")
    return {"event_id": event_id, **EVENTS[event_id]}


@app.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def login(user: str) -> dict:
    """Log in; returns a session token."""
    SESSIONS.add(f"tok-{user}")
    return {"token": f"tok-{user}"}


@app.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def cancel_event(event_id: str) -> dict:
    """Cancel an event."""
    if event_id not in EVENTS:
        raise ToolError(f"no event {event_id}")
    EVENTS[event_id]["status"] = "cancelled"
    return {"event_id": event_id, "status": EVENTS[event_id]["status"]}


@app.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def archive_event(event_id: str) -> dict:
    """Archive an event (this server's version leaves it as it was, so the result says status 'scheduled')."""
    return {"event_id": event_id, "status": EVENTS[event_id]["status"]}


def crash() -> dict:
    """Exit the server process (a dead server, for the tests)."""
    os._exit(3)


def hang() -> dict:
    """Never answer (a silent server, for the tests)."""
    time.sleep(3600)
    return {}


if __name__ == "__main__":
    if "--faults" in sys.argv:
        app.tool(annotations=ToolAnnotations(readOnlyHint=True))(crash)
        app.tool(annotations=ToolAnnotations(readOnlyHint=True))(hang)
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        sys.exit(app.run(transport="streamable-http", host="127.0.0.1", port=port))
    sys.exit(app.run())
