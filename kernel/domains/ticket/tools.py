"""Support-ticket tools (BFCL TicketAPI style) over the simulated ticket system only.

Scratchpad facts the tools establish (their declared ``writes``) and need
(their ``prerequisites``):

- ``ticket_logged_in`` -- set by ``ticket_login`` (true), ``ticket_logout``
  (false) and ``ticket_get_login_status`` (the system's flag); every tool that
  changes a ticket or lists the user's own tickets needs it true.
- ``ticket_role`` / ``ticket_user`` -- the logged-in account's role and name,
  set by ``ticket_login`` and ``ticket_get_login_status`` (null after
  ``ticket_logout``); ``resolve_ticket`` and ``assign_ticket`` need a staff
  role (``agent`` or ``admin``).
- ``ticket_id`` / ``ticket_status`` -- the ticket in focus and its status.
  Every tool that takes a ticket id writes it (as a bound argument) and the
  resulting status; ``create_ticket`` writes the new id; ``search_tickets``
  and ``get_user_tickets`` write their first hit. ``edit_ticket`` and
  ``add_ticket_comment`` need the ticket not ``Closed``; ``resolve_ticket``,
  ``assign_ticket`` and ``escalate_ticket`` need it ``Open`` or
  ``In Progress``; ``reopen_ticket`` needs it ``Resolved`` or ``Closed``.
  When the status is absent, ``get_ticket`` retrieves it; when it is not met,
  ``reopen_ticket`` is the usual remediation. The status prerequisites are per
  ticket (entity ``ticket_id``): they consult ``ticket_status[<id>]``, the
  entry of the ticket the task names, which every status write also sets
  (docs/kernel.md, "Per-entity prerequisites"); the plain ``ticket_status`` is
  the status of the ticket in focus. The tools still re-check the real status
  and fail (``ToolError``) rather than act on a stale fact.
- ``ticket_title``, ``ticket_description``, ``ticket_priority``,
  ``ticket_assignee`` -- fields of the ticket in focus (``get_ticket``,
  ``edit_ticket``, ``assign_ticket``, ``escalate_ticket``), named apart from
  ``create_ticket``'s parameters (``subject``, ``description``, ``priority``) so that reading a
  ticket never silently supplies the arguments of the next ``create_ticket``.

``create_ticket`` names its title parameter ``subject``: the schema builder in
``kernel/domains/base.py`` strips every ``title`` key from the generated JSON
Schema, including a property called ``title``. The stored ticket field and the
``edit_ticket`` update key stay ``title``.

Every tool also checks the system's own state (login, role, status) and fails
with a ``ToolError`` when it disagrees, validating before it changes anything.
"""

from __future__ import annotations

from typing import Any

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, status_is
from .state import EDITABLE_FIELDS, STAFF_ROLES, Status, Ticket, TicketComment, TicketState

DOMAIN = Domain(
    "ticket",
    TicketState,
    "A simulated support-ticket system: log in, create, look up, search, edit, comment on, assign, escalate, resolve, close and reopen tickets.",
)
tool = DOMAIN.tool

LOGGED_IN = Prerequisite(
    key="ticket_logged_in", sat=Sat(op="truthy"), description="the user must be logged in to the ticket system"
)
STAFF = Prerequisite(
    key="ticket_role",
    sat=Sat(op="in", value=list(STAFF_ROLES)),
    description="the logged-in account must be a support agent or admin",
)
NOT_CLOSED = Prerequisite(
    key="ticket_status",
    sat=Sat(op="ne", value="Closed"),
    entity="ticket_id",
    description="the ticket must not be Closed",
)
ACTIVE = Prerequisite(
    key="ticket_status",
    entity="ticket_id",
    sat=Sat(op="in", value=["Open", "In Progress"]),
    description="the ticket must be Open or In Progress",
)
REOPENABLE = Prerequisite(
    key="ticket_status",
    entity="ticket_id",
    sat=Sat(op="in", value=["Resolved", "Closed"]),
    description="the ticket must be Resolved or Closed",
)

# A status write also goes to the entry of the ticket it is about (per-entity prerequisites).
STATUS_WRITES = {"ticket_status": "result.status", "ticket_status[{params.ticket_id}]": "result.status"}
FIRST_HIT_WRITES = {
    "ticket_id": "result.tickets.0.id",
    "ticket_status": "result.tickets.0.status",
    "ticket_status[{result.tickets.0.id}]": "result.tickets.0.status",
}


