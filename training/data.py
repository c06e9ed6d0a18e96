"""Reading the per-primitive SFT datasets.

``<dataset_dir>/<primitive>/{train,validation}.jsonl``: one JSON object per line
in trl's conversational prompt-completion format (``prompt``: system + user
messages, ``completion``: one assistant message) plus metadata (``id``,
``solution_id``, ``primitive``, ``target``). Rows are checked up front and
every problem is reported with its file and line. Only ``prompt`` and
``completion`` go to the trainer; the datasets are built in memory
(``Dataset.from_list``), so no preprocessing cache can go stale.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.errors import UserError

if TYPE_CHECKING:
    from datasets import Dataset

MAX_REPORTED = 10


def split_path(dataset_dir: str | Path, primitive: str, split: str) -> Path:
    return Path(dataset_dir) / primitive / f"{split}.jsonl"


def dataset_spec_hash(dataset_dir: str | Path, primitive: str) -> str | None:
    """The spec hash the dataset's prompts were rendered with (``stats.json`` ``spec_hashes``), or None if not recorded.

    ``forethought generate`` records ``forethought.kernel.specs.SPECS[name].spec_hash`` per primitive; training copies it
    into the run folder so validate and package can refuse an adapter trained under another spec.
    """
    from forethought.data_gen.unit import checked_bytes

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


def _check_row(row: Any, primitive: str) -> str | None:
    if not isinstance(row, dict):
        return "not a JSON object"
    if row.get("primitive") not in (None, primitive):
        return f"primitive is {row.get('primitive')!r}, expected {primitive!r}"
    prompt, completion = row.get("prompt"), row.get("completion")
    if not isinstance(prompt, list) or not prompt:
        return "prompt must be a non-empty list of messages"
    if not isinstance(completion, list) or len(completion) != 1:
        return "completion must be a list with exactly one assistant message"
    for m in prompt + completion:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            return "each message needs string 'role' and 'content'"
    roles = [m["role"] for m in prompt]
    if roles[0] == "system":
        roles = roles[1:]
    if not roles or any(r != ("user" if i % 2 == 0 else "assistant") for i, r in enumerate(roles)) or roles[-1] != "user":
        return "prompt roles must be [system], user, assistant, user, ... ending with user (Gemma's template has no other roles)"
    if completion[0]["role"] != "assistant":
        return "the completion message's role must be 'assistant'"
    if not completion[0]["content"].strip():
        return "empty completion"
    try:  # every primitive answers in JSON; a completion that is not JSON teaches the model to break its contract
        json.loads(completion[0]["content"])
    except (json.JSONDecodeError, RecursionError):
        return "the completion's content is not JSON (every primitive's target is a JSON object)"
    return None


def read_split(dataset_dir: str | Path, primitive: str, split: str, *, required: bool = True, limit: int | None = None) -> list[dict[str, Any]] | None:
    """Read and check one split; ``None`` when it is absent and not required."""
    path = split_path(dataset_dir, primitive, split)
    if not path.is_file():
        if required:
            raise UserError(f"missing {split} split for primitive {primitive!r} (expected <dataset_dir>/{primitive}/{split}.jsonl)", str(path))
        return None
    from forethought.data_gen.unit import load_manifest, split_problem

    held_out = set(load_manifest(dataset_dir)["validation_solutions"])
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        text = read_dataset_text(dataset_dir, f"{primitive}/{split}.jsonl")
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}: {exc.reason}); datasets are UTF-8 JSON Lines", str(path)) from None
    for i, line in enumerate(text.split("\n"), start=1):  # not splitlines(): JSON strings may hold U+2028
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {i}: not valid JSON ({exc.msg})")
            continue
        problem = _check_row(row, primitive) or split_problem(row, split, held_out)
        if problem:
            errors.append(f"line {i}: {problem}")
            continue
        rows.append({"prompt": row["prompt"], "completion": row["completion"]})
        if limit is not None and len(rows) >= limit:
            break
    if errors:
        more = f"\n  ... and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
        raise UserError(f"{len(errors)} bad row(s):\n  " + "\n  ".join(errors[:MAX_REPORTED]) + more, str(path))
    if not rows:
        raise UserError("no examples", str(path))
    return rows


def read_dataset_text(dataset_dir: str | Path, rel: str) -> str:
    """A dataset file's text, refused unless the dataset's manifest vouches for exactly these bytes."""
    from forethought.data_gen.unit import MAX_FILE_BYTES, checked_bytes

    path = Path(dataset_dir) / rel
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES >> 20} MiB; split the dataset", str(path))
    return checked_bytes(dataset_dir, rel).decode("utf-8")


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
