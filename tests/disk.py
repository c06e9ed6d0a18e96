"""What a folder holds, byte for byte: a refusal must leave it exactly as it was (docs/guarantees.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def tree(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` (hidden ones included) -> the SHA-256 of a file's bytes, or ``dir``."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }
