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
