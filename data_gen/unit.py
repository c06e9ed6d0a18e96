"""A dataset is one unit: written whole into a staging folder, sealed by a manifest, renamed into place.

``<dataset_dir>/dataset.json`` (the manifest) records a run id and the SHA-256
of every file of that run. ``train`` and ``validate`` check each file they read
against it, so files from two runs (a killed ``generate`` over an older
dataset, a split copied in by hand) are refused instead of trained on; and
they refuse a row whose solution is on the other side of the train/validation
split. ``generate`` writes into ``.<name>.partial-<pid>`` next to the target
and swaps the folders only once every file and the manifest are on disk, so a
kill leaves the previous dataset, or none, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from forethought.errors import UserError
from forethought.primitives.io import atomic_write_json

MANIFEST = "dataset.json"
FORMAT = 1
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024  # one split file; read whole into memory
SPLITS = ("train", "validation")
SEAL_HINT = "python -m forethought.data_gen.unit seal DIR seals a hand-made dataset"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rel_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def _solution_ids(path: Path) -> set[str]:
    ids = set()
    for line in path.read_bytes().decode("utf-8", errors="replace").split("\n"):  # bad bytes: the readers say where
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # row errors are reported, with their line, by the readers
            if isinstance(row, dict) and isinstance(row.get("solution_id"), str):
                ids.add(row["solution_id"])
    return ids


def seal(
    root: str | Path, *, run_id: str | None = None, validation_solutions: list[str] | None = None
) -> dict[str, Any]:
    """Write ``root/dataset.json``: the run id, every file's digest and the held-out solutions.

    ``validation_solutions`` defaults to the solutions of every ``validation.jsonl``;
    a solution that is also in a ``train.jsonl`` is refused here already.
    """
    root = Path(root)
    files = {rel: _sha256((root / rel).read_bytes()) for rel in _rel_files(root)}
    val = {s for rel in files if rel.endswith("/validation.jsonl") for s in _solution_ids(root / rel)}
    held = set(validation_solutions) if validation_solutions is not None else val
    for rel in files:
        if rel.endswith("/train.jsonl"):
            shared = sorted(_solution_ids(root / rel) & held)
            if shared:
                raise UserError(
                    f"train split shares {len(shared)} solution(s) with validation: {shared[:5]}", str(root / rel)
                )
    # The run id is the digest of the file list (content-addressed, no clock): the same
    # seed gives a byte-identical dataset, manifest included; another run gives another id.
    content = json.dumps({"files": files, "validation_solutions": sorted(held)}, sort_keys=True).encode()
    manifest = {
        "format": FORMAT,
        "run_id": run_id or _sha256(content)[:32],
        "files": files,
        "validation_solutions": sorted(held),
    }
    atomic_write_json(root / MANIFEST, manifest)
    return manifest


def load_manifest(root: str | Path) -> dict[str, Any]:
    path = Path(root) / MANIFEST
    where = str(path)
    if not path.is_file():
        raise UserError(
            f"no {MANIFEST}: this dataset was not written as one unit by forethought generate, so its files "
            f"cannot be shown to belong together (rerun forethought generate; {SEAL_HINT})",
            where,
        )
    from forethought.bounded import read_json_file

    manifest = read_json_file(path, max_bytes=MAX_MANIFEST_BYTES, hint=f"; rerun forethought generate ({SEAL_HINT})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        newer = isinstance(found, int) and not isinstance(found, bool) and found > FORMAT
        raise UserError(
            f"field 'format' is {found!r}, not the dataset format this forethought reads ({FORMAT}): "
            + ("upgrade forethought" if newer else "regenerate the dataset with forethought generate"),
            where,
        )
    files, val, run_id = manifest.get("files"), manifest.get("validation_solutions"), manifest.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise UserError("field 'run_id' must be a non-empty string", where)
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise UserError("field 'files' must map file names to SHA-256 digests", where)
    if not isinstance(val, list) or not all(isinstance(s, str) for s in val):
        raise UserError("field 'validation_solutions' must be a list of solution ids", where)
    return manifest


def checked_bytes(root: str | Path, rel: str) -> bytes:
    """The bytes of ``root/rel``, refused unless the dataset's manifest lists exactly them."""
    manifest = load_manifest(root)
    path = Path(root) / rel
    want = manifest["files"].get(rel)
    if want is None:
        raise UserError(
            f"not part of dataset run {manifest['run_id'][:12]} ({MANIFEST} does not list it): the folder mixes files "
            "of different runs; rerun forethought generate",
            str(path),
        )
    data = path.read_bytes()
    if _sha256(data) != want:
        raise UserError(
            f"its content is not the one dataset run {manifest['run_id'][:12]} wrote ({MANIFEST} records another "
            "SHA-256): the folder mixes files of different runs (a killed generate? a file copied in?); "
            "rerun forethought generate",
            str(path),
        )
    return data


