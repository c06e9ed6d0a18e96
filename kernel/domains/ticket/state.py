"""State of the simulated support-ticket system (BFCL TicketAPI style).

Reference data lives in ``data.json`` beside this module (the model holds
structure only): user accounts (customers, support agents, an admin) with
their passwords and roles, and a queue of existing tickets in every status.
A scenario may override any field (``users`` and ``tickets`` are replaced as
a whole). New ticket ids come from a counter kept in the
state and raised above every existing id on load: no clock, no randomness.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData

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


class TicketState(_M, ReferenceData):
    users: dict[str, TicketUser]
    tickets: dict[int, Ticket]  # ticket id -> ticket
    current_user: str | None  # the logged-in username, None when logged out
    next_ticket_id: int  # counter; raised above every existing id on load

    @model_validator(mode="after")
    def _consistent(self) -> TicketState:
        for key, ticket in self.tickets.items():
            if key != ticket.id:
                raise ValueError(f"ticket stored under id {key} has id {ticket.id}")
        top = max(self.tickets, default=0) + 1
        if self.next_ticket_id < top:
            self.next_ticket_id = top
        if self.current_user is not None and self.current_user not in self.users:
            raise ValueError(f"logged-in user {self.current_user!r} is not a registered user")
        return self
