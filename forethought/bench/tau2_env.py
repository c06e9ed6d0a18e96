"""The kernel's environment over a tau2 environment in solo mode, and the trajectory tau2 replays.

The same interface as ``forethought.kernel.environment.Environment`` (``stage``, ``commit``, ``tool``,
``snapshot``), so the kernel's ToolGate runs unchanged: a call runs on a deep copy of tau2's environment
(its agent DB and the user's device), through tau2's own ``Environment.get_response`` (the tool call,
then ``sync_tools``, the response serialised as tau2 serialises it); the copy replaces the live
environment only when the kernel commits.

Every committed call is appended to :attr:`Tau2Environment.messages` as the two messages tau2's evaluator
replays: an ``AssistantMessage`` holding the one ``ToolCall`` (id ``call_<n>``) and the ``ToolMessage``
with the same id and the environment's response, exactly as it came back. The evaluator re-runs each
call on a fresh environment and refuses the trajectory unless every response is identical, so a call
counts only if it is what the world did. A call tau2 answered with an error (``"Error: ..."``) is a
failed call to the kernel (``{"error": ...}``): nothing is staged and nothing enters the trajectory.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from forethought.bounded import loads_json
from forethought.errors import UserError

from .tau2_data import STOP_TOKEN, Task, new_environment


def initial_environment(domain: str, task: Task) -> Any:
    """tau2's environment for ``task`` before the agent acts: built and initialised as its evaluator builds
    the predicted environment (solo mode; the task's initialization data and actions; its message history)."""
    env = new_environment(domain)
    init = task.raw.initial_state
    env.set_state(
        initialization_data=init.initialization_data if init else None,
        initialization_actions=init.initialization_actions if init else None,
        message_history=(init.message_history or []) if init else [],
    )
    return env


def response_value(content: str | None) -> Any:
    """A tool message's content as a JSON value when it is strict JSON (forethought/bounded.py), else the text itself:
    a response with NaN, an infinity or a key given twice is text, not data the kernel would bind from (as an MCP
    server's reply, kernel/mcp_tools.py). tau2's own replay compares the message's text, which is kept as it came."""
    if content is None:
        return None
    try:
        return loads_json(content, "tau2 tool response")
    except (json.JSONDecodeError, UserError):
        return content


class Tau2Environment:
    """One task's world: tau2's environment, and the messages of the calls committed to it."""

    def __init__(self, domain: str, task: Task):
        self.domain = domain
        self.task_id = task.id
        self.env = initial_environment(domain, task)
        self.messages: list[Any] = []  # AssistantMessage / ToolMessage pairs, in commit order
        self._next_id = 0

    def tool(self, name: str) -> None:
        """No hand-written postconditions for tau2's tools: ToolGate checks the imported schemas only."""
        return None

    def has(self, name: str) -> bool:
        return self.env.tools.has_tool(name) or self.env.user_tools.has_tool(name)

    def stage(self, name: str, args: dict[str, Any]) -> tuple[Any, tuple[Any, Any, Any] | None]:
        """Run ``name(**args)`` on a copy of the environment; returns (result, (copy, tool call, tool message))."""
        from tau2.data_model.message import ToolCall

        if not self.has(name):
            return {"error": f"tau2 {self.domain} has no tool {name!r}"}, None
        call = ToolCall(
            id=f"call_{self._next_id}", name=name, arguments=copy.deepcopy(dict(args)), requestor="assistant"
        )
        self._next_id += 1
        staged = copy.deepcopy(self.env)
        message = staged.get_response(call)  # tau2's own path: the call, sync_tools, the serialised response
        if message.error:
            return {"error": message.content}, None
        return response_value(message.content), (staged, call, message)

    def commit(self, name: str, staged: tuple[Any, Any, Any]) -> None:
        from tau2.data_model.message import AssistantMessage

        env, call, message = staged
        self.env = env
        self.messages += [AssistantMessage(role="assistant", content=None, tool_calls=[call]), message]

    def apply(self, name: str, args: dict[str, Any]) -> Any:
        """Run a call on the live environment as tau2's orchestrator runs a model's call (vanilla mode): no
        guard, no copy; the pair enters the trajectory whatever came back, a tau2 error included (its replay
        returns the same error). Returns tau2's ToolMessage."""
        from tau2.data_model.message import AssistantMessage, ToolCall

        call = ToolCall(
            id=f"call_{self._next_id}", name=name, arguments=copy.deepcopy(dict(args)), requestor="assistant"
        )
        self._next_id += 1
        message = self.env.get_response(call)
        self.messages += [AssistantMessage(role="assistant", content=None, tool_calls=[call]), message]
        return message

    def snapshot(self) -> dict[str, Any]:
        """The agent's DB and the user's device as JSON, with tau2's hashes of them (what its DB check compares)."""
        return {
            "db_hash": self.env.get_db_hash(),
            "user_db_hash": self.env.get_user_db_hash(),
            "db": self.env.tools.db.model_dump(mode="json"),
            "user_db": self.env.user_tools.db.model_dump(mode="json"),
        }

    def trajectory(self, stopped: bool = True) -> list[Any]:
        """The run as tau2 records a solo run: the committed pairs, then (when the agent stopped) the stop
        message tau2's LLMSoloAgent turns its ``done`` call into."""
        from tau2.data_model.message import AssistantMessage

        out = list(self.messages)
        if stopped:
            out.append(AssistantMessage(role="assistant", content=STOP_TOKEN))
        return out
