"""Annotated turns built in code, answered by the oracle backend: how the own-tools tests drive a Session without a
model (tests/test_own_tools.py, tests/test_own_tools_mcp.py)."""

from __future__ import annotations

from typing import Any

from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.scenario import Turn


def turn(user: str, tasks: list[dict[str, Any]]) -> Turn:
    """One annotated turn whose tasks run in the order given."""
    return Turn.model_validate({"user": user, "tasks": tasks, "order": [t["id"] for t in tasks], "calls": []})


def task(tid: str, tool_name: str, parameters: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A task of ``tool_name`` whose parameters the request states (bound from the turn's τ)."""
    bindings = {k: {"source": "request", "value": v} for k, v in parameters.items()}
    return {"id": tid, "text": f"{tool_name} {parameters}", "tool": tool_name, "parameters": parameters,
            "bindings": bindings, **kw}  # fmt: skip


def send(session: Any, annotated: Turn) -> Any:
    """The session's next turn, answered by the oracle from the turn's annotations."""
    return session.send(annotated.user, backend=OracleBackend(annotated, "own-tools"))
