"""Variations of a worked solution, applied before it is replayed through the kernel.

Each operator returns a new (unrendered) Solution; targets are never edited
by hand here: the varied solution is replayed with the oracle, so every
decision is re-derived and re-checked (see ``data_gen/generate.py``).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from forethought.bounded import read_json_file
from forethought.kernel.domains import available, load_domain
from forethought.kernel.registry.model import ToolSpec
from forethought.kernel.scenario import RegistryRef, Solution

SLOT_VALUES_DIR = Path(__file__).resolve().parent / "slot_values"


def slot_values_path(domain: str) -> Path:
    """Where a domain's slot values live: ``slot_values.json`` in its own folder when it has one (your domains),
    else ``data_gen/slot_values/<domain>.json`` (the built-in ones)."""
    from forethought.kernel.domains import BUILTIN_DIR, domain_folders

    own = domain_folders().get(domain)
    if own is not None and ((own / "slot_values.json").is_file() or own.parent != BUILTIN_DIR):
        return own / "slot_values.json"
    return SLOT_VALUES_DIR / f"{domain}.json"


@cache
def slot_values(domain: str) -> dict[str, list[Any]]:
    """The values a domain's slots vary over (:func:`slot_values_path`); none when the file is absent."""
    path = slot_values_path(domain)
    if not path.is_file():
        return {}
    data = read_json_file(path)
    return {k: list(v) for k, v in data.items() if isinstance(v, list)}


def pool_for(sol: Solution, slot_type: str) -> list[Any]:
    vals: list[Any] = []
    for domain in sol.domains:
        for value in slot_values(domain).get(slot_type, []):
            if value not in vals:
                vals.append(value)
    return vals


@dataclass
class Variant:
    """What was varied (for the dataset card and debugging)."""

    solution: Solution  # unrendered, with new slot values applied at render time
    slot_values: dict[str, Any] = field(default_factory=dict)
    ops: list[str] = field(default_factory=list)
    permuted: bool = False  # independent tasks reordered: decompose targets are not emitted
    renamed: bool = False  # task ids renamed: decompose targets are not emitted (ids are arbitrary)


def substitute_entities(
    sol: Solution,
    rng: random.Random,
    p: float = 0.8,  # names: math (a probability; callers pass p=)
) -> dict[str, Any]:
    """New values for the slots, drawn from the domain's value lists; distinct per type."""
    chosen: dict[str, Any] = {}
    used: dict[str, set[str]] = {}
    for name, slot in sol.slots.items():
        pool = [v for v in pool_for(sol, slot.type) if json.dumps(v) not in used.get(slot.type, set())]
        if pool and rng.random() < p:
            chosen[name] = rng.choice(pool)
        else:
            chosen[name] = slot.value
        used.setdefault(slot.type, set()).add(json.dumps(chosen[name]))
    # two slots of one type must not collapse onto the same value (e.g. source and destination)
    for name, slot in sol.slots.items():
        same = [n for n, s in sol.slots.items() if s.type == slot.type and n != name and chosen[n] == chosen[name]]
        if same:
            chosen[name] = slot.value
    if len({json.dumps(v) for v in chosen.values()}) < len({json.dumps(s.value) for s in sol.slots.values()}):
        return {k: s.value for k, s in sol.slots.items()}
    _keep_person_ids_consistent(sol, chosen)
    return chosen


_PERSON_ID = re.compile(r"([a-z]+)_([a-z]+)_(\d+)")


def _keep_person_ids_consistent(sol: Solution, chosen: dict[str, Any]) -> None:
    """A user id built from a person's name (``sofia_kim_7287``) follows that person's substituted name.

    Slots are drawn independently, which would pair ``liam_khan_2521`` with "Emma Nguyen"; the world
    stays consistent either way (every occurrence is a slot), but the data would read wrong.
    """
    for name, slot in sol.slots.items():
        match = _PERSON_ID.fullmatch(slot.value) if isinstance(slot.value, str) else None
        if not match:
            continue
        first, last, digits = match.groups()
        cur = _PERSON_ID.fullmatch(chosen[name]) if isinstance(chosen[name], str) else None
        new_first, new_last, new_digits = cur.groups() if cur else (first, last, digits)
        linked = False
        for other, other_slot in sol.slots.items():
            if not isinstance(other_slot.value, str):
                continue
            if other_slot.type == "first_name" and other_slot.value.lower() == first:
                new_first, linked = re.sub(r"[^a-z]", "", str(chosen[other]).lower()) or first, True
            elif other_slot.type == "last_name" and other_slot.value.lower() == last:
                new_last, linked = re.sub(r"[^a-z]", "", str(chosen[other]).lower()) or last, True
        if linked:
            candidate = f"{new_first}_{new_last}_{new_digits}"
            if candidate not in {json.dumps(v).strip('"') for k, v in chosen.items() if k != name}:
                chosen[name] = candidate


