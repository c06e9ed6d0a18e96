"""The kernel's environment over bfcl-eval's own tool classes (GorillaFileSystem, TwitterAPI, ...).

The same interface as ``forethought.kernel.environment.Environment`` (``stage``, ``commit``,
``tool``, ``snapshot``), so the kernel's ToolGate runs unchanged: a call runs on a deep copy of the
instance that owns the method; the copy replaces the live instance only when the kernel commits
(after its postcondition holds), so a rejected call leaves bfcl's state as it was.

The instances are built exactly as bfcl's ``execute_multi_turn_func_call`` builds them: ``cls()``,
then, for a stateful class, ``_load_scenario(deepcopy(initial_config.get(cls, {})), long_context=...)``,
with long_context on for the long_context category. The method map is bfcl's too: every public
method of every involved instance (function names are unique across the classes).
"""

from __future__ import annotations

import copy
import importlib
import inspect
from typing import Any

from .bfcl_data import Entry

_MAX_DEPTH = 64  # snapshot nesting bound (GorillaFileSystem's directory tree is the deepest state)


def build_instance(class_name: str, initial_config: dict[str, Any], long_context: bool) -> Any:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
    instance = cls()
    if class_name not in STATELESS_CLASSES:
        instance._load_scenario(copy.deepcopy(initial_config.get(class_name, {})), long_context=long_context)
    return instance


class BfclEnvironment:
    """One entry's world: a live instance per involved class."""

    def __init__(self, entry: Entry):
        self.entry_id = entry.id
        self.instances: dict[str, Any] = {
            name: build_instance(name, entry.initial_config, entry.long_context) for name in entry.involved_classes
        }
        self._owner: dict[str, str] = {}
        for class_name, instance in self.instances.items():
            for method, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not method.startswith("_"):
                    self._owner[method] = class_name

    def tool(self, name: str) -> None:
        """No hand-written postconditions for bfcl's functions: ToolGate checks the imported docs only."""
        return None

    def owner(self, name: str) -> str | None:
        return self._owner.get(name)

    def stage(self, name: str, args: dict[str, Any]) -> tuple[Any, tuple[str, Any] | None]:
        """Run ``name(**args)`` on a copy of its instance; returns (raw result, (class, staged copy)).

        A method that raises fails the call as ``{"error": ...}`` with nothing staged, as bfcl's
        checker records a raised exception as "Error during execution"."""
        class_name = self._owner.get(name)
        if class_name is None:
            return {"error": f"no bfcl class of {self.entry_id} has a function {name!r}"}, None
        staged = copy.deepcopy(self.instances[class_name])
        try:
            result = getattr(staged, name)(**args)
        except Exception as exc:  # the class's own failure, reported as the call's
            return {"error": f"{type(exc).__name__}: {exc}"}, None
        # The result may share objects with the staged instance (a list of its entries); a copy keeps
        # what the kernel writes into S from changing when a later call changes the world.
        return copy.deepcopy(result), (class_name, staged)

    def commit(self, name: str, staged: tuple[str, Any]) -> None:
        class_name, instance = staged
        self.instances[class_name] = instance

    def snapshot(self) -> dict[str, Any]:
        """The public attributes of each stateful instance (what bfcl's state checker compares), as JSON values."""
        from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

        return {
            name: {k: plain(v) for k, v in vars(inst).items() if not k.startswith("_")}
            for name, inst in self.instances.items()
            if name not in STATELESS_CLASSES
        }


def plain(value: Any, depth: int = 0) -> Any:
    """A JSON value for a class attribute: objects (GorillaFileSystem's File and Directory) become dicts."""
    if depth > _MAX_DEPTH:
        return "..."
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [plain(v, depth + 1) for v in value]
    if hasattr(value, "__dict__"):
        # A Directory links to its parent: skip attributes that point back up the tree.
        return {
            "__class__": type(value).__name__,
            **{k: plain(v, depth + 1) for k, v in vars(value).items() if k != "parent" and not k.startswith("_")},
        }
    return str(value)
