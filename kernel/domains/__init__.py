"""Simulated tool domains, one plugin folder each; discovered by name."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .base import Domain, DomainTool, ToolError


@cache
def available() -> tuple[str, ...]:
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg))


@cache
def load_domain(name: str) -> Domain:
    if name not in available():
        raise KeyError(f"unknown domain {name!r}; available: {', '.join(available())}")
    mod = importlib.import_module(f"{__name__}.{name}")
    dom = getattr(mod, "DOMAIN", None)
    if not isinstance(dom, Domain):
        raise TypeError(f"kernel/domains/{name}/__init__.py must define DOMAIN = Domain(...)")
    return dom


__all__ = ["Domain", "DomainTool", "ToolError", "available", "load_domain"]
