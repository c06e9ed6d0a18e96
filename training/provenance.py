"""What a gates.json measured: the digest of every adapter file it decoded with, and the dataset run.

``validate`` records it; ``package`` refuses gates measured on other files (an
adapter retrained after validate would otherwise ship under the old numbers),
and the bundle loader checks the bundled gates against the bundled adapters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forethought.bounded import read_json_object
from forethought.bundle.manifest import sha256_file
from forethought.errors import UserError
from forethought.training.artifacts import adapter_dir

# The adapter files that decide what the model answers (a LoRA adapter's, or full weights').
MEASURED_FILES = ("adapter_model.safetensors", "adapter_config.json", "model.safetensors", "config.json")
MAX_GATES_BYTES = 64 * 1024 * 1024


def adapter_digests(train_dir: str | Path, primitive: str) -> dict[str, str | None]:
    folder = adapter_dir(train_dir, primitive)
    return {f: sha256_file(folder / f) for f in MEASURED_FILES if (folder / f).is_file()}


def measured(train_dir: str | Path, primitives: list[str], dataset_dir: str | Path) -> dict[str, Any]:
    """The ``measured`` block of gates.json (called by run_validation)."""
    from forethought.data_gen.unit import MANIFEST

    run_id = None
    manifest_path = Path(dataset_dir) / MANIFEST
    if manifest_path.is_file():
        run_id = read_json_object(manifest_path).get("run_id")
    return {"adapters": {p: adapter_digests(train_dir, p) for p in primitives}, "dataset_run_id": run_id}


def read_gates(path: str | Path) -> dict[str, Any]:
    """gates.json, parsed and shape-checked; every problem is a located error, never a traceback."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise UserError("no gates.json: run forethought validate first", where)
    from forethought.bounded import read_json_object

    gates = read_json_object(path, max_bytes=MAX_GATES_BYTES, hint="; re-run forethought validate")
    if not isinstance(gates, dict) or not isinstance(gates.get("primitives"), dict):
        raise UserError("field 'primitives' is missing or not an object; re-run forethought validate", where)
    for primitive, entry in gates["primitives"].items():
        if not isinstance(entry, dict):
            raise UserError(f"field primitives.{primitive} is not an object", where)
        for field, expected_type in (("passed", bool), ("exact_match", (int, float)), ("threshold", (int, float))):
            if not isinstance(entry.get(field), expected_type) or (
                field != "passed" and isinstance(entry.get(field), bool)
            ):
                raise UserError(
                    f"field primitives.{primitive}.{field} is missing or not a {'boolean' if expected_type is bool else 'number'}",
                    where,
                )
    return gates


def check_measured(gates: dict[str, Any], train_dir: str | Path, primitives: list[str], where: str) -> None:
    """Refuse gates that were not measured on the adapter files now in ``train_dir``."""
    recorded = (gates.get("measured") or {}).get("adapters") if isinstance(gates.get("measured"), dict) else None
    if not isinstance(recorded, dict):
        raise UserError(
            "gates.json records no digest of the adapters it measured (written by an older forethought); "
            "re-run forethought validate",
            where,
        )
    stale = [p for p in primitives if recorded.get(p) != adapter_digests(train_dir, p)]
    if stale:
        raise UserError(
            f"the gates of {stale} were measured on other adapter files than those in {train_dir} (retrained "
            "after validate?); re-run forethought validate",
            where,
        )
