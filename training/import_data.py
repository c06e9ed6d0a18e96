"""``forethought import-data SOURCE``: a Hugging Face ``datasets`` dataset in, as a dataset train and validate read.

SOURCE is

- a hub-layout folder: ``<primitive>/train*.jsonl|parquet`` and ``<primitive>/validation*.jsonl|parquet`` (also
  under ``data/<primitive>/``), as ``forethought export``-style repositories and ``datasets``' ``push_to_hub`` lay
  them out, read with ``datasets.load_dataset("json"|"parquet", data_files=...)``;
- or a ``load_dataset`` path (``owner/name`` in the local cache, a loading script's folder) with one config per
  primitive: ``datasets.load_dataset(SOURCE, name=<primitive>, split=<split>)``. ``HF_HUB_OFFLINE=1`` holds: only
  what is on this machine is read.

Every row goes through the one row model (:class:`forethought.data_gen.row.DatasetRow`) and the same checks as
generated data: the folder is written, sealed (``dataset.json``: train and validation share no solution) and read
back with :func:`forethought.data_gen.row.read_rows`, which ``train`` and ``validate`` use, before it is renamed into
place. Every bad row is listed with its source, primitive, split and row number. ``stats.json`` in a source folder
(spec hashes, tool rendering) is carried over.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from forethought.errors import UserError

SPLITS = ("train", "validation")
MAX_REPORTED = 10


def _files(root: Path, primitive: str, split: str) -> tuple[str, list[str]] | None:
    for folder in (root / primitive, root / "data" / primitive):
        for ext, builder in (("jsonl", "json"), ("json", "json"), ("parquet", "parquet")):
            found = sorted(str(f) for f in folder.glob(f"{split}*.{ext}"))
            if found:
                return builder, found
    return None


def _load(source: str, primitive: str, split: str) -> Any:
    """One split as a ``datasets.Dataset``, or None when the source has none."""
    import datasets

    root = Path(source).expanduser()
    try:
        if root.is_dir() and not (root / f"{root.name}.py").is_file():
            found = _files(root, primitive, split)
            if found is None:
                return None
            builder, files = found
            return datasets.load_dataset(builder, data_files={split: files}, split=split)
        return datasets.load_dataset(source, name=primitive, split=split)
    except (ValueError, FileNotFoundError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "split" in first.lower() and split == "validation":
            return None
        raise UserError(f"cannot load {primitive}/{split} with datasets: {first}", source) from None
    except Exception as exc:  # datasets' own errors (no config of that name, offline, bad files)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot load {primitive}/{split} with datasets: {first}", source) from None


def _unarrow(value: Any, like: Any) -> Any:
    """Undo arrow's schema unification: a struct column gives every row every key, null where a row had none.
    Keys that are null here and absent from ``like`` (the completion's own JSON) are dropped."""
    if isinstance(value, dict) and isinstance(like, dict):
        return {k: _unarrow(v, like.get(k)) for k, v in value.items() if not (v is None and k not in like)}
    if isinstance(value, list) and isinstance(like, list) and len(value) == len(like):
        return [_unarrow(v, w) for v, w in zip(value, like, strict=True)]
    return value


def _as_row(raw: dict[str, Any]) -> dict[str, Any]:
    try:
        answer = json.loads(raw["completion"][0]["content"])
    except (KeyError, IndexError, TypeError, json.JSONDecodeError):
        return raw  # the row model says what is wrong
    return {**raw, "target": _unarrow(raw.get("target"), answer)} if "target" in raw else raw


def import_dataset(source: str, output_dir: str | Path) -> dict[str, dict[str, int]]:
    """Write ``output_dir`` (a sealed dataset) from ``source``; returns rows per primitive and split."""
    from forethought.data_gen.row import read_rows, row_problem
    from forethought.data_gen.unit import seal
    from forethought.kernel.specs import PRIMITIVE_NAMES

    out = Path(output_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError("exists and is not empty: refusing to replace it; choose another output_dir", str(out))
    if not Path(source).expanduser().exists() and "/" not in source:
        raise UserError("no such folder, and not a load_dataset path (owner/name)", source)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    counts: dict[str, dict[str, int]] = {}
    errors: list[str] = []
    try:
        for prim in PRIMITIVE_NAMES:
            for split in SPLITS:
                ds = _load(source, prim, split)
                if ds is None:
                    continue
                lines = []
                for i, raw in enumerate(ds):
                    raw = _as_row(dict(raw))
                    named = raw.get("primitive")
                    if isinstance(named, str) and named != prim:
                        errors.append(f"{prim}/{split} row {i}: field 'primitive' is {named!r}, expected {prim!r}")
                        continue
                    row, problem = row_problem(raw)
                    if problem:
                        errors.append(f"{prim}/{split} row {i}: {problem}")
                        continue
                    lines.append(row.line())
                (tmp / prim).mkdir(exist_ok=True)
                (tmp / prim / f"{split}.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
                counts.setdefault(prim, {})[split] = len(lines)
        if errors:
            more = f"\n  ... and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
            raise UserError(f"{len(errors)} bad row(s):\n  " + "\n  ".join(errors[:MAX_REPORTED]) + more, source)
        if not counts:
            raise UserError(
                f"no split found: expected <primitive>/train*.jsonl|parquet for one of {', '.join(PRIMITIVE_NAMES)}",
                source,
            )
        missing_train = [p for p, split_counts in counts.items() if "train" not in split_counts]
        if missing_train:
            raise UserError(f"{missing_train}: a validation split without a train split", source)
        stats = Path(source).expanduser() / "stats.json"
        if stats.is_file():
            shutil.copy2(stats, tmp / "stats.json")
        seal(tmp)  # train and validation share no solution, every file's digest
        for prim, split_counts in counts.items():
            for split in split_counts:
                read_rows(tmp, prim, split)  # the reader train and validate use: the same checks
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return counts


def cli(args: list[str]) -> int:
    from forethought.arguments import split_args

    parsed = split_args(args)
    if parsed.flags - {"-h", "--help"} or len(parsed.positional) != 1:
        import sys

        ok = bool(parsed.flags & {"-h", "--help"})
        print("usage: forethought import-data SOURCE [output_dir=DIR]", file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 2
    output_dir = "runs/pipeline/data"
    for override in parsed.overrides:
        key, _, value = override.partition("=")
        if key != "output_dir":
            raise UserError(f"unknown setting {key!r} (import-data takes output_dir=DIR)", override)
        output_dir = value
    counts = import_dataset(parsed.positional[0], output_dir)
    print(f"wrote {output_dir} (sealed; train with `forethought train dataset_dir={output_dir}`)")
    for prim, split_counts in counts.items():
        print(f"  {prim:<20} " + "  ".join(f"{s} {n}" for s, n in split_counts.items()))
    return 0
