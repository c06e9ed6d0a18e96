"""Tool registries: one internal schema (ToolSpec), importers for common formats."""

from .callparse import Call, CallParseError, format_call, format_calls, parse_call, parse_calls
from .importers import RegistryError, load_registry, parse_registry
from .model import Prerequisite, Sat, ToolSpec
from .registry import Registry
from .validate import validate_args

__all__ = [
    "Call",
    "CallParseError",
    "Prerequisite",
    "Registry",
    "RegistryError",
    "Sat",
    "ToolSpec",
    "format_call",
    "format_calls",
    "load_registry",
    "parse_call",
    "parse_calls",
    "parse_registry",
    "validate_args",
]
