"""State of the simulated support-ticket system (BFCL TicketAPI style).

Reference data are state defaults: user accounts (customers, support agents,
an admin) with their passwords and roles, and a queue of existing tickets in
every status. A scenario may override any field (``users`` and ``tickets``
are replaced as a whole). New ticket ids come from a counter kept in the
state and raised above every existing id on load: no clock, no randomness.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["customer", "agent", "admin"]
Status = Literal["Open", "In Progress", "Resolved", "Closed"]
STATUSES: tuple[str, ...] = ("Open", "In Progress", "Resolved", "Closed")
STAFF_ROLES: tuple[str, ...] = ("agent", "admin")
EDITABLE_FIELDS: tuple[str, ...] = ("title", "description", "priority")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TicketUser(_M):
    password: str
    role: Role = "customer"


class TicketComment(_M):
    author: str
    text: str


class Ticket(_M):
    id: int
    title: str
    description: str = ""
    status: Status = "Open"
    priority: int = Field(default=1, ge=1, le=5)  # 1 lowest, 5 highest
    created_by: str
    assignee: str | None = None
    resolution: str | None = None
    escalated: bool = False
    comments: list[TicketComment] = Field(default_factory=list)


def _default_users() -> dict[str, TicketUser]:
    rows = [
        ("jsmith", "Jsmith#2024", "customer"),
        ("maria_g", "Maria!Pass7", "customer"),
        ("tom_h", "TomH-secure1", "customer"),
        ("li_wei", "LiWei@9090", "customer"),
        ("support_amy", "Amy$upport1", "agent"),
        ("support_raj", "Raj$upport2", "agent"),
        ("support_kim", "Kim$upport3", "agent"),
        ("admin_lee", "AdminLee#99", "admin"),
    ]
    return {u: TicketUser(password=p, role=r) for u, p, r in rows}  # type: ignore[arg-type]


def _default_tickets() -> dict[int, Ticket]:
    rows = [
        (
            1,
            "Login page not loading",
            "The login page shows a blank screen after the last update.",
            "Open",
            3,
            "jsmith",
            None,
        ),
        (
            2,
            "Invoice shows wrong amount",
            "My March invoice charges twice for the same plan.",
            "In Progress",
            4,
            "maria_g",
            "support_amy",
        ),
        (
            3,
            "Password reset email missing",
            "I never receive the password reset email.",
            "Resolved",
            2,
            "tom_h",
            "support_raj",
        ),
        (4, "App crashes on export", "Exporting a report to PDF crashes the desktop app.", "Open", 4, "jsmith", None),
        (5, "Request for dark mode", "Please add a dark theme to the dashboard.", "Closed", 1, "li_wei", "support_kim"),
        (6, "Slow search results", "Searching the archive takes over a minute.", "Open", 2, "maria_g", None),
        (
            7,
            "Cannot upload avatar",
            "Uploading a profile picture fails with error 413.",
            "In Progress",
            2,
            "tom_h",
            "support_kim",
        ),
        (8, "Two-factor codes rejected", "Every two-factor code is rejected as expired.", "Open", 5, "li_wei", None),
    ]
    out = {}
    for i, title, desc, status, prio, by, assignee in rows:
        out[i] = Ticket(
            id=i,
            title=title,
            description=desc,
            status=status,
            priority=prio,
            created_by=by,
            assignee=assignee,  # type: ignore[arg-type]
            resolution="Resent the email from a verified sender." if status == "Resolved" else None,
        )
    return out


class TicketState(_M):
    users: dict[str, TicketUser] = Field(default_factory=_default_users)
    tickets: dict[int, Ticket] = Field(default_factory=_default_tickets)  # ticket id -> ticket
    current_user: str | None = None  # the logged-in username, None when logged out
    next_ticket_id: int = 1  # counter; raised above every existing id on load

    @model_validator(mode="after")
    def _consistent(self) -> TicketState:
        for key, t in self.tickets.items():
            if key != t.id:
                raise ValueError(f"ticket stored under id {key} has id {t.id}")
        top = max(self.tickets, default=0) + 1
        if self.next_ticket_id < top:
            self.next_ticket_id = top
        if self.current_user is not None and self.current_user not in self.users:
            raise ValueError(f"logged-in user {self.current_user!r} is not a registered user")
        return self