# ------------------------------------------------------------------ helpers
def _need_login(state: TicketState) -> str:
    if state.current_user is None:
        raise ToolError("User not authenticated. Please log in to the ticket system first.")
    return state.current_user


def _need_staff(state: TicketState) -> str:
    user = _need_login(state)
    if state.users[user].role not in STAFF_ROLES:
        raise ToolError(f"Permission denied: {user} is not a support agent.")
    return user


def _ticket(state: TicketState, ticket_id: int) -> Ticket:
    if isinstance(ticket_id, bool) or not isinstance(ticket_id, int):
        raise ToolError(f"Invalid ticket id {ticket_id!r}: must be an integer.")
    ticket = state.tickets.get(ticket_id)
    if ticket is None:
        raise ToolError(f"Ticket with ID {ticket_id} not found.")
    return ticket


def _status_among(ticket: Ticket, allowed: tuple[str, ...], done: str) -> None:
    if ticket.status not in allowed:
        raise ToolError(f"Ticket {ticket.id} is {ticket.status}; only {' or '.join(allowed)} tickets can be {done}.")


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{name} must be a non-empty string.")
    return value


def _priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ToolError(f"Invalid priority {value!r}: priority must be an integer from 1 to 5.")
    return value


def _view(ticket: Ticket) -> dict[str, Any]:
    return ticket.model_dump(mode="json")


def _brief(ticket: Ticket) -> dict[str, Any]:
    return {"id": ticket.id, "title": ticket.title, "status": ticket.status, "priority": ticket.priority}


# ----------------------------------------------------------- postconditions
def _post_logged_in(args: dict, result: Any, state: TicketState) -> str | None:
    return None if state.current_user == args["username"] else "login did not start a session for that user"


def _post_logged_out(args: dict, result: Any, state: TicketState) -> str | None:
    return None if state.current_user is None else "logout left a user logged in"


