"""ToolGate on real tools' results: non-object results, reported errors, and imported registries' output schemas.

BFCL's classes return None and lists, report failures as ``{"error": ...}``, and their docs' response
schemas are sometimes wrong (send_message returns ``new_id``; the docs say ``message_id``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from forethought.kernel import toolgate
from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.domains.base import Domain
from forethought.kernel.environment import Environment
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.registry import Registry
from forethought.kernel.scenario import Turn
from forethought.kernel.scratchpad import Scratchpad


class Inbox(BaseModel):
    sent: list[str] = Field(default_factory=list)
    folders: list[str] = Field(default_factory=lambda: ["b", "a"])


DOM = Domain("inbox_test", Inbox)


@DOM.tool(writes={"folder_names": "result.result"})
def list_folders(state: Inbox) -> list:
    """List the folders (returns a bare list, as BFCL's ls-like tools do)."""
    return sorted(state.folders)


@DOM.tool(side_effect=True)
def make_folder(state: Inbox, name: str) -> None:
    """Create a folder (returns None, as BFCL's mkdir does).

    Args:
        name: Folder name.
    """
    state.folders.append(name)


@DOM.tool(side_effect=True)
def send_message(state: Inbox, text: str) -> dict:
    """Send a message; fails on an empty text with an error object.

    Args:
        text: Message text.
    """
    if not text.strip():
        return {"error": "empty message"}
    state.sent.append(text)
    return {"new_id": len(state.sent)}  # the docs below promise message_id


PROMISED = {"type": "object", "properties": {"message_id": {"type": "integer"}}, "required": ["message_id"]}


def run(tool: str, arguments: dict[str, Any], *, source: str, cvc: bool = True, strict: bool = False):
    env = Environment([DOM])
    specs = [
        s.model_copy(update={"source": source, "output_schema": PROMISED if s.name == "send_message" else None})
        for s in env.registry()
    ]
    turn = Turn.model_validate(
        {
            "user": f"do it {' '.join(map(str, arguments.values()))}",
            "order": ["t1"],
            "calls": [],
            "tasks": [{"id": "t1", "text": "do it", "tool": tool, "parameters": arguments}],
        }
    )
    scratchpad = Scratchpad({})
    kernel = Kernel(KernelConfig(cvc=cvc, strict_invariants=True, strict_output_schema=strict))
    result, _ = kernel.run_turn(
        user=turn.user,
        env=env,
        scratchpad=scratchpad,
        registry=Registry(specs),
        backend=OracleBackend(turn, "test"),
        turn_context=turn.context,
    )
    return result, env.states["inbox_test"], scratchpad


def test_a_list_result_is_committed_and_written_under_result():
    result, _, scratchpad = run("list_folders", {}, source="bfcl")
    (call,) = result.calls
    assert call.committed and call.rejected == [] and call.result == {"result": ["a", "b"]}  # as the domain wraps it
    assert scratchpad.get("folder_names") == ["a", "b"]


def test_a_none_result_is_committed():
    result, state, _ = run("make_folder", {"name": "c"}, source="bfcl")
    (call,) = result.calls
    assert (
        call.committed and call.rejected == [] and call.result == {}
    )  # the domain wrapper turns None into an empty object
    assert "c" in state.folders and result.outcomes["t1"].status == "executed"


@pytest.mark.parametrize("cvc", [True, False])
def test_an_error_object_is_a_failed_call_and_nothing_is_committed(cvc):
    result, state, _ = run("send_message", {"text": " "}, source="bfcl", cvc=cvc)
    assert not any(c.committed for c in result.calls) and state.sent == []
    if cvc:
        assert result.outcomes["t1"].status == "tool_failed"
        assert any("tool reported an error: empty message" in r for c in result.calls for r in c.rejected)


@pytest.mark.parametrize("source", ["bfcl", "mcp", "openai"])
def test_an_imported_registry_schema_mismatch_is_a_warning_and_the_call_stands(source):
    result, state, _ = run("send_message", {"text": "hi"}, source=source)
    (call,) = result.calls
    assert call.committed and call.rejected == [] and state.sent == ["hi"]
    assert call.warnings == [
        "post: result: 'message_id' is a required property (output schema of an imported registry: not enforced)"
    ]


def test_strict_output_schema_rejects_the_imported_mismatch():
    result, state, _ = run("send_message", {"text": "hi"}, source="bfcl", strict=True)
    assert not any(c.committed for c in result.calls) and state.sent == []
    assert result.outcomes["t1"].status == "tool_failed"
    assert result.calls[0].rejected == ["post: result: 'message_id' is a required property"]


def test_our_own_domains_schemas_stay_strict():
    result, state, _ = run("send_message", {"text": "hi"}, source="domain")
    assert not any(c.committed for c in result.calls) and state.sent == []
    assert result.calls[0].warnings == []


def test_postcondition_report_is_the_list_of_rejections():
    spec = (
        Environment([DOM])
        .registry()
        .get("send_message")
        .model_copy(update={"source": "bfcl", "output_schema": PROMISED})
    )
    report = toolgate.postcondition(spec, None, {"text": "x"}, {"new_id": 1}, None)
    assert report == [] and not report and len(report.warnings) == 1
    assert toolgate.postcondition(spec, None, {}, {"error": "boom"}, None) == ["tool reported an error: boom"]


@pytest.mark.parametrize("raw", [None, ["a", "b"], "moved", 3])
def test_a_raw_non_object_result_passes_the_postcondition_and_is_written_wrapped(raw):
    """What an adapter over a real class (BFCL's) hands back unwrapped."""
    spec = Environment([DOM]).registry().get("list_folders").model_copy(update={"source": "bfcl"})
    assert toolgate.postcondition(spec, None, {}, raw, None) == []
    # the wrapped value enters S as the result entry "<tool>.result", and the declared write still reaches it
    assert toolgate.writes(spec, {}, toolgate.as_result_object(raw)) == {
        "list_folders.result": raw,
        "folder_names": raw,
    }
