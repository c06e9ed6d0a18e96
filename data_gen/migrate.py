"""``forethought migrate PATH...``: rewrite solution files of an older format version as the current one.

Every file is read and migrated in memory first (kernel/solution_format.py: the same migration the loader applies when
it reads an older file), and the migrated file must load as a current solution; only when every file passes is
anything written. Each migrated file keeps its original beside it (``<file>.v<version>.bak``, refused if one is
already there), then is replaced atomically. Exit 0: done (or nothing to do); 1: written, but some annotations could
not be migrated (listed: fix them by hand, verify names them); 2: bad input, nothing written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from forethought.errors import UserError
from forethought.kernel.solution_format import FORMAT_VERSION, version_of
from forethought.kernel.solution_migration import migrate

USAGE = f"""\
usage: forethought migrate PATH...

Rewrite the solution files under PATH (files or folders) written in an older format version as version
{FORMAT_VERSION}, each in place and atomically, its original kept as <file>.v<version>.bak. Files of the current
version are left as they are. Nothing is written unless every file can be migrated."""


def _read(path: Path) -> tuple[bytes, dict[str, Any]]:
    from forethought.bounded import MAX_FILE_BYTES, loads_json, loads_yaml

    raw = path.read_bytes()
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES >> 20} MiB: not a solution file", str(path))
    try:
        text = raw.decode("utf-8")
        data = loads_yaml(text, str(path)) if path.suffix in (".yaml", ".yml") else loads_json(text, str(path))
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start})", str(path)) from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise UserError(
            f"not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: {exc}", str(path)
        ) from None
    if not isinstance(data, dict):
        raise UserError("a solution must be a JSON/YAML object", str(path))
    return raw, data


def _dump(path: Path, data: dict[str, Any]) -> str:
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def plan(path: Path) -> tuple[int, bytes, dict[str, Any], list[str], list[str]] | None:
    """What migrating ``path`` would write: (its version, its bytes, the new data, changes, what could not be migrated);
    None when it is current. Refuses (UserError) anything that would stop the write: nothing is written here."""
    from forethought.kernel.solution_file import parse_solution

    raw, data = _read(path)
    version = version_of(data, str(path))
    if version == FORMAT_VERSION:
        return None
    new, changed, left = migrate(data, str(path))
    parse_solution(new, str(path))  # the migrated file loads as a current solution
    backup = _backup(path, version)
    if backup.exists():
        raise UserError(
            f"a backup is already there ({backup}): move it away first, so no earlier original is lost", str(path)
        )
    return version, raw, new, changed, left


def _backup(path: Path, version: int) -> Path:
    return path.with_name(f"{path.name}.v{version}.bak")


def cli(args: list[str]) -> int:
    from forethought.kernel.solution_file import solution_files
    from forethought.primitives.io import atomic_write_bytes, atomic_write_text

    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    flags = [a for a in args if a.startswith("-")]
    if flags or not args:
        print(
            f"forethought migrate: {'unknown flag(s) ' + ', '.join(flags) if flags else 'no paths given'}\n\n{USAGE}",
            file=sys.stderr,
        )
        return 2
    files = solution_files(args)
    if not files:
        raise UserError("no solution files found", ", ".join(args))
    plans = {f: plan(f) for f in files}  # every file checked before any is written
    left = [f"{f}: {x}" for f, p in plans.items() if p is not None for x in p[4]]
    if left:  # a partial migration would leave a file that still fails: nothing is written unless every file migrates
        raise UserError(
            f"{len(left)} annotation(s) cannot be migrated automatically, so nothing was written; correct them by hand, "
            "then run migrate again: " + "; ".join(left[:5]) + (f" (+{len(left) - 5} more)" if len(left) > 5 else ""),
            "migrate",
        )
    status = 0
    for path, migration in plans.items():
        if migration is None:
            print(f"current  {path} (format_version {FORMAT_VERSION})")
            continue
        version, raw, new, changed, _ = migration
        atomic_write_bytes(_backup(path, version), raw)
        atomic_write_text(path, _dump(path, new))
        print(
            f"migrated {path}: format_version {version} -> {FORMAT_VERSION}, {len(changed)} change(s); original kept as "
            f"{_backup(path, version)}"
        )
        for change in changed:
            print(f"  {change}")
    return status
