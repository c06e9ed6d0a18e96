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

from forethought.data_gen.row import read_rows
from forethought.data_gen.unit import checked_bytes
from forethought.errors import UserError

if TYPE_CHECKING:
    from datasets import Dataset


def split_path(dataset_dir: str | Path, primitive: str, split: str) -> Path:
    return Path(dataset_dir) / primitive / f"{split}.jsonl"


def dataset_spec_hash(dataset_dir: str | Path, primitive: str) -> str | None:
    """The spec hash the dataset's prompts were rendered with (``stats.json`` ``spec_hashes``), or None if not recorded.

    ``forethought generate`` records ``forethought.kernel.specs.SPECS[name].spec_hash`` per primitive; training copies it
    into the run folder so validate and package can refuse an adapter trained under another spec.
    """
    f = Path(dataset_dir) / "stats.json"
    if not f.is_file():
        return None
    try:
        stats = json.loads(checked_bytes(dataset_dir, "stats.json"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UserError(f"stats.json is not valid JSON: {exc}", str(f)) from None
    hashes = stats.get("spec_hashes") if isinstance(stats, dict) else None
    value = hashes.get(primitive) if isinstance(hashes, dict) else None
    if value is not None and not isinstance(value, str):
        raise UserError(f"spec_hashes.{primitive} must be a string, got {value!r}", str(f))
    return value


def read_split(dataset_dir: str | Path, primitive: str, split: str, *, required: bool = True, limit: int | None = None) -> list[dict[str, Any]] | None:
    """Read and check one split (every row a :class:`~forethought.data_gen.row.DatasetRow`); ``None`` when it is
    absent and not required. Returns what the trainer takes: each row's ``prompt`` and ``completion``."""
    path = split_path(dataset_dir, primitive, split)
    if not path.is_file():
        if required:
            raise UserError(f"missing {split} split for primitive {primitive!r} (expected <dataset_dir>/{primitive}/{split}.jsonl)", str(path))
        return None
    rows = read_rows(dataset_dir, primitive, split, limit=limit)
    if not rows:
        raise UserError("no examples", str(path))
    return [row.model_dump(include={"prompt", "completion"}) for row in rows]


def load_splits(dataset_dir: str | Path, primitive: str, *, max_train: int | None = None, max_eval: int | None = None) -> tuple[Dataset, Dataset | None]:
    from datasets import Dataset

    train = read_split(dataset_dir, primitive, "train", limit=max_train)
    val = read_split(dataset_dir, primitive, "validation", required=False, limit=max_eval)
    return Dataset.from_list(train), (Dataset.from_list(val) if val else None)


def file_sha256(path: str | Path) -> str | None:
    p = Path(path)
    if not p.is_file():
        return None
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
