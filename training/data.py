"""Reading the per-primitive SFT datasets.

``<dataset_dir>/<primitive>/{train,validation}.jsonl``: one JSON object per line
in trl's conversational prompt-completion format (``prompt``: system + user
messages, ``completion``: one assistant message) plus metadata: one
:class:`~forethought.data_gen.row.DatasetRow` per line, the definition generate
writes and validate reads. Rows are checked up front and every problem is
reported with its file, line and field. Only ``prompt`` and
``completion`` go to the trainer; the datasets are built in memory
(``Dataset.from_list``), so no preprocessing cache can go stale.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.data_gen.row import DatasetRow, dev_solutions, read_rows
from forethought.data_gen.unit import checked_bytes
from forethought.errors import UserError

if TYPE_CHECKING:
    from datasets import Dataset


def split_path(dataset_dir: str | Path, primitive: str, split: str) -> Path:
    return Path(dataset_dir) / primitive / f"{split}.jsonl"


def _stats(dataset_dir: str | Path) -> Any:
    """The dataset's stats.json (its bytes vouched for by the manifest), strictly parsed."""
    from forethought.bounded import loads_json

    path = Path(dataset_dir) / "stats.json"
    try:
        return loads_json(checked_bytes(dataset_dir, "stats.json"), str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"stats.json is not valid JSON: {exc}", str(path)) from None


def dataset_spec_hash(dataset_dir: str | Path, primitive: str) -> str | None:
    """The spec hash the dataset's prompts were rendered with (``stats.json`` ``spec_hashes``), or None if not recorded.

    ``forethought generate`` records ``forethought.kernel.specs.SPECS[name].spec_hash`` per primitive; training copies it
    into the run folder so validate and package can refuse an adapter trained under another spec.
    """
    path = Path(dataset_dir) / "stats.json"
    if not path.is_file():
        return None
    stats = _stats(dataset_dir)
    hashes = stats.get("spec_hashes") if isinstance(stats, dict) else None
    value = hashes.get(primitive) if isinstance(hashes, dict) else None
    if value is not None and not isinstance(value, str):
        raise UserError(f"spec_hashes.{primitive} must be a string, got {value!r}", str(path))
    return value


def dataset_tool_rendering(dataset_dir: str | Path) -> str:
    """How the dataset's prompts show tool lists (``stats.json`` ``tool_rendering``; ``full`` when not recorded)."""
    path = Path(dataset_dir) / "stats.json"
    if not path.is_file():
        return "full"
    stats = _stats(dataset_dir)
    style = stats.get("tool_rendering", "full") if isinstance(stats, dict) else "full"
    from forethought.kernel.specs import TOOL_RENDERINGS

    if style not in TOOL_RENDERINGS:
        raise UserError(f"tool_rendering must be one of {', '.join(TOOL_RENDERINGS)}, got {style!r}", str(path))
    return style


