"""docs/kernel.md's "Algorithm 2, line by line" table must name code that exists, cover every line of the
algorithm, and the kernel's symbolic steps must be the functions of the same name that it cites."""

from __future__ import annotations

import re
from pathlib import Path

from forethought.kernel import condition_steps, plan_steps, records, task_steps
from forethought.kernel.program import Kernel
from forethought.primitives import Step

DOC = Path(__file__).resolve().parents[1] / "docs" / "kernel.md"
MODULES = {"P": plan_steps, "T": task_steps, "R": records, "C": condition_steps}
# Lines of Algorithm 2 that do something (the others are "end if" / "end for").
ALGORITHM_LINES = set(range(1, 41)) - {18, 22, 23, 28, 36, 38}
# Steps whose function has another name: one function serves both, or the step only passes its input on.
SHARED = {"prepare_retrieval": "prepare_prerequisite_question", "prepare_remediation": "prepare_prerequisite_question"}
IDENTITY = {"keep_prerequisite", "keep_task"}


def _table_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Algorithm 2, line by line", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| line", "| ---"))]


def test_the_line_by_line_table_names_existing_code():
    cited = [ref for row in _table_rows() for ref in re.findall(r"`([PTRC]):([\w.]+)`", row)]
    assert len(cited) >= 30, cited
    missing = []
    for module, dotted in cited:
        obj = MODULES[module]
        for part in dotted.split("."):
            fields = getattr(obj, "__dataclass_fields__", {})
            if part in fields:  # a TurnState field has no class attribute when it has a default factory
                obj = fields[part]
                continue
            if not hasattr(obj, part):
                missing.append(f"{module}:{dotted}")
                break
            obj = getattr(obj, part)
    assert missing == []


def test_the_line_by_line_table_covers_every_line_of_algorithm_2():
    covered: set[int] = set()
    for row in _table_rows():
        cell = row.split("|")[1].strip()
        if cell == "—":
            continue
        first, _, last = cell.partition("–")
        covered.update(range(int(first), int(last or first) + 1))
    assert ALGORITHM_LINES - covered == set()


def test_each_symbolic_step_is_the_function_named_as_the_step():
    program = Kernel().program
    steps = [n for n in program.root.walk() if isinstance(n, Step) and n.primitive.kind == "symbolic"]
    assert len(steps) >= 20
    wrong = []
    for step in steps:
        name = step.primitive.name
        if name in IDENTITY:
            continue
        expected = SHARED.get(name, name)
        fn = step.primitive.fn
        if fn.__name__ != expected or fn.__module__ not in (
            plan_steps.__name__,
            task_steps.__name__,
            condition_steps.__name__,
        ):
            wrong.append(f"{name}: {fn.__module__}.{fn.__name__}")
    assert wrong == []
    text = DOC.read_text(encoding="utf-8")
    undocumented = sorted({s.label for s in steps if f"{s.label}" not in text})
    assert undocumented == []
