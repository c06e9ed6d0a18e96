"""Reading a solution (or scenario) file: JSON or YAML, strict and bounded, an older format version migrated in memory
with notes the commands print as a warning (kernel/solution_migration.py), then validated as a
:class:`~forethought.kernel.scenario.Solution`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from forethought.errors import UserError

from .scenario import Solution
from .solution_format import FORMAT_VERSION, summary, version_of
from .solution_migration import migrate


def _format_error(exc: ValidationError, path: str) -> str:
    lines = []
    for error in exc.errors()[:10]:
        loc = ".".join(str(p) for p in error["loc"]) or "<root>"
        msg = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{loc}: {msg}")
    more = f" (+{len(exc.errors()) - 10} more)" if len(exc.errors()) > 10 else ""
    return "; ".join(lines) + more


def parse_solution(data: Any, path: str = "<data>") -> Solution:
    """A solution from parsed JSON/YAML; a file of an older format version is migrated in memory, the changes kept as
    :attr:`Solution.format_notes` (which the commands print as a warning)."""

    if not isinstance(data, dict):
        raise UserError("a solution must be a JSON/YAML object", path)
    version = version_of(data, path)
    notes: list[str] = []
    if version < FORMAT_VERSION:
        data, changed, left = migrate(data, path)
        if changed or left:
            notes.append(summary(version, changed, left) + f"; rewrite the file with `forethought migrate {path}`")
    try:
        sol = Solution.model_validate(data)
    except ValidationError as exc:
        raise UserError(_format_error(exc, path), path) from None
    sol.source_file = path
    sol._format_notes = notes
    _normalise_extra_tools(sol, path)
    try:
        sol.rendered()
    except KeyError as exc:
        raise UserError(str(exc.args[0]), path) from None
    return sol


def _normalise_extra_tools(sol: Solution, path: str) -> None:
    """``registry.extra`` tool schemas get the importers' normalisation: a misspelt keyword or type is an error."""
    from .registry.schema_normalize import SchemaPathError, normalize_schema

    for i, spec in enumerate(sol.registry.extra):
        try:
            params = normalize_schema(spec.parameters, path="parameters", require_object=True)
            output = (
                normalize_schema(spec.output_schema, path="output_schema") if spec.output_schema is not None else None
            )
        except SchemaPathError as exc:
            raise UserError(f"registry.extra.{i} ({spec.name!r}).{exc.path}: {exc.message}", path) from None
        spec.parameters, spec.output_schema = params, output


def load_solution(path: str | Path) -> Solution:
    from forethought.bounded import MAX_FILE_BYTES, loads_json, loads_yaml, read_bounded

    file_path = Path(path)
    if file_path.is_file() and file_path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES >> 20} MiB: not a solution file", str(file_path))
    try:
        text = read_bounded(file_path, str(file_path)).decode("utf-8")
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror}", str(file_path)) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text (byte {exc.start}): not a solution file", str(file_path)) from None
    try:
        data = (
            loads_yaml(text, str(file_path))
            if file_path.suffix in (".yaml", ".yml")
            else loads_json(text, str(file_path))
        )
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", str(file_path)) from None
    except yaml.YAMLError as exc:
        raise UserError(f"not valid YAML: {exc}", str(file_path)) from None
    return parse_solution(data, str(file_path))


def warn_format_notes(sol: Solution) -> None:
    """Say on stderr what reading the file's older format version changed (nothing for a current file)."""
    import sys

    for note in sol.format_notes:
        print(f"warning: {sol.source_file}: {note}", file=sys.stderr)


def solution_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out.extend(
                sorted(x for x in path.rglob("*") if x.suffix in (".json", ".yaml", ".yml") and x.name != "schema.json")
            )
        elif path.exists():
            out.append(path)
        else:
            raise UserError("no such file or directory", str(path))
    return out
