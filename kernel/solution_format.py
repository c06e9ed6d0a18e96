"""The format version of a solution (or scenario) file, and how an older one is read.

A user's corpus must not silently stop verifying when the project changes what a solution records. So every file
carries ``format_version`` (a file without it was written before versions, and is version 1), the loader refuses a
version newer than it reads, and reads an older one by migrating it in memory (:func:`migrate`), with notes naming
each change; ``forethought migrate`` writes the migrated file (data_gen/migrate.py).

Versions:

1. prerequisite keys domain-wide: ``order_status`` for every order;
2. per-entity prerequisite keys: a prerequisite whose tool declares an ``entity`` is annotated with the entry of the
   entity the task names, ``order_status[${order}]`` (docs/kernel.md, "Per-entity prerequisites").

The 1 -> 2 migration rewrites each domain-wide key of a per-entity prerequisite as the kernel checks it, found by a
replay of the solution through the kernel with the oracle (the entity's value comes from the task's parameters, the
turn's context or S, as the kernel looks it up), written back with the slot that holds the value (``${order}``).
"""

from __future__ import annotations

import copy
from typing import Any

from forethought.errors import UserError

FORMAT_VERSION = 2
CHANGES = {2: "per-entity prerequisite keys (order_status[${order}], not the domain-wide order_status)"}


def version_of(data: dict[str, Any], where: str) -> int:
    """The file's format version (1 when it names none); a newer one than this code reads is refused."""
    version = data.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"format_version must be a positive integer, got {version!r}", where)
    if version > FORMAT_VERSION:
        raise UserError(f"format_version {version} is newer than this forethought reads (up to {FORMAT_VERSION}): upgrade "
                        "forethought", where)
    return version


