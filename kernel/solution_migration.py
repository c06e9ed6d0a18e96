"""Migrating a solution file of an older format version to the current one (the versions: kernel/solution_format.py).

The 1 -> 2 migration replays the solution through the kernel with the oracle, so this module sits above the kernel's
turn loop (kernel/runner.py), which the solution model (kernel/scenario.py) must not import.
"""

from __future__ import annotations

import copy
from typing import Any

from .solution_format import FORMAT_VERSION, version_of


def migrate(data: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """``data`` (a parsed file of an older version) as the current version: (the new data, one note per change, one note
    per annotation that could not be migrated). ``data`` itself is not changed."""
    version = version_of(data, where)
    out = copy.deepcopy(data)
    changed: list[str] = []
    left: list[str] = []
    if version < 3:  # first: the per-entity step below reads the data with the current model
        changed += _words(out)
    if version < 2:
        migrated, not_migrated = _per_entity_keys(out, where)
        changed += migrated
        left += not_migrated
    out.pop("format_version", None)
    return {"format_version": FORMAT_VERSION, **out}, changed, left


# ------------------------------------------------------------------ 2 -> 3
SOURCE_WORDS = {"tau": "request", "S": "scratchpad"}
FILL_PREFIXES = {"tau:": "request:", "S:": "scratchpad:"}
TAG_WORDS = {"tau_over_s": "request_over_scratchpad"}


def _words(data: dict[str, Any]) -> list[str]:
    """Rename, in ``data``, the paper's letters to words: binding sources, fill_from prefixes, the pattern tag. Data of
    any shape passes through (what is not a solution's shape is left for the schema check to locate)."""

    def items(value: Any) -> list[Any]:
        return list(value) if isinstance(value, list) else []

    changed = 0
    for turn in items(data.get("turns")):
        for task in items(turn.get("tasks")) if isinstance(turn, dict) else []:
            if not isinstance(task, dict):
                continue
            lists = [
                task.get("bindings"),
                *[i.get("bindings") for i in items(task.get("instances")) if isinstance(i, dict)],
            ]
            for bindings in lists:
                for binding in bindings.values() if isinstance(bindings, dict) else []:
                    if not isinstance(binding, dict):
                        continue
                    source = binding.get("source")
                    if isinstance(source, str) and source in SOURCE_WORDS:
                        binding["source"] = SOURCE_WORDS[source]
                        changed += 1
                    ff = binding.get("fill_from")
                    for old, new in FILL_PREFIXES.items():
                        if isinstance(ff, str) and ff.startswith(old):
                            binding["fill_from"] = new + ff[len(old) :]
                            changed += 1
    tags = data.get("tags")
    for i, tag in enumerate(items(tags)):
        if isinstance(tag, str) and tag in TAG_WORDS:
            tags[i] = TAG_WORDS[tag]
            changed += 1
    return [f"{changed} source/fill_from/tag word(s): tau -> request, S -> scratchpad"] if changed else []


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
        for task in turn.get("tasks") or []:
            spec = registry.get(task.get("match", task.get("tool")))
            per_entity = {p.key for p in spec.prerequisites if p.entity is not None} if spec else set()
            for where_list, k in [
                (task.get("prerequisites") or [], None),
                *[
                    (inst.get("prerequisites"), k)
                    for k, inst in enumerate(task.get("instances") or [])
                    if inst.get("prerequisites") is not None
                ],
            ]:
                for j, prerequisite in enumerate(where_list):
                    if (
                        isinstance(prerequisite, dict)
                        and prerequisite.get("key") in per_entity
                        and fact_of(prerequisite["key"]) == prerequisite["key"]
                    ):
                        wanted.append((i, task, k, j, prerequisite))
    if not wanted:
        return [], []
    checked = _replayed_keys(sol)
    slots = {name: s.get("value") for name, s in (data.get("slots") or {}).items() if isinstance(s, dict)}
    changed, left = [], []
    for i, task, k, j, prerequisite in wanted:
        instances = (
            [k] if k is not None else list(range(len(task.get("instances") or []))) if task.get("for_each") else [None]
        )
        keys = {checked.get((i, task["id"] if n is None else f"{task['id']}[{n}]", j)) for n in instances} or {None}
        new = keys.pop() if len(keys) == 1 else None
        label = f"turn {i}, task {task['id']}" + ("" if k is None else f" instance {k}") + f", prerequisite {j}"
        if new is None or fact_of(new) != prerequisite["key"] or new == prerequisite["key"]:
            left.append(f"{label} ({prerequisite['key']!r}: the kernel did not check it for one entity in the replay)")
            continue
        value = new[len(prerequisite["key"]) + 1 : -1]
        written = f"{prerequisite['key']}[{_as_written(value, task, data['turns'][i], slots, k)}]"
        changed.append(f"{label}: {prerequisite['key']!r} -> {written!r}")
        prerequisite["key"] = written
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
                for prerequisite in task.prerequisites if task is not None else []:
                    if prerequisite.key == fact_of(inp.key) != inp.key:
                        prerequisite.key = inp.key  # the version-1 annotation answers for the entity's entry
            return super().answer(primitive, inp)

    keys: dict[tuple[int, str, int], str] = {}

    def on_turn(i: int, res: Any, trace: Any, env: Any) -> None:
        for tid, records in res.prerequisites.items():
            for j, record in enumerate(records):
                keys[(i, tid, j)] = record.key

    rendered = sol.rendered()
    try:
        run_solution(
            rendered,
            Kernel(KernelConfig()),
            lambda i, turn: EntityKeyOracle(turn, rendered.id),
            on_turn=on_turn,
            trace="off",
        )
    except Exception:  # a replay that breaks off: what it checked so far is still right; the rest is reported as left
        pass
    return keys


def _as_written(
    value: str, task: dict[str, Any], turn: dict[str, Any], slots: dict[str, Any], instance: int | None
) -> str:
    """The entity value as the file should write it: the slot that holds it (``${order}``), so generated copies follow."""
    from .scenario import render_slots

    raw = [
        *(task.get("parameters") or {}).values(),
        *(b.get("value") for b in (task.get("bindings") or {}).values() if isinstance(b, dict)),
        *(turn.get("context") or {}).values(),
    ]
    if instance is not None:
        raw.insert(0, (task.get("instances") or [])[instance].get("value"))
    for candidate in raw:
        if isinstance(candidate, str) and "${" in candidate:
            try:
                if str(render_slots(candidate, slots)) == value:
                    return candidate
            except KeyError:
                continue
    named = [name for name, v in slots.items() if str(v) == value]
    return "${" + named[0] + "}" if len(named) == 1 else value
