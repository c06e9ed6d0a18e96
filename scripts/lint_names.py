"""Names in words (issue 26): report every single-letter name the code binds.

    python scripts/lint_names.py PATH...      # files or folders; exit 1 if any name is reported

Ruff has no rule for this. A binding is an assignment target (``=``, ``+=``, annotated, unpacked), a
``for`` target, ``with ... as x``, ``except ... as x``, a walrus target, a function's parameter, a
function or class name, an import alias and a ``match`` capture. Each one-letter binding is reported as
``path:line:col: single-letter name 'x'``.

Allowed:

- ``_``, the name for a value that is thrown away;
- the variables of comprehensions and generator expressions, and lambda parameters: their scope is one
  expression, the value they stand for is written beside them;
- ``i``, ``j``, ``k``: integer indices (``for i in range(n)``, ``for i, row in enumerate(rows)``), the
  mathematical convention every reader knows;
- ``n``: a count (``n = len(rows)``), the same convention;
- a type variable, ``T = TypeVar("T")``: the typing convention;
- a line carrying the comment ``# names: math`` (a reason may follow), for a formula whose letters
  are the maths' own (``a * x + b``) or a letter that is an outside API's name (LoRA's ``r``); use it
  sparingly, a word is nearly always better.

``make lint`` checks the whole repository (``lint_names.py .``). A path listed in ``EXCLUDED`` below is
skipped when a folder around it is walked; none is listed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ALLOWED = frozenset({"_", "i", "j", "k", "n"})
OPT_OUT = "# names: math"

# Not checked (paths relative to the repository root): none, every folder's names are words (issue 26).
EXCLUDED: tuple[str, ...] = ()
# Never walked: environments, caches and run outputs.
SKIPPED_DIRS = frozenset({".venv", ".git", "__pycache__", "runs", "outputs", "multirun", "wandb", "build"})

ROOT = Path(__file__).resolve().parent.parent


def _target_names(target: ast.expr) -> Iterator[ast.Name]:
    """The names an assignment target binds (``a``, ``a, (b, *c)``); attributes and subscripts bind none."""
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _target_names(element)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _is_type_variable(value: ast.expr) -> bool:
    """``TypeVar("T", ...)`` (or ``typing.TypeVar``): its one letter is the typing convention."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "TypeVar"


class _Bindings(ast.NodeVisitor):
    """Collects ``(line, col, name)`` for each binding outside comprehensions and lambdas."""

    def __init__(self) -> None:
        self.found: list[tuple[int, int, str]] = []

    def _add(self, node: ast.AST, name: str | None) -> None:
        if name is not None:
            self.found.append((node.lineno, node.col_offset + 1, name))

    def _add_targets(self, target: ast.expr) -> None:
        for name in _target_names(target):
            self._add(name, name.id)

    # assignments, walrus, for loops
    def visit_Assign(self, node: ast.Assign) -> None:
        if not _is_type_variable(node.value):
            for target in node.targets:
                self._add_targets(target)
        self.generic_visit(node)

    def _visit_target(self, node: ast.AnnAssign | ast.AugAssign | ast.NamedExpr | ast.For | ast.AsyncFor) -> None:
        self._add_targets(node.target)
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign = visit_NamedExpr = visit_For = visit_AsyncFor = _visit_target

    # context managers, handlers
    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._add_targets(node.optional_vars)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name is not None:
            self._add(node, node.name)
        self.generic_visit(node)

    # definitions
    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._add(node, node.name)
        arguments = node.args
        for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            self._add(argument, argument.arg)
        for argument in (arguments.vararg, arguments.kwarg):
            if argument is not None:
                self._add(argument, argument.arg)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._add(node, node.name)
        self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> None:
        if node.asname is not None:
            self._add(node, node.asname)

    # match captures
    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._add(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._add(node, node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self._add(node, node.rest)
        self.generic_visit(node)

    # allowed scopes: their variables are not reported, a walrus or lambda inside them still is checked
    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)
        for default in (*node.args.defaults, *node.args.kw_defaults):
            if default is not None:
                self.visit(default)

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        for generator in node.generators:
            self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension


def check_source(source: str, path: str = "<string>") -> list[str]:
    """The reports for one file's text: ``path:line:col: single-letter name 'x'``, in line order."""
    tree = ast.parse(source, filename=path)
    visitor = _Bindings()
    visitor.visit(tree)
    lines = source.splitlines()
    reports = []
    for line, col, name in sorted(visitor.found):
        if len(name) != 1 or name in ALLOWED:
            continue
        if line <= len(lines) and OPT_OUT in lines[line - 1]:
            continue
        reports.append(f"{path}:{line}:{col}: single-letter name {name!r}")
    return reports


def _excluded(path: Path) -> bool:
    try:
        relative = path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return False
    return any(relative == entry or relative.startswith(entry + "/") for entry in EXCLUDED)


def python_files(paths: list[str]) -> Iterator[Path]:
    """The ``.py`` files under ``paths``; a folder is walked without ``SKIPPED_DIRS`` and without the
    ``EXCLUDED`` paths inside it (one named itself, ``lint_names.py kernel``, is checked)."""
    for given in map(Path, paths):
        if given.is_file():
            yield given
            continue
        named_excluded = _excluded(given)
        for path in sorted(given.rglob("*.py")):
            parts = path.relative_to(given).parts
            if any(part in SKIPPED_DIRS for part in parts) or (_excluded(path) and not named_excluded):
                continue
            yield path


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    missing = [path for path in paths if not Path(path).exists()]
    if missing:
        print(f"lint_names: no such path: {', '.join(missing)}", file=sys.stderr)
        return 2
    reports = []
    for path in python_files(paths):
        reports.extend(check_source(path.read_text(encoding="utf-8"), str(path)))
    for report in reports:
        print(report)
    if reports:
        print(f"{len(reports)} single-letter names (scripts/lint_names.py says what is allowed)", file=sys.stderr)
    return 1 if reports else 0


if __name__ == "__main__":
    sys.exit(main())