def migrate(data: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """``data`` (a parsed file of an older version) as the current version: (the new data, one note per change, one note
    per annotation that could not be migrated). ``data`` itself is not changed."""
    version = version_of(data, where)
    out = copy.deepcopy(data)
    changed: list[str] = []
    left: list[str] = []
    if version < 2:
        c, x = _per_entity_keys(out, where)
        changed += c
        left += x
    out.pop("format_version", None)
    return {"format_version": FORMAT_VERSION, **out}, changed, left


def summary(version: int, changed: list[str], left: list[str]) -> str:
    """One line for a warning: what reading a version-``version`` file as the current one changed."""
    what = "; ".join(CHANGES[v] for v in range(version + 1, FORMAT_VERSION + 1))
    shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
    text = f"format_version {version} read as {FORMAT_VERSION} ({what}): " + (shown if changed else "nothing to change")
    if left:
        text += f"; not migrated: {'; '.join(left[:5])}"
    return text


# ------------------------------------------------------------------ 1 -> 2
def _per_entity_keys(data: dict[str, Any], where: str) -> tuple[list[str], list[str]]:
    """Rewrite, in ``data``, each domain-wide key of a per-entity prerequisite as the kernel checks it."""
    from .registry.model import fact_of
    from .runner import build_environment, build_registry
    from .scenario import Solution

    try:
        sol = Solution.model_validate({**data, "format_version": FORMAT_VERSION})
        registry = build_registry(sol.rendered(), build_environment(sol.rendered()))
    except Exception:  # not a valid solution in any version: parse_solution reports it, located
        return [], []
    wanted = []  # (turn, task, instance or None, index, annotated key) of each key to migrate
    for i, turn in enumerate(data.get("turns") or []):
        for t in turn.get("tasks") or []:
            spec = registry.get(t.get("match", t.get("tool")))
            per_entity = {p.key for p in spec.prerequisites if p.entity is not None} if spec else set()
            for where_list, k in [(t.get("prerequisites") or [], None),
                                  *[(inst.get("prerequisites"), k) for k, inst in enumerate(t.get("instances") or [])
                                    if inst.get("prerequisites") is not None]]:
                for j, p in enumerate(where_list):
                    if isinstance(p, dict) and p.get("key") in per_entity and fact_of(p["key"]) == p["key"]:
                        wanted.append((i, t, k, j, p))
    if not wanted:
        return [], []
    checked = _replayed_keys(sol)
    slots = {name: s.get("value") for name, s in (data.get("slots") or {}).items() if isinstance(s, dict)}
    changed, left = [], []
    for i, t, k, j, p in wanted:
        instances = [k] if k is not None else list(range(len(t.get("instances") or []))) if t.get("for_each") else [None]
        keys = {checked.get((i, t["id"] if n is None else f"{t['id']}[{n}]", j)) for n in instances} or {None}
        new = keys.pop() if len(keys) == 1 else None
        label = f"turn {i}, task {t['id']}" + ("" if k is None else f" instance {k}") + f", prerequisite {j}"
        if new is None or fact_of(new) != p["key"] or new == p["key"]:
            left.append(f"{label} ({p['key']!r}: the kernel did not check it for one entity in the replay)")
            continue
        value = new[len(p["key"]) + 1:-1]
        written = f"{p['key']}[{_as_written(value, t, data['turns'][i], slots, k)}]"
        changed.append(f"{label}: {p['key']!r} -> {written!r}")
        p["key"] = written
    return changed, left


def _replayed_keys(sol: Any) -> dict[tuple[int, str, int], str]:
    """(turn, kernel task id, index) -> the key the kernel checked, from a replay whose oracle answers a check on
    ``<key>[<entity>]`` with the annotation of the domain-wide ``<key>``."""
    from .backends.oracle import OracleBackend
    from .program import Kernel
    from .records import KernelConfig
    from .registry.model import fact_of
    from .runner import run_solution

    class EntityKeyOracle(OracleBackend):
        def answer(self, primitive: str, inp: Any) -> dict[str, Any]:
            if primitive == "check_prerequisites":
                task = self.tasks.get(inp.task.id)
                for p in task.prerequisites if task is not None else []:
                    if p.key == fact_of(inp.key) != inp.key:
                        p.key = inp.key  # the version-1 annotation answers for the entity's entry
            return super().answer(primitive, inp)

    keys: dict[tuple[int, str, int], str] = {}

    def on_turn(i: int, res: Any, trace: Any, env: Any) -> None:
        for tid, records in res.prerequisites.items():
            for j, r in enumerate(records):
                keys[(i, tid, j)] = r.key

    r = sol.rendered()
    try:
        run_solution(r, Kernel(KernelConfig()), lambda i, turn: EntityKeyOracle(turn, r.id), on_turn=on_turn, trace="off")
    except Exception:  # a replay that breaks off: what it checked so far is still right; the rest is reported as left
        pass
    return keys


def _as_written(value: str, task: dict[str, Any], turn: dict[str, Any], slots: dict[str, Any], instance: int | None) -> str:
    """The entity value as the file should write it: the slot that holds it (``${order}``), so generated copies follow."""
    from .scenario import render_slots

    raw = [*(task.get("parameters") or {}).values(), *(b.get("value") for b in (task.get("bindings") or {}).values() if isinstance(b, dict)),
           *(turn.get("context") or {}).values()]
    if instance is not None:
        raw.insert(0, (task.get("instances") or [])[instance].get("value"))
    for r in raw:
        if isinstance(r, str) and "${" in r:
            try:
                if str(render_slots(r, slots)) == value:
                    return r
            except KeyError:
                continue
    named = [name for name, v in slots.items() if str(v) == value]
    return "${" + named[0] + "}" if len(named) == 1 else value


# ------------------------------------------------------------------ prerequisite keys
def key_problems(sol: Any, registry: Any) -> list[str]:
    """Every annotated prerequisite key (of a rendered solution) that does not name what its tool checks: a key the tool
    does not declare, a domain-wide key for a prerequisite the tool checks per entity, or an entity on one it checks
    once. ``run`` refuses a file with any (``verify`` would only see its replay diverge); located by turn, task, index."""
    from .registry.model import fact_of

    problems = []
    for i, turn in enumerate(sol.turns):
        for t in turn.tasks or []:
            spec = registry.get(t.tool)
            if spec is None:
                continue
            declared = {p.key: p for p in spec.prerequisites}
            lists = [(f"task {t.id}", t.prerequisites)] + [(f"task {t.id} instance {k}", inst.prerequisites)
                                                           for k, inst in enumerate(t.instances or []) if inst.prerequisites is not None]
            for label, prereqs in lists:
                for j, p in enumerate(prereqs):
                    at = f"turns[{i}] {label} prerequisites[{j}]"
                    decl = declared.get(fact_of(p.key))
                    if decl is None:
                        problems.append(f"{at}: {p.key!r} is not a prerequisite of {spec.name} (it declares: "
                                        f"{', '.join(declared) or 'none'})")
                    elif decl.entity is not None and fact_of(p.key) == p.key:
                        problems.append(f"{at}: {p.key!r} names no entity, but {spec.name} checks {decl.key} per {decl.entity}: "
                                        f"write '{decl.key}[<the {decl.entity}>]', e.g. '{decl.key}[${{...}}]' (a file written "
                                        "before per-entity keys: forethought migrate rewrites it)")
                    elif decl.entity is None and fact_of(p.key) != p.key:
                        problems.append(f"{at}: {p.key!r} names an entity, but {spec.name} checks {decl.key} once (no entity): "
                                        f"write {decl.key!r}")
    return problems
