"""Spec hash = what the model sees (issue 13, finding 5), and the golden prompts as snapshots.

The snapshots under tests/snapshots/prompts/ are the rendered messages, retry
messages, target text, canonical form and decoding schema of fixed golden
inputs (kernel/spec_golden.json). A prompt change fails the snapshot test, so it
is a visible diff; regenerate with FORETHOUGHT_UPDATE_SNAPSHOTS=1 after checking it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import forethought.kernel.specs as specs
from forethought.kernel.specs import PRIMITIVE_NAMES, SPECS, shared

SNAP = Path(__file__).parent / "snapshots" / "prompts"


@pytest.mark.parametrize("rendering", specs.TOOL_RENDERINGS)
@pytest.mark.parametrize("name", PRIMITIVE_NAMES)
def test_golden_prompts_match_their_snapshots(name, rendering):
    with specs.tool_rendering(rendering):
        got = SPECS[name].golden_rendering()
    snapshot = SNAP / (f"{name}.txt" if rendering == "full" else f"{name}.{rendering}.txt")
    if os.environ.get("FORETHOUGHT_UPDATE_SNAPSHOTS"):
        snapshot.write_text(got, encoding="utf-8")
    assert snapshot.is_file(), f"no snapshot {snapshot}; run with FORETHOUGHT_UPDATE_SNAPSHOTS=1"
    assert got == snapshot.read_text(encoding="utf-8"), (
        f"the {name} prompt changed (see the diff); its spec hash changed with it, so datasets and adapters made "
        "before are refused. If intended, regenerate the snapshot with FORETHOUGHT_UPDATE_SNAPSHOTS=1"
    )


def test_the_tool_rendering_is_part_of_every_spec_hash():
    """Data, adapters and bundles rendered one way are refused under the other: each records its spec hashes."""
    full = {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES}
    with specs.tool_rendering("compact"):
        compact = {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES}
    assert all(full[n] != compact[n] for n in PRIMITIVE_NAMES)
    assert {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES} == full  # the block restored the rendering


def test_changing_render_tools_changes_every_affected_spec_hash(monkeypatch):
    # Finding 5: a new line format in render_tools changed every decompose prompt,
    # yet all five spec hashes stayed identical (only a few functions' source was hashed).
    before = {n: SPECS[n].compute_spec_hash() for n in PRIMITIVE_NAMES}
    assert before == {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES}
    original = shared.render_tools
    # the adapter and every spec render tool lists through kernel/specs/shared.py's render_tools
    monkeypatch.setattr(shared, "render_tools", lambda tools: original(tools).replace("): ", ") -- "))
    after = {n: SPECS[n].compute_spec_hash() for n in PRIMITIVE_NAMES}
    changed = {n for n in PRIMITIVE_NAMES if after[n] != before[n]}
    assert changed == {"decompose", "check_prerequisites", "match_func", "match_fill"}  # every primitive shown tools


@pytest.mark.parametrize("part", ["messages", "target_text"])
def test_messages_and_target_text_are_covered(monkeypatch, part):
    spec = SPECS["get_order"]
    before = spec.compute_spec_hash()
    cls = type(spec)
    original = getattr(cls, part)
    monkeypatch.setattr(cls, part, lambda self, *a, **k: _changed(original(self, *a, **k)))
    assert spec.compute_spec_hash() != before


def _changed(rendered):
    if isinstance(rendered, str):
        return rendered + " "
    return [*rendered[:-1], {**rendered[-1], "content": rendered[-1]["content"] + "\n"}]


def test_the_valued_rendering_writes_the_context_value_beside_each_string_parameter_it_names():
    """check_prerequisites under ``valued``: the focused list, each string parameter the context names written with
    its value (typed ones and unnamed ones as focused writes them); the other primitives render as focused."""
    spec = SPECS["check_prerequisites"]
    inp = spec.input_type.model_validate(
        {
            "task": {"id": "t1", "text": "Resolve ticket 3", "tool_name": "resolve_ticket"},
            "key": "ticket_status[3]",
            "outcome": "absent",
            "context": {"resolution": "Cleared the cache", "ticket_id": 3, "phone": "555"},
            "tools": [
                {
                    "name": "get_ticket",
                    "params": {"ticket_id": "integer"},
                    "required": ["ticket_id"],
                    "writes": ["ticket_status[{params.ticket_id}]"],
                },
                {"name": "resolve_ticket", "params": {"resolution": "string", "note": "string"}, "side_effect": True},
            ],
        }
    )
    with specs.tool_rendering("focused"):
        focused = spec.messages(inp)[1]["content"]
        hashes = {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES}
    with specs.tool_rendering("valued"):
        valued = spec.messages(inp)[1]["content"]
        assert {n: SPECS[n].spec_hash for n in PRIMITIVE_NAMES if n != "check_prerequisites"} == {
            n: h for n, h in hashes.items() if n != "check_prerequisites"
        }
        assert spec.spec_hash != hashes["check_prerequisites"]
    assert focused.endswith("Tools:\n- get_ticket(ticket_id: integer): ")  # only the key's writer, as focused lists
    assert valued == focused  # its one parameter is an integer: nothing to write beside it
    inp.context["ticket_id"] = "3"
    inp.tools[0].params["ticket_id"] = "string"
    with specs.tool_rendering("valued"):
        assert spec.messages(inp)[1]["content"].endswith('Tools:\n- get_ticket(ticket_id="3"): ')


@pytest.mark.parametrize("name", [n for n in PRIMITIVE_NAMES if SPECS[n].retrieval is not None])
def test_golden_prompts_with_demonstrations_match_their_snapshots(name):
    """With a store active (kernel/specs/demonstrations.py) the golden inputs are shown their golden neighbours."""
    with specs.tool_rendering("valued"), specs.using_stores([specs.DemonstrationStore(name, 3, [])]):
        got = SPECS[name].golden_rendering()
    snapshot = SNAP / f"{name}.valued.demonstrations.txt"
    if os.environ.get("FORETHOUGHT_UPDATE_SNAPSHOTS"):
        snapshot.write_text(got, encoding="utf-8")
    assert snapshot.is_file(), f"no snapshot {snapshot}; run with FORETHOUGHT_UPDATE_SNAPSHOTS=1"
    assert got == snapshot.read_text(encoding="utf-8"), f"the {name} prompt with demonstrations changed (see the diff)"
