"""A domain's reference data: the file ``data.json`` beside its state model (tau2-bench keeps a domain's data beside
its tools the same way).

The file holds the initial state the domain's tools start from (its users, flights, orders, files, ...), as the state
model's fields; the model itself holds structure only. It is found through the module that defines the model, never
through the current directory, and ships in the wheel as package data. A file that cannot be read or parsed, or that
the model refuses, is a :class:`~forethought.errors.UserError` naming the file (and the line, or the field).

The simulated domains never read a file while they run (tests/test_domains_are_hermetic.py): the data is read once,
when the domain is loaded, by :class:`forethought.kernel.domains.base.ReferenceData`; this module does the reading,
outside the domain folders.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from forethought.errors import UserError

DATA_FILE = "data.json"


def data_file_of(module_name: str) -> Path:
    """The data file beside the module ``module_name`` (imported already): ``data.json`` in that module's folder."""
    module_file = getattr(sys.modules.get(module_name), "__file__", None)
    if not module_file:
        raise UserError(f"module {module_name} has no file, so no {DATA_FILE} beside it", module_name)
    return Path(module_file).resolve().parent / DATA_FILE


@cache
def read_data_file(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (read once: callers copy what they change)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("the domain's reference data file is missing", str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the domain's reference data: {exc}", str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}", str(path)) from None
    if not isinstance(data, dict):
        raise UserError(f"must hold a JSON object (the state's fields), not {type(data).__name__}", str(path))
    return data


def refused(path: Path, error: ValidationError) -> UserError:
    """The state model's first objection to the data in ``path``, located at the field it names."""
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "(the whole file)"
    return UserError(f"{location}: {first['msg']}", str(path))
