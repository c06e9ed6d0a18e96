"""What the probe-only dataset rewrites share (scripts/probe_ranked_tools.py, scripts/probe_anonymous_tools.py): the
refusals they make before the first write, and the copy they write whole, its manifest sealed over the new files."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path


def refusal(source: Path, destination: Path) -> str | None:
    """Why a rewrite of ``source`` into ``destination`` is refused (a located message), or None."""
    if not (source / "dataset.json").is_file() or not (source / "match_func").is_dir():
        return f"{source}: not a dataset folder with match_func rows (no dataset.json)"
    if destination.exists():
        return f"{destination}: already exists; give a new folder"
    return None


def write_copy(source: Path, destination: Path, rewritten: dict[str, str]) -> None:
    """``destination``: a copy of ``source`` with the files of ``rewritten`` (relative path: text) replaced and the
    manifest's digests of them updated. Staged beside it and renamed: the copy appears whole or not at all."""
    staging = destination.with_name(destination.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    manifest = json.loads((staging / "dataset.json").read_text(encoding="utf-8"))
    for relative, text in rewritten.items():
        (staging / relative).write_text(text, encoding="utf-8")
        manifest["files"][relative] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    (staging / "dataset.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    staging.rename(destination)