def dataset_stores(dataset_dir: str | Path) -> list[Any]:
    """The dataset's demonstrations stores (``stats.json`` ``demonstrations``: kernel/specs/demonstrations.py), each
    file's bytes vouched for by the manifest and by its digest in stats.json; none when the data has none."""
    from forethought.kernel.specs import DemonstrationStore

    path = Path(dataset_dir) / "stats.json"
    stores = []
    for primitive, entry in sorted(_recorded_stores(dataset_dir).items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise UserError(f"demonstrations.{primitive}: expected an object with its file", str(path))
        checked_bytes(dataset_dir, entry["file"])  # listed in the manifest, with the bytes it lists
        store = DemonstrationStore.read(Path(dataset_dir) / entry["file"])
        if store.digest() != entry.get("sha256") or store.primitive != primitive:
            raise UserError(
                f"demonstrations.{primitive}: {entry['file']} is not the store generate wrote (digest or primitive "
                "differs); regenerate the data",
                str(path),
            )
        stores.append(store)
    return stores


def _recorded_stores(dataset_dir: str | Path) -> dict[str, Any]:
    """``stats.json`` ``demonstrations``: per primitive, what generate recorded of its store (none: no stores)."""
    stats = _stats(dataset_dir) if (Path(dataset_dir) / "stats.json").is_file() else None
    recorded = (stats.get("demonstrations") if isinstance(stats, dict) else None) or {}
    if not isinstance(recorded, dict):
        raise UserError(
            "demonstrations: expected an object (primitive -> its store)", str(Path(dataset_dir) / "stats.json")
        )
    return recorded


def dataset_dev_split(dataset_dir: str | Path) -> dict[str, tuple[float, int]]:
    """Per primitive with a demonstrations store: the dev split (fraction, seed) its store leaves out."""
    recorded = _recorded_stores(dataset_dir)
    return {p: (e.get("dev_fraction"), e.get("dev_seed")) for p, e in recorded.items() if isinstance(e, dict)}


def check_dev_split(
    dataset_dir: str | Path, primitives: list[str], fraction: float, seed: int, *, limit: int | None = None
) -> None:
    """A demonstrations store leaves one dev split's solutions out; training that carves another would select with
    rows whose neighbours were shown to train rows (or show fewer than the kernel will): refused, before any write.
    Called only when training carves a dev split (without one nothing selects, and the store is merely smaller).
    ``limit`` is train's ``max_train_examples``: dev is carved from those rows, so it is checked as carved."""
    for primitive, (data_fraction, data_seed) in sorted(dataset_dev_split(dataset_dir).items()):
        if primitive in primitives and (data_fraction, data_seed) != (fraction, seed):
            raise UserError(
                f"the data's {primitive} demonstrations leave out the dev split of dev_fraction={data_fraction} "
                f"seed={data_seed}, and training would carve dev_fraction={fraction} seed={seed}: set "
                f"train.dev_fraction={data_fraction} seed={data_seed}, or regenerate with "
                f"data.demonstrations.dev_fraction={fraction} data.demonstrations.dev_seed={seed}",
                str(Path(dataset_dir) / "stats.json"),
            )
    # The same parameters carve the same split from all the rows; from a subset (limit) the split's fallbacks may
    # pick another solution: the sets themselves are compared, which is exact either way.
    for store in dataset_stores(dataset_dir):
        if store.primitive not in primitives:
            continue
        _, dev = train_and_dev_rows(dataset_dir, store.primitive, fraction, seed, limit=limit)
        shown = sorted({r.solution_id for r in dev} & {d.solution_id for d in store.decisions})
        if shown:
            raise UserError(
                f"{store.primitive}: the dev split training would carve holds solutions whose decisions the "
                f"demonstrations store shows ({', '.join(shown[:3])}{', ...' if len(shown) > 3 else ''}): selection "
                "would read neighbours train rows were shown; train on all the rows (train.max_train_examples=null) "
                "or regenerate the data",
                str(Path(dataset_dir) / "stats.json"),
            )


def use_dataset_rendering(dataset_dir: str | Path) -> str:
    """Render prompts in this process as the dataset's were rendered (before any spec hash is compared): its tool
    rendering, and its demonstrations stores (none when it has none). Returns the tool rendering."""
    from forethought.kernel.specs import set_stores, set_tool_rendering

    style = dataset_tool_rendering(dataset_dir)
    stores = dataset_stores(dataset_dir)
    set_tool_rendering(style)
    set_stores(stores)
    return style


def read_split(
    dataset_dir: str | Path, primitive: str, split: str, *, required: bool = True, limit: int | None = None
) -> list[dict[str, Any]] | None:
    """Read and check one split (every row a :class:`~forethought.data_gen.row.DatasetRow`); ``None`` when it is
    absent and not required. Returns what the trainer takes: each row's ``prompt`` and ``completion``."""
    path = split_path(dataset_dir, primitive, split)
    if not path.is_file():
        if required:
            raise UserError(
                f"missing {split} split for primitive {primitive!r} (expected <dataset_dir>/{primitive}/{split}.jsonl)",
                str(path),
            )
        return None
    rows = read_rows(dataset_dir, primitive, split, limit=limit)
    if not rows:
        raise UserError("no examples", str(path))
    return trainer_rows(rows)


def train_and_dev_rows(
    dataset_dir: str | Path, primitive: str, fraction: float, seed: int, *, limit: int | None = None
) -> tuple[list[DatasetRow], list[DatasetRow]]:
    """The train split's rows, cut by solution into (train, dev). With a fraction > 0 and at least two train
    solutions, dev holds at least one solution (the one of lowest hash) and train keeps at least one. Dev holds only
    the decisions its solutions hold: their rows written for training only (``DatasetRow.train_only``) are in
    neither part, since selection should measure what validation measures and train should not read dev solutions."""
    rows = read_rows(dataset_dir, primitive, "train", limit=limit)
    if fraction <= 0:
        return rows, []
    dev = dev_solutions((r.solution_id for r in rows), fraction, seed)
    return [r for r in rows if r.solution_id not in dev], [r for r in rows if r.solution_id in dev and not r.train_only]


def trainer_rows(rows: list[DatasetRow]) -> list[dict[str, Any]]:
    """What the trainer takes of each row: ``prompt`` and ``completion``."""
    return [row.model_dump(include={"prompt", "completion"}) for row in rows]


def load_splits(
    dataset_dir: str | Path,
    primitive: str,
    *,
    max_train: int | None = None,
    max_eval: int | None = None,
    dev_fraction: float = 0.0,
    seed: int = 0,
) -> tuple[Dataset, Dataset | None, list[DatasetRow]]:
    """(train, eval, dev rows). With ``dev_fraction`` > 0 the eval set is the dev rows carved from the train
    solutions (early stopping and selection read it); otherwise it is the validation split (eval loss only)."""
    from datasets import Dataset

    train, dev = train_and_dev_rows(dataset_dir, primitive, dev_fraction, seed, limit=max_train)
    if dev_fraction > 0:
        evaluation = trainer_rows(dev[:max_eval] if max_eval else dev)
    else:
        evaluation = read_split(dataset_dir, primitive, "validation", required=False, limit=max_eval) or []
    return Dataset.from_list(trainer_rows(train)), (Dataset.from_list(evaluation) if evaluation else None), dev


def file_sha256(path: str | Path) -> str | None:
    file_path = Path(path)
    if not file_path.is_file():
        return None
    digest = hashlib.sha256()
    with open(file_path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