def _post_created(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(result.get("id"))
    if ticket is None:
        return f"ticket {result.get('id')} was not recorded"
    want = (args["subject"], args["description"], args["priority"], "Open", state.current_user)
    if (ticket.title, ticket.description, ticket.priority, ticket.status, ticket.created_by) != want:
        return f"ticket {ticket.id} does not match the request"
    return None


def _status_is(status: str):
    return status_is("tickets", "ticket_id", status, "ticket", name=f"status_is_{status.lower().replace(' ', '_')}")


def _post_resolution(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(args["ticket_id"])
    return None if ticket is not None and ticket.resolution == args["resolution"] else "resolution was not recorded"


def _post_edited(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(args["ticket_id"])
    if ticket is None:
        return f"ticket {args['ticket_id']} disappeared"
    wrong = [k for k, v in args["updates"].items() if getattr(ticket, k) != v]
    return f"fields not updated: {wrong}" if wrong else None


def _post_assigned(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(args["ticket_id"])
    return None if ticket is not None and ticket.assignee == args["assignee"] else "ticket is not assigned to that user"


def _post_commented(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(args["ticket_id"])
    if ticket is None or not ticket.comments:
        return "comment was not recorded"
    last = ticket.comments[-1]
    return (
        None
        if (last.author, last.text) == (state.current_user, args["comment"])
        else "last comment differs from the request"
    )


def _post_escalated(args: dict, result: Any, state: TicketState) -> str | None:
    ticket = state.tickets.get(args["ticket_id"])
    return (
        None
        if ticket is not None and ticket.escalated and ticket.priority == 5
        else "ticket is not escalated to priority 5"
    )


# ------------------------------------------------------------ session tools
@tool(
    side_effect=True,
    writes={"ticket_logged_in": "const:true", "ticket_user": "params.username", "ticket_role": "result.role"},
    post=[_post_logged_in],
    secret=("password",),
)
def ticket_login(state: TicketState, username: str, password: str) -> dict:
    """Log in to the ticket system with a username and password (switches user if someone else is logged in).

    Args:
        username: Ticket system username.
        password: Password of that user.
    """
    user = state.users.get(username)
    if user is None or user.password != password:
        raise ToolError("Invalid username or password.")
    state.current_user = username
    return {"success": True, "username": username, "role": user.role}


@tool(
    writes={"ticket_logged_in": "result.login_status", "ticket_user": "result.username", "ticket_role": "result.role"}
)
def ticket_get_login_status(state: TicketState) -> dict:
    """Tell whether a user is logged in to the ticket system, and who."""
    user = state.current_user
    return {
        "login_status": user is not None,
        "username": user,
        "role": state.users[user].role if user is not None else None,
    }


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN],
    writes={"ticket_logged_in": "const:false", "ticket_user": "const:null", "ticket_role": "const:null"},
    post=[_post_logged_out],
)
def ticket_logout(state: TicketState) -> dict:
    """Log out of the ticket system."""
    _need_login(state)
    state.current_user = None
    return {"success": True}


# ------------------------------------------------------------- ticket tools
@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN],
    writes={"ticket_id": "result.id", "ticket_status": "result.status", "ticket_status[{result.id}]": "result.status"},
    post=[_post_created],
)
def create_ticket(state: TicketState, subject: str, description: str, priority: int) -> dict:
    """Create a support ticket for the logged-in user; it starts Open.

    Args:
        subject: Short title of the ticket.
        description: What the problem is.
        priority: Priority from 1 (lowest) to 5 (highest).
    """
    user = _need_login(state)
    _text("subject", subject)
    _priority(priority)
    if not isinstance(description, str):
        raise ToolError("description must be a string.")
    ticket = Ticket(id=state.next_ticket_id, title=subject, description=description, priority=priority, created_by=user)
    state.tickets[ticket.id] = ticket
    state.next_ticket_id += 1
    return _view(ticket)


@tool(
    writes={
        **STATUS_WRITES,
        "ticket_title": "result.title",
        "ticket_description": "result.description",
        "ticket_priority": "result.priority",
        "ticket_assignee": "result.assignee",
    }
)
def get_ticket(state: TicketState, ticket_id: int) -> dict:
    """Get the details of a ticket by its id: title, description, status, priority, assignee, comments.

    Args:
        ticket_id: Id of the ticket.
    """
    return _view(_ticket(state, ticket_id))


@tool(prerequisites=[LOGGED_IN], writes=FIRST_HIT_WRITES)
def get_user_tickets(state: TicketState, status: Status | None = None) -> dict:
    """List the tickets the logged-in user created, newest first, optionally only those with a status.

    Args:
        status: Only tickets with this status; omit for all.
    """
    user = _need_login(state)
    rows = [t for t in state.tickets.values() if t.created_by == user and (status is None or t.status == status)]
    rows.sort(key=lambda t: -t.id)
    return {"tickets": [_brief(t) for t in rows], "count": len(rows)}


@tool(writes=FIRST_HIT_WRITES)
def search_tickets(state: TicketState, keyword: str) -> dict:
    """Find tickets whose title or description contains a keyword (case-insensitive), lowest id first.

    Args:
        keyword: Text to look for.
    """
    kw = _text("keyword", keyword).strip().lower()
    rows = sorted(
        (t for t in state.tickets.values() if kw in t.title.lower() or kw in t.description.lower()), key=lambda t: t.id
    )
    return {"tickets": [_brief(t) for t in rows], "count": len(rows)}


@tool(side_effect=True, prerequisites=[LOGGED_IN], writes=STATUS_WRITES, post=[_status_is("Closed")])
def close_ticket(state: TicketState, ticket_id: int) -> dict:
    """Close a ticket.

    Args:
        ticket_id: Id of the ticket to close.
    """
    _need_login(state)
    ticket = _ticket(state, ticket_id)
    if ticket.status == "Closed":
        raise ToolError(f"Ticket {ticket_id} is already closed.")
    ticket.status = "Closed"
    return {"id": ticket.id, "status": ticket.status, "message": f"Ticket {ticket.id} has been closed successfully."}


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, STAFF, ACTIVE],
    writes=STATUS_WRITES,
    post=[_status_is("Resolved"), _post_resolution],
)
def resolve_ticket(state: TicketState, ticket_id: int, resolution: str) -> dict:
    """Resolve an open ticket with a resolution note (support agents only).

    Args:
        ticket_id: Id of the ticket to resolve.
        resolution: How the problem was solved.
    """
    _need_staff(state)
    ticket = _ticket(state, ticket_id)
    _text("resolution", resolution)
    _status_among(ticket, ("Open", "In Progress"), "resolved")
    ticket.status = "Resolved"
    ticket.resolution = resolution
    return {"id": ticket.id, "status": ticket.status, "resolution": resolution}


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, NOT_CLOSED],
    writes={
        **STATUS_WRITES,
        "ticket_title": "result.title",
        "ticket_description": "result.description",
        "ticket_priority": "result.priority",
    },
    post=[_post_edited],
)
def edit_ticket(state: TicketState, ticket_id: int, updates: dict[str, str | int]) -> dict:
    """Change some fields of a ticket (title, description, priority); fields not given are kept.

    Args:
        ticket_id: Id of the ticket to edit.
        updates: The fields to change and their new values, e.g. {"priority": 4}.
    """
    _need_login(state)
    ticket = _ticket(state, ticket_id)
    if ticket.status == "Closed":
        raise ToolError(f"Ticket {ticket_id} is closed and cannot be edited; reopen it first.")
    if not isinstance(updates, dict) or not updates:
        raise ToolError("updates must name at least one field to change.")
    bad = [k for k in updates if k not in EDITABLE_FIELDS]
    if bad:
        raise ToolError(f"Invalid fields for update: {bad}; editable fields are {list(EDITABLE_FIELDS)}.")
    if "title" in updates:
        _text("title", updates["title"])
    if "description" in updates and not isinstance(updates["description"], str):
        raise ToolError("description must be a string.")
    if "priority" in updates:
        _priority(updates["priority"])
    for k, value in updates.items():
        setattr(ticket, k, value)
    return _view(ticket)


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, REOPENABLE],
    writes=STATUS_WRITES,
    post=[_status_is("Open")],
)
def reopen_ticket(state: TicketState, ticket_id: int) -> dict:
    """Reopen a Resolved or Closed ticket (its resolution is cleared).

    Args:
        ticket_id: Id of the ticket to reopen.
    """
    _need_login(state)
    ticket = _ticket(state, ticket_id)
    _status_among(ticket, ("Resolved", "Closed"), "reopened")
    ticket.status = "Open"
    ticket.resolution = None
    return {"id": ticket.id, "status": ticket.status}


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, STAFF, ACTIVE],
    writes={**STATUS_WRITES, "ticket_assignee": "result.assignee"},
    post=[_post_assigned],
)
def assign_ticket(state: TicketState, ticket_id: int, assignee: str) -> dict:
    """Assign an open ticket to a support agent (support agents only); an Open ticket becomes In Progress.

    Args:
        ticket_id: Id of the ticket to assign.
        assignee: Username of the support agent who takes it.
    """
    _need_staff(state)
    ticket = _ticket(state, ticket_id)
    who = state.users.get(assignee)
    if who is None or who.role not in STAFF_ROLES:
        raise ToolError(f"Cannot assign to {assignee!r}: not a support agent.")
    _status_among(ticket, ("Open", "In Progress"), "assigned")
    ticket.assignee = assignee
    ticket.status = "In Progress"
    return {"id": ticket.id, "status": ticket.status, "assignee": assignee}


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, NOT_CLOSED],
    writes=STATUS_WRITES,
    post=[_post_commented],
)
def add_ticket_comment(state: TicketState, ticket_id: int, comment: str) -> dict:
    """Add a comment to a ticket that is not closed, signed by the logged-in user.

    Args:
        ticket_id: Id of the ticket.
        comment: Text of the comment.
    """
    user = _need_login(state)
    ticket = _ticket(state, ticket_id)
    _text("comment", comment)
    if ticket.status == "Closed":
        raise ToolError(f"Ticket {ticket_id} is closed; reopen it before commenting.")
    ticket.comments.append(TicketComment(author=user, text=comment))
    return {"id": ticket.id, "status": ticket.status, "comments": len(ticket.comments)}


@tool(
    side_effect=True,
    prerequisites=[LOGGED_IN, ACTIVE],
    writes={**STATUS_WRITES, "ticket_priority": "result.priority"},
    post=[_post_escalated],
)
def escalate_ticket(state: TicketState, ticket_id: int) -> dict:
    """Escalate an Open or In Progress ticket: it is flagged and raised to priority 5.

    Args:
        ticket_id: Id of the ticket to escalate.
    """
    _need_login(state)
    ticket = _ticket(state, ticket_id)
    _status_among(ticket, ("Open", "In Progress"), "escalated")
    if ticket.escalated:
        raise ToolError(f"Ticket {ticket_id} is already escalated.")
    ticket.escalated = True
    ticket.priority = 5
    return {"id": ticket.id, "status": ticket.status, "priority": ticket.priority, "escalated": True}
