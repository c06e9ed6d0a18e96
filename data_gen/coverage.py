"""What the registry allows that the train split never shows: the decisions a small model cannot learn.

A primitive learns a decision from the train rows that hold it, and the measurements of docs/training.md say the
small models rarely carry one to a case they never saw: check_prerequisites' validation errors are concentrated on
the (prerequisite, outcome) pairs no train solution holds. This module lists, from the registry of the domains the
corpus loads, the prerequisite decisions its tools declare and the tools it registers, and which of them the train
rows hold, by how many solutions: what to write the next worked solutions about (data_gen/solutions/README.md).
Only train rows are read, so the list is a property of the training data, never of the held-out solutions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from forethought.kernel.domains import load_domain
from forethought.kernel.registry.model import fact_of

OUTCOMES = ("absent", "not_met")  # the two outcomes that ask check_prerequisites for a task


def registry_coverage(domains: Iterable[str], train_rows: Mapping[str, list[Any]]) -> dict[str, Any]:
    """``train_rows``: per primitive, examples with ``solution_id``, ``input`` and ``target`` (generate's Example).

    Returns, per kind of decision, how many the registry declares, how many the train rows hold, and the ones held
    by no train solution or by one only (``domain: key outcome`` / ``domain: tool``), sorted."""
    tool_domain: dict[str, str] = {}
    declared: set[tuple[str, str, str]] = set()
    per_tool: set[tuple[str, str, str, str]] = set()  # the same, asked about each tool that declares it
    for domain in sorted(set(domains)):
        for name, tool in load_domain(domain).tools.items():
            tool_domain.setdefault(name, domain)
            for prerequisite in tool.spec.prerequisites:
                declared |= {(domain, fact_of(prerequisite.key), outcome) for outcome in OUTCOMES}
                per_tool |= {(domain, name, fact_of(prerequisite.key), outcome) for outcome in OUTCOMES}

    holders: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for row in train_rows.get("check_prerequisites", []):
        domain = tool_domain.get(row.input["task"]["tool_name"])
        if domain is not None:
            holders[(domain, fact_of(row.input["key"]), row.input["outcome"])].add(row.solution_id)
            tool = row.input["task"]["tool_name"]
            holders[(domain, tool, fact_of(row.input["key"]), row.input["outcome"])].add(row.solution_id)
    for row in train_rows.get("match_func", []):
        name = (row.target or {}).get("tool_name")
        if name in tool_domain:
            holders[(tool_domain[name], name)].add(row.solution_id)

    def summary(kinds: list[tuple[str, ...]], label: Any) -> dict[str, Any]:
        return {
            "declared": len(kinds),
            "held": sum(bool(holders[k]) for k in kinds),
            "not_held": [label(k) for k in kinds if not holders[k]],
            "held_by_one_solution": [label(k) for k in kinds if len(holders[k]) == 1],
        }

    return {
        "prerequisite_decisions": summary(sorted(declared), lambda k: f"{k[0]}: {k[1]} {k[2]}"),
        "prerequisite_decisions_per_tool": summary(sorted(per_tool), lambda k: f"{k[0]}: {k[1]} {k[2]} {k[3]}"),
        "tools_matched": summary(sorted((d, n) for n, d in tool_domain.items()), lambda k: f"{k[0]}: {k[1]}"),
    }


def coverage_lines(coverage: Mapping[str, Any]) -> list[str]:
    """The dataset card's paragraph on it."""
    prerequisites, tools = coverage["prerequisite_decisions"], coverage["tools_matched"]
    per_tool = coverage["prerequisite_decisions_per_tool"]

    def listed(items: list[str]) -> str:
        return ", ".join(f"`{i}`" for i in items) if items else "none"

    return [
        "Registry coverage of the train split (data_gen/coverage.py; the decisions a small model can only learn from "
        "the solutions that hold them): "
        f"check_prerequisites holds {prerequisites['held']} of the {prerequisites['declared']} (prerequisite, "
        f"outcome) decisions the registry's tools declare; match_func selects {tools['held']} of its "
        f"{tools['declared']} tools.",
        "",
        f"- decisions no train solution holds: {listed(prerequisites['not_held'])}",
        f"- decisions one train solution holds: {listed(prerequisites['held_by_one_solution'])}",
        f"- the same decisions asked about each tool that declares them: {per_tool['held']} of "
        f"{per_tool['declared']} held; not held: {listed(per_tool['not_held'])}",
        f"- tools no match_func train row selects: {listed(tools['not_held'])}",
        f"- tools one train solution's match_func rows select: {listed(tools['held_by_one_solution'])}",
        "",
    ]
