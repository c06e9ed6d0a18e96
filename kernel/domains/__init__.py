"""Tool domains, one plugin folder each; discovered by name.

The simulated domains live here. Your own live in folders you own: each folder named in ``FORETHOUGHT_DOMAINS``
(paths separated by ``os.pathsep``, as ``PYTHONPATH``) holds domain folders (``<folder>/<name>/__init__.py``
defining ``DOMAIN = Domain(...)``, with ``data.json`` beside its state model where that model is a ``ReferenceData``
(the state its tools start from), and ``synonyms.json`` and ``slot_values.json`` if it has them), and
an installed package may register one under the entry-point group ``forethought.domains`` (``name = "module"``).
An environment variable, not a config key, because every process of a run (generate's replay workers, a test's
subprocess) must see the same domains. ``forethought new-domain`` writes such a folder.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from forethought.errors import UserError

from .base import Domain, DomainTool, ToolError

PATH_VARIABLE = "FORETHOUGHT_DOMAINS"
ENTRY_POINT_GROUP = "forethought.domains"
BUILTIN_DIR = Path(__file__).resolve().parent


def _search_dirs() -> list[Path]:
    """The folders named in FORETHOUGHT_DOMAINS, in order (each must exist: a typo would silently hide a domain)."""
    dirs = []
    for raw in (os.environ.get(PATH_VARIABLE) or "").split(os.pathsep):
        if not raw.strip():
            continue
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            raise UserError(f"{raw!r} is not a folder", PATH_VARIABLE)
        dirs.append(path)
    return dirs


def _entry_points() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


@cache
def domain_folders() -> dict[str, Path]:
    """Each domain's folder: the built-in ones, then those of FORETHOUGHT_DOMAINS and of entry points. A name taken
    twice is refused, naming both folders: which one a run used must never depend on an order."""
    found: dict[str, Path] = {m.name: BUILTIN_DIR / m.name for m in pkgutil.iter_modules([str(BUILTIN_DIR)]) if m.ispkg}
    extra_dirs = _search_dirs()
    for folder in extra_dirs:
        for module_info in pkgutil.iter_modules([str(folder)]):
            if not module_info.ispkg:
                continue
            if module_info.name in found:
                raise UserError(
                    f"domain {module_info.name!r} is defined twice: {found[module_info.name]} and {folder / module_info.name}",
                    PATH_VARIABLE,
                )
            found[module_info.name] = folder / module_info.name
    for name, module in _entry_points().items():
        if name in found:
            raise UserError(
                f"domain {name!r} is defined twice: {found[name]} and entry point {module!r}", ENTRY_POINT_GROUP
            )
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise UserError(f"{name} names {module!r}, which is not an importable package", ENTRY_POINT_GROUP)
        found[name] = Path(next(iter(spec.submodule_search_locations)))
    # Your folders join this package's search path, so a domain's own relative imports (``from .state import``)
    # and pickling by module name work for yours as for the built-in ones.
    for folder in extra_dirs:
        if str(folder) not in __path__:
            __path__.append(str(folder))
    return dict(sorted(found.items()))


@cache
def available() -> tuple[str, ...]:
    return tuple(domain_folders())


@cache
def load_domain(name: str) -> Domain:
    if name not in available():
        raise KeyError(f"unknown domain {name!r}; available: {', '.join(available())}")
    eps = _entry_points()
    mod = importlib.import_module(eps[name] if name in eps else f"{__name__}.{name}")
    dom = getattr(mod, "DOMAIN", None)
    if not isinstance(dom, Domain):
        raise TypeError(f"{domain_folders()[name] / '__init__.py'} must define DOMAIN = Domain(...)")
    return dom


__all__ = ["Domain", "DomainTool", "ToolError", "available", "domain_folders", "load_domain"]