def choose_paraphrases(sol: Solution, rng: random.Random) -> Solution:
    turns = []
    for turn in sol.turns:
        options = [turn.user] + list(turn.paraphrases)
        user = rng.choice(options)
        turns.append(turn.model_copy(update={"user": user}))
    return sol.model_copy(update={"turns": turns})


_ID_SCHEMES = [
    lambda i: f"t{i + 1}",
    lambda i: f"s{i + 5}",
    lambda i: f"task_{i + 1}",
    lambda i: chr(ord("a") + i) if i < 26 else f"z{i}",
    lambda i: f"step{i + 1}",
    lambda i: f"u{i + 1:02d}",
]


def rename_task_ids(sol: Solution, rng: random.Random) -> Solution:
    scheme = rng.choice(_ID_SCHEMES)
    turns = []
    for turn in sol.turns:
        if not turn.tasks:
            turns.append(turn)
            continue
        new_ids = {task.id: scheme(i) for i, task in enumerate(turn.tasks)}
        tasks = [
            task.model_copy(
                update={
                    "id": new_ids[task.id],
                    "depends_on": [new_ids.get(d, d) for d in task.depends_on],
                    # a fan-out names the task whose list it runs over
                    "for_each": task.for_each.model_copy(
                        update={"task": new_ids.get(task.for_each.task, task.for_each.task)}
                    )
                    if task.for_each is not None
                    else None,
                }
            )
            for task in turn.tasks
        ]
        turns.append(turn.model_copy(update={"tasks": tasks, "order": [new_ids.get(x, x) for x in turn.order or []]}))
    return sol.model_copy(update={"turns": turns})


def permute_independent(sol: Solution, rng: random.Random) -> tuple[Solution, bool]:
    """Shuffle the task list of turns with independent tasks (changes get_order's input order only)."""
    changed = False
    turns = []
    for turn in sol.turns:
        ts = list(turn.tasks or [])
        if len(ts) > 1 and turn.halt is None:
            new = ts[:]
            rng.shuffle(new)
            changed |= [x.id for x in new] != [x.id for x in ts]
            turns.append(turn.model_copy(update={"tasks": new}))
        else:
            turns.append(turn)
    return sol.model_copy(update={"turns": turns}), changed


def _needed_tools(sol: Solution) -> set[str]:
    need: set[str] = set()
    for turn in sol.turns:
        for task in turn.tasks or []:
            need.update(x for x in (task.tool, task.match) if x)
            for prerequisite in task.prerequisites:
                for prop in (prerequisite.retrieval, prerequisite.remediation):
                    if prop is not None:
                        need.add(prop.tool_name)
        for call in turn.calls or []:
            need.add(call.tool if not isinstance(call, str) else call.split("(", 1)[0].strip())
        need.update(turn.must_not_call)  # the tempting side-effecting tools stay: they are the point of the turn
    return need


def _has_missing_function(sol: Solution) -> bool:
    return any(task.outcome == "missing_function" or task.match is None for t in sol.turns for task in t.tasks or [])


_NEAR_MISS = [
    ("_remote", " Works on remote hosts only, not locally."),
    ("_preview", " Only previews the effect; nothing is changed."),
    ("_legacy", " Deprecated legacy endpoint for archived accounts."),
    ("_batch", " Applies to a whole batch given as a list of ids."),
]


def near_miss(spec: ToolSpec, rng: random.Random, taken: set[str]) -> ToolSpec | None:
    suffix, note = rng.choice(_NEAR_MISS)
    name = spec.name + suffix
    if name in taken:
        return None
    return ToolSpec(
        name=name,
        description=spec.description.rstrip(".") + "." + note,
        parameters=json.loads(json.dumps(spec.parameters)),
        side_effect=spec.side_effect,
        source="near_miss",
    )


