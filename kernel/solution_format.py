"""The format version of a solution (or scenario) file, and how an older one is read.

A user's corpus must not silently stop verifying when the project changes what a solution records. So every file
carries ``format_version`` (a file without it was written before versions, and is version 1), the loader refuses a
version newer than it reads, and reads an older one by migrating it in memory (:func:`migrate`), with notes naming
each change; ``forethought migrate`` writes the migrated file (data_gen/migrate.py).

Versions:

1. prerequisite keys domain-wide: ``order_status`` for every order;
2. per-entity prerequisite keys: a prerequisite whose tool declares an ``entity`` is annotated with the entry of the
   entity the task names, ``order_status[${order}]`` (docs/kernel.md, "Per-entity prerequisites");
3. words, not the paper's letters: a binding's ``source`` is ``request`` (was ``tau``: the task's parameters, then the
   turn's context) or ``scratchpad`` (was ``S``), ``fill_from`` reads ``request:<key>`` / ``scratchpad:<key>``, and
   the pattern tag ``tau_over_s`` is ``request_over_scratchpad``.

The 1 -> 2 migration rewrites each domain-wide key of a per-entity prerequisite as the kernel checks it, found by a
replay of the solution through the kernel with the oracle (the entity's value comes from the task's parameters, the
turn's context or S, as the kernel looks it up), written back with the slot that holds the value (``${order}``).

This module holds the versions and what needs no kernel (so the solution model can import it); the migrations, which
replay through the kernel, are in kernel/solution_migration.py, and reading a file in kernel/solution_file.py.
"""

from __future__ import annotations

from typing import Any

from forethought.errors import UserError

FORMAT_VERSION = 3
CHANGES = {
    2: "per-entity prerequisite keys (order_status[${order}], not the domain-wide order_status)",
    3: "binding sources in words (request, scratchpad; were tau, S), fill_from request:/scratchpad:, tag request_over_scratchpad",
}


def version_of(data: dict[str, Any], where: str) -> int:
    """The file's format version (1 when it names none); a newer one than this code reads is refused."""
    version = data.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"format_version must be a positive integer, got {version!r}", where)
    if version > FORMAT_VERSION:
        raise UserError(
            f"format_version {version} is newer than this forethought reads (up to {FORMAT_VERSION}): upgrade "
            "forethought",
            where,
        )
    return version


def summary(version: int, changed: list[str], left: list[str]) -> str:
    """One line for a warning: what reading a version-``version`` file as the current one changed."""
    what = "; ".join(CHANGES[v] for v in range(version + 1, FORMAT_VERSION + 1))
    shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
    text = f"format_version {version} read as {FORMAT_VERSION} ({what}): " + (shown if changed else "nothing to change")
    if left:
        text += f"; not migrated: {'; '.join(left[:5])}"
    return text


# ------------------------------------------------------------------ prerequisite keys
def key_problems(sol: Any, registry: Any) -> list[str]:
    """Every annotated prerequisite key (of a rendered solution) that does not name what its tool checks: a key the tool
    does not declare, a domain-wide key for a prerequisite the tool checks per entity, or an entity on one it checks
    once. ``run`` refuses a file with any (``verify`` would only see its replay diverge); located by turn, task, index."""
    from .registry.model import fact_of

    problems = []
    for i, turn in enumerate(sol.turns):
        for task in turn.tasks or []:
            spec = registry.get(task.tool)
            if spec is None:
                continue
            declared = {p.key: p for p in spec.prerequisites}
            lists = [(f"task {task.id}", task.prerequisites)] + [
                (f"task {task.id} instance {k}", inst.prerequisites)
                for k, inst in enumerate(task.instances or [])
                if inst.prerequisites is not None
            ]
            for label, prereqs in lists:
                for j, prerequisite in enumerate(prereqs):
                    at = f"turns[{i}] {label} prerequisites[{j}]"
                    decl = declared.get(fact_of(prerequisite.key))
                    if decl is None:
                        problems.append(
                            f"{at}: {prerequisite.key!r} is not a prerequisite of {spec.name} (it declares: "
                            f"{', '.join(declared) or 'none'})"
                        )
                    elif decl.entity is not None and fact_of(prerequisite.key) == prerequisite.key:
                        problems.append(
                            f"{at}: {prerequisite.key!r} names no entity, but {spec.name} checks {decl.key} per {decl.entity}: "
                            f"write '{decl.key}[<the {decl.entity}>]', e.g. '{decl.key}[${{...}}]' (a file written "
                            "before per-entity keys: forethought migrate rewrites it)"
                        )
                    elif decl.entity is None and fact_of(prerequisite.key) != prerequisite.key:
                        problems.append(
                            f"{at}: {prerequisite.key!r} names an entity, but {spec.name} checks {decl.key} once (no entity): "
                            f"write {decl.key!r}"
                        )
    return problems