def split_problem(sid: str, split: str, held_out: set[str]) -> str | None:
    """Why a row of solution ``sid`` is on the wrong side of the train/validation split, or None."""
    if split == "train" and sid in held_out:
        return f"solution {sid!r} is held out for validation ({MANIFEST} validation_solutions) but appears in train"
    if split == "validation" and sid not in held_out:
        return f"solution {sid!r} is not among the held-out validation_solutions of {MANIFEST}"
    return None


# ------------------------------------------------------------------ writing
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _staging_parent(target: Path) -> Path:
    """Where ``target``'s staging folder goes: beside it, or, while the folders above it do not exist yet, in the nearest
    one that does (the same file system: a folder not yet made cannot be a mount point). They are made only when the
    finished dataset is put in place, so a generate refused on its inputs leaves no empty folders behind."""
    parent = target.absolute().parent
    return next(q for q in (parent, *parent.parents) if q.exists())


def _clean_stale(target: Path) -> None:
    """Remove the staging folders of killed runs (their pid is gone)."""
    for folder in _staging_parent(target).glob(f".{target.name}.*-*"):
        kind, _, pid = folder.name.rpartition("-")
        if kind.endswith((".partial", ".old")) and pid.isdigit() and not _alive(int(pid)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


def staging_dir(target: str | Path) -> Path:
    """A fresh, empty folder next to ``target`` (same file system, so the final rename is atomic), or in the nearest
    existing folder above it (:func:`_staging_parent`).

    Created before any work, so an unwritable output folder is reported up front; the caller removes it on a refusal.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise UserError("is a file, not a folder", str(target))
    if (
        target.is_dir()
        and any(target.iterdir())
        and not ((target / MANIFEST).is_file() or (target / "stats.json").is_file())
    ):
        raise UserError(
            "exists and is not a dataset (no dataset.json or stats.json): refusing to replace it", str(target)
        )
    for parent in target.absolute().parents:  # a file where a folder above it belongs: refused, not "File exists"
        if parent.exists() and not parent.is_dir():
            raise UserError(f"{parent} is a file, not a folder", str(target))
    try:
        _clean_stale(target)
        tmp = _staging_parent(target) / f".{target.name}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    except OSError as exc:
        raise UserError(f"cannot write here: {exc.strerror or exc}", str(target)) from None
    return tmp


def commit(tmp: Path, target: str | Path) -> None:
    """Put the sealed staging folder in place of ``target``: the old dataset goes as a whole."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)  # only now: see _staging_parent
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        os.rename(target, old)
    os.rename(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "seal":
        print("usage: python -m forethought.data_gen.unit seal DIR", flush=True)
        return 2
    manifest = seal(argv[1])
    print(f"sealed {argv[1]}: run {manifest['run_id']}, {len(manifest['files'])} files")
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys

    from forethought.errors import run_guarded

    sys.exit(run_guarded(lambda: _main(sys.argv[1:])))