def vary_registry(
    sol: Solution, rng: random.Random, *, drop_p: float = 0.3, max_near_miss: int = 2, max_distractors: int = 4
) -> tuple[Solution, list[str]]:
    """A registry subset (always keeping the tools the scenario uses) plus near-miss and cross-domain tools."""
    ops = []
    domains = sol.registry.domains or sol.domains
    names = [n for d in domains for n in load_domain(d).tools]
    if sol.registry.include is not None:
        names = list(sol.registry.include)
    names = [n for n in names if n not in sol.registry.exclude]
    need = _needed_tools(sol)
    alts = {a for d in domains for n, t in load_domain(d).tools.items() if n in need for a in t.spec.alternatives}
    keep = [n for n in names if n in need or n in alts or rng.random() >= drop_p]
    extra = list(sol.registry.extra)
    if len(keep) < len(names):
        ops.append("registry_subset")
    # A solution with a task no tool can do must not gain a tool that could do it.
    if not _has_missing_function(sol):
        taken = set(names) | {e.name for e in extra}
        specs = {n: t.spec for d in domains for n, t in load_domain(d).tools.items()}
        used = sorted(need & set(specs))
        for _ in range(rng.randint(0, max_near_miss)):
            if not used:
                break
            nm = near_miss(specs[rng.choice(used)], rng, taken)
            if nm is not None:
                extra.append(nm)
                taken.add(nm.name)
                ops.append("near_miss")
        others = [d for d in available() if d not in sol.domains]
        if others and max_distractors and rng.random() < 0.6:
            od = rng.choice(others)
            pool = sorted(load_domain(od).tools)
            for n in rng.sample(pool, min(len(pool), rng.randint(1, max_distractors))):
                if n not in taken:
                    extra.append(load_domain(od).tools[n].spec.model_copy(update={"source": "distractor"}))
                    taken.add(n)
            ops.append("cross_domain")
    reg = RegistryRef(domains=sol.registry.domains, include=keep, exclude=[], extra=extra)
    return sol.model_copy(update={"registry": reg}), ops


_CONFLICT_PREFIXES = ["new_", "requested_", "other_", "previous_"]


def context_conflicts(sol: Solution, rng: random.Random, param_names: set[str]) -> tuple[Solution, bool]:
    """Add look-alike keys to the turn context next to values the kernel must take from S (paper E.5).

    Lookup is by exact key, so the kernel's decisions do not change; the
    primitives see a tempting but wrong value in the context.
    """
    changed = False
    turns = []
    for turn in sol.turns:
        ctx = dict(turn.context)
        for task in turn.tasks or []:
            for pname, binding in task.bindings.items():
                if binding.source not in ("scratchpad", "fill") or binding.value is None or rng.random() < 0.5:
                    continue
                key = rng.choice(_CONFLICT_PREFIXES) + pname
                if key in param_names or key in ctx:
                    continue
                ctx[key] = _perturb(binding.value, rng)
                changed = True
        turns.append(turn.model_copy(update={"context": ctx}) if ctx != turn.context else turn)
    return sol.model_copy(update={"turns": turns}), changed


def _perturb(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value + rng.randint(1, 9)
    if isinstance(value, float):
        return round(value * 1.5 + 1, 2)
    if isinstance(value, str):
        return value + "-" + rng.choice(["B", "2", "X", "alt"])
    if isinstance(value, list):
        return [_perturb(x, rng) for x in value]
    if isinstance(value, dict):
        return {k: _perturb(x, rng) for k, x in value.items()}
    return value


def make_variant(sol: Solution, rng: random.Random, cfg: Any) -> Variant:
    """Apply the configured variations (each with its probability) to one solution."""
    ops: list[str] = []
    values: dict[str, Any] = {}
    varied = sol
    if cfg.entity and sol.slots:
        values = substitute_entities(varied, rng)
        if any(values[k] != sol.slots[k].value for k in values):
            ops.append("entity")
    if cfg.paraphrase and rng.random() < 0.7:
        varied = choose_paraphrases(varied, rng)
        ops.append("paraphrase")
    renamed = False
    if cfg.rename_ids and rng.random() < 0.5:
        varied = rename_task_ids(varied, rng)
        ops.append("rename_ids")
        renamed = True
    permuted = False
    if cfg.permute and rng.random() < 0.3:
        varied, permuted = permute_independent(varied, rng)
        if permuted:
            ops.append("permute")
    if cfg.registry and rng.random() < 0.7:
        varied, rops = vary_registry(varied, rng, max_distractors=cfg.max_distractors if cfg.cross_domain else 0)
        ops += rops
    if cfg.context_conflicts and rng.random() < 0.4:
        params = {p for d in sol.domains for t in load_domain(d).tools.values() for p in t.spec.param_names}
        varied, changed = context_conflicts(varied, rng, params)
        if changed:
            ops.append("context_conflict")
    return Variant(varied, values, ops, permuted, renamed)
