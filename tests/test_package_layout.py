"""One installed package, ``forethought``, whose layers import each other in one direction only.

The repository keeps primitives/, kernel/, data_gen/ and training/ at its top; setup.py installs them as
subpackages of ``forethought``. These tests check what that promises: the distribution owns the single
top-level name ``forethought``; no code imports a bare ``kernel`` or ``training`` (which would work from a
checkout and fail once installed, or pick up a user's own module of that name); and the import graph
between the layers, counting imports inside functions, has no cycle and runs from the top of
:data:`LAYERS` to its bottom.
"""

from __future__ import annotations

import ast
import importlib.metadata
from collections import defaultdict
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parents[1]
# Repository folder -> the package it installs as (setup.py's mapping).
FOLDERS = {
    "forethought": "forethought",
    "primitives": "forethought.primitives",
    "kernel": "forethought.kernel",
    "data_gen": "forethought.data_gen",
    "training": "forethought.training",
}
BARE = ("primitives", "kernel", "data_gen", "training")

# The intended layering, bottom first: a layer may import only the layers below it. config and errors
# are the bottom (errors imports config, never the other way); forethought.bundle (loading a saved base,
# tokenizer, adapters and bundle) sits below the kernel, whose hf backend serves a bundle, and below
# training, which writes and loads them; the commands that run whole stages are the top.
LAYERS: list[set[str]] = [
    {"forethought.config"},
    {"forethought.errors"},
    {"forethought.bounded", "forethought.arguments"},
    {"primitives"},
    {"forethought.bundle"},
    {"kernel"},
    {"data_gen"},
    {"training"},
    {"forethought.bench"},  # benchmark harnesses (BFCL): run the kernel on a benchmark's own environment
    {"forethought.evaluation"},  # forethought evaluate: the kernel end to end on held-out worked solutions
    {"forethought.pipeline", "forethought.cli", "forethought.dsl_demo", "forethought"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Installed module name -> (its file, whether it is a package's __init__)."""
    out = {}
    for folder, pkg in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = (path, path.name == "__init__.py")
    return out


MODULES = _modules()


def unit(module: str) -> str:
    """The layer unit a module belongs to: a subpackage (kernel, training, ...) or a module of forethought/."""
    parts = module.split(".")
    if len(parts) == 1:
        return "forethought"
    return parts[1] if parts[1] in BARE else f"forethought.{parts[1]}"


def imported_modules(module: str, tree: ast.AST, is_package: bool) -> list[tuple[str, int]]:
    """Every forethought module ``module`` imports (top level or inside a function), with its line.

    Relative imports are resolved against the installed name, so ``from ...training import x`` in
    forethought/kernel/backends counts as importing forethought.training.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                # ``from forethought import training`` imports the subpackage, not a name of forethought/__init__
                out.append((f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base, node.lineno))
    return [(m, line) for m, line in out if m == "forethought" or m.startswith("forethought.")]


def layer_edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where (file:line), for every import between two different units."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, (path, is_package) in MODULES.items():
        for target, line in imported_modules(module, ast.parse(path.read_text(encoding="utf-8")), is_package):
            importer, imported = unit(module), unit(target)
            where = f"{path.relative_to(ROOT)}:{line}"
            if importer != imported and where not in edges[(importer, imported)]:
                edges[(importer, imported)].append(where)
    return edges


def find_cycle(edges: dict[tuple[str, str], list[str]]) -> list[str] | None:
    """One cycle of the unit graph as [a, b, ..., a], or None."""
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported in edges:
        graph[importer].add(imported)
    state: dict[str, str] = {}  # "open" while on the DFS stack, "done" after
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = "open"
        stack.append(n)
        for neighbour in sorted(graph[n]):
            if state.get(neighbour) == "open":
                return stack[stack.index(neighbour) :] + [neighbour]
            if neighbour not in state and (found := visit(neighbour)):
                return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def describe(cycle: list[str], edges: dict[tuple[str, str], list[str]]) -> str:
    return (
        " -> ".join(cycle)
        + "\n"
        + "\n".join(f"  {a} -> {b}: {', '.join(edges[(a, b)][:3])}" for a, b in zip(cycle, cycle[1:], strict=False))
    )


# ------------------------------------------------------------------ the distribution
def test_the_installed_distribution_owns_only_the_name_forethought():
    dist = importlib.metadata.distribution("forethought")
    top_level = (dist.read_text("top_level.txt") or "").split()
    assert set(top_level) == {"forethought"}, f"top_level.txt lists {top_level}"
    owned = sorted(
        name for name, dists in importlib.metadata.packages_distributions().items() if "forethought" in dists
    )
    assert owned == ["forethought"], f"the forethought distribution provides the top-level names {owned}"


def test_setup_installs_every_package_under_forethought(monkeypatch):
    """Runs setup.py itself (its setup() call captured): every package it computes is forethought or below it."""
    captured: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: captured.update(kw))
    monkeypatch.chdir(ROOT)  # setup.py's find_packages() calls are relative, as when pip builds it
    exec(
        compile((ROOT / "setup.py").read_text(), str(ROOT / "setup.py"), "exec"),
        {"__name__": "__main__", "__file__": str(ROOT / "setup.py")},
    )
    packages, package_dir = captured["packages"], captured["package_dir"]
    outside = [p for p in [*packages, *package_dir] if p != "forethought" and not p.startswith("forethought.")]
    assert not outside, f"setup.py installs packages outside forethought: {outside}"
    # Every folder holding Python code is a package that setup.py installs (none is left out of the wheel).
    wanted = {m if is_pkg else m.rpartition(".")[0] for m, (_, is_pkg) in MODULES.items()}
    assert wanted <= set(packages), (
        f"folders with Python code that setup.py does not install: {sorted(wanted - set(packages))}"
    )
    assert {"forethought.bundle", "forethought.kernel.backends", "forethought.training"} <= set(packages)


# ------------------------------------------------------------------ no bare imports
def _repo_python_files() -> list[Path]:
    skip = {".venv", ".git", "runs", "outputs", "multirun", "wandb", "__pycache__", "node_modules"}
    return [
        f
        for f in sorted(ROOT.rglob("*.py"))
        if not (set(f.relative_to(ROOT).parts[:-1]) & skip)
        and not any(p.startswith(".") for p in f.relative_to(ROOT).parts)
    ]


def bare_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """Imports of a top-level primitives/kernel/data_gen/training (also by a literal importlib.import_module)."""
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        out += [(node.lineno, n) for n in names if n.split(".")[0] in BARE]
    return out


def test_the_bare_import_scan_finds_each_form():
    src = (
        "import kernel\nfrom training.data import x\nimport importlib\nimportlib.import_module('data_gen.unit')\n"
        "def f():\n    import primitives.io\nimport forethought.kernel\nfrom . import kernel\n"
    )
    assert [n for _, n in bare_imports(ast.parse(src))] == ["kernel", "training.data", "data_gen.unit", "primitives.io"]


def test_no_module_imports_a_bare_kernel_training_data_gen_or_primitives():
    found = [
        f"{f.relative_to(ROOT)}:{line}: {name}"
        for f in _repo_python_files()
        for line, name in bare_imports(ast.parse(f.read_text(encoding="utf-8")))
    ]
    assert not found, (
        "import these as forethought.<name> (the installed package has no top-level kernel, training, ...):\n"
        + "\n".join(found)
    )


# ------------------------------------------------------------------ the import graph
def test_the_cycle_finder_reports_a_cycle_with_its_files():
    edges = {
        ("kernel", "forethought.bundle"): ["kernel/backends/hf.py:18"],
        ("forethought.bundle", "kernel"): ["forethought/bundle/x.py:3"],
        ("training", "kernel"): ["training/a.py:1"],
    }
    cycle = find_cycle(edges)
    assert cycle in (["forethought.bundle", "kernel", "forethought.bundle"], ["kernel", "forethought.bundle", "kernel"])
    assert "forethought/bundle/x.py:3" in describe(cycle, edges) and "kernel/backends/hf.py:18" in describe(
        cycle, edges
    )
    del edges[("forethought.bundle", "kernel")]
    assert find_cycle(edges) is None


def test_relative_imports_resolve_to_the_installed_names():
    tree = ast.parse(
        "from ...training import artifacts\nfrom ..specs import SPECS\nfrom . import hf\nfrom forethought import errors\n"
    )
    got = [m for m, _ in imported_modules("forethought.kernel.backends.factory", tree, False)]
    assert got == [
        "forethought.training.artifacts",
        "forethought.kernel.specs",
        "forethought.kernel.backends.hf",
        "forethought.errors",
    ]


def test_the_import_graph_between_the_layers_has_no_cycle():
    edges = layer_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "the layers import each other in a cycle (imports inside functions count):\n" + describe(
        cycle, edges
    )


def test_every_layer_imports_only_the_layers_below_it():
    edges = layer_edges()
    units = {u for e in edges for u in e} | {unit(m) for m in MODULES}
    unplaced = sorted(units - set(RANK))
    assert not unplaced, f"modules of no layer (add them to LAYERS in {Path(__file__).name}): {unplaced}"
    upward = [f"{a} -> {b}: {', '.join(where[:3])}" for (a, b), where in sorted(edges.items()) if RANK[b] >= RANK[a]]
    assert not upward, (
        "imports that go up or sideways in the layering (bottom first: "
        + " < ".join("/".join(sorted(layer)) for layer in LAYERS)
        + "):\n"
        + "\n".join(upward)
    )
    # The bottom: config imports nothing of forethought; errors imports config only.
    assert not [b for (a, b) in edges if a == "forethought.config"]
    assert {b for (a, b) in edges if a == "forethought.errors"} <= {"forethought.config"}
    # The edge the layering exists for: the kernel's hf backend loads bundles without importing training.
    assert ("kernel", "forethought.bundle") in edges and ("kernel", "training") not in edges


# ------------------------------------------------------------------ modules
def _module_of(name: str) -> str | None:
    """The module ``name`` (a module, or a name imported from one) lives in."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def module_edges() -> dict[tuple[str, str], list[str]]:
    """(importing module, imported module) -> where, for every import of one forethought module by another."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, (path, is_package) in MODULES.items():
        for target, line in imported_modules(module, ast.parse(path.read_text(encoding="utf-8")), is_package):
            imported = _module_of(target)
            if (
                imported is not None and imported != module
            ):  # a package counts as its __init__, which imports what it re-exports
                edges[(module, imported)].append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def private_imports(module: str, tree: ast.AST, is_package: bool) -> list[str]:
    """``from x import _name`` of another module's private name (dunders aside), as 'line: x._name'."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            out += [
                f"{node.lineno}: {base}.{a.name}"
                for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")
            ]
    # ``from forethought.kernel import task_steps`` then ``task_steps._execute(...)``: the same, through the module
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            modules.update(
                {a.asname or a.name: f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES}
            )
        elif isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    out += [
        f"{node.lineno}: {modules[node.value.id]}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in modules
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    return out


def test_the_module_cycle_finder_sees_a_cycle_inside_one_layer():
    edges = {
        ("forethought.kernel.a", "forethought.kernel.b"): ["kernel/a.py:3"],
        ("forethought.kernel.b", "forethought.kernel.a"): ["kernel/b.py:9"],
    }
    assert find_cycle(edges) is not None and "kernel/b.py:9" in describe(find_cycle(edges), edges)
    tree = ast.parse(
        "from .train import _diff, resolved_config\nfrom forethought.x import __version__\n"
        "from forethought.kernel import task_steps\ntask_steps._execute(1)\n"
    )
    assert private_imports("forethought.training.pretrain", tree, False) == [
        "1: forethought.training.train._diff",
        "4: forethought.kernel.task_steps._execute",
    ]


def test_no_two_modules_import_each_other_even_through_others():
    """Not only the layers: inside one (kernel/solution_file -> solution_migration -> runner -> scenario, never back),
    imports inside functions counted."""
    edges = module_edges()
    cycle = find_cycle(edges)
    assert cycle is None, "modules that import each other in a cycle:\n" + describe(cycle, edges)


def test_no_module_imports_another_modules_private_names():
    found = [
        f"{f.relative_to(ROOT)}:{hit}"
        for module, (f, is_package) in MODULES.items()
        for hit in private_imports(module, ast.parse(f.read_text(encoding="utf-8")), is_package)
    ]
    assert not found, (
        "private names imported from another module (make them public, or move them where both can use them):\n"
        + "\n".join(found)
    )
