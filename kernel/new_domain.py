"""``forethought new-domain NAME --from SOURCE [--dir DIR]``: a domain folder of your own, from a registry file or
an MCP server.

``SOURCE`` is an OpenAI ``tools`` file, an MCP ``tools/list`` reply or BFCL function docs (the importers of
``forethought registry check``), or a running MCP server, ``mcp:<command line>`` (stdio) or ``mcp:<url>`` (streamable
HTTP) as ``forethought agent`` takes it, whose ``tools/list`` is read once. With an annotations sidecar if given, it
writes ``DIR/NAME/``:

- ``tools.py``: one ``@DOMAIN.tool`` function per tool, typed from its JSON schema, side effect, prerequisites and
  writes as imported (an OpenAI tool is side-effecting unless annotated otherwise); each body logs the call in the
  state and returns ``{"ok": true}``, marked TODO: replace it with the tool's behaviour on the state;
- ``state.py``: the domain's pydantic state (a log of calls to begin with), structure only, and ``data.json``: the
  state its tools start from (no calls yet), read and checked when the domain loads;
- ``slot_values.json``: the values your solutions' slots vary over (empty: generate warns until you fill it);
- ``annotations.yaml``: the sidecar (kernel/registry/annotations.py) saying per tool what tools.py declares (side
  effect, prerequisites, writes): what ``forethought agent tools=mcp:... annotations=...`` needs to run the trained
  bundle on the real tools (the annotations file given, copied as it is, when there is one);
- ``solutions/NAME-example.json``: a one-turn worked solution of the first tool that takes a parameter, which
  ``forethought verify`` accepts as written;
- ``tests/test_NAME.py``: the solutions verify and annotations.yaml agrees with tools.py (``pytest DIR/NAME``);
- ``README.md``: the commands from here to a bundle, with ``FORETHOUGHT_DOMAINS`` set to DIR, and, from an MCP
  server, the command that runs the bundle on that server (its binding: the server command and the annotations).

Every check runs before the first write (a name that is no Python identifier or already a domain, a folder that
exists, a registry that does not import, a server that cannot be started): a refusal writes nothing. The folder is written under a temporary name
and renamed into place, so it is there whole or not at all.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from forethought.errors import UserError

USAGE = (
    "usage: forethought new-domain NAME --from REGISTRY_FILE|mcp:<command>|mcp:<url> [--dir DIR] [--annotations FILE]"
)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _py_type(schema: dict[str, Any]) -> str:
    if isinstance(schema.get("enum"), list) and schema["enum"] and all(isinstance(x, str) for x in schema["enum"]):
        return "Literal[" + ", ".join(json.dumps(x) for x in schema["enum"]) + "]"
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {
        "string": "str",
        "integer": "int",
        "number": "float",
        "boolean": "bool",
        "array": "list",
        "object": "dict",
    }.get(str(kind), "Any")


def _example(name: str, schema: dict[str, Any], i: int) -> Any:
    """A value the example request states for this parameter (grounded: it occurs in the request)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return 101 + i
    if kind == "number":
        return 2.5 + i
    if kind == "boolean":
        return True
    return f"sample-{name.replace('_', '-')}"


def _doc_text(text: str) -> str:
    """Text as a docstring holds it: no escape sequence, no closing quotes."""
    return str(text).strip().replace("\\", "\\\\").replace('"""', "'''")


def _stub_result(spec: Any) -> dict[str, Any]:
    """What a TODO body returns: ``{"ok": True}`` and a placeholder at each result path the tool's writes read
    (``writes={"session": "result.token"}``: ``"token": "TODO-token"``), so a declared write puts a value in S and a
    worked solution that relies on it verifies before the body is written."""
    out: dict[str, Any] = {"ok": True}
    for template in spec.writes.values():
        for path in re.findall(r"(?<![\w.])result((?:\.\w+)+)", template):
            parts = path.strip(".").split(".")
            node = out
            for part in parts[:-1]:
                node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else node
            node.setdefault(parts[-1], f"TODO-{parts[-1]}")
    return out


def _tool_source(spec: Any) -> str:
    props: dict[str, Any] = spec.parameters.get("properties", {}) or {}
    required = list(spec.parameters.get("required", []) or [])
    args = []
    for param, sch in props.items():
        annotation = _py_type(sch if isinstance(sch, dict) else {})
        args.append(f"{param}: {annotation}" if param in required else f"{param}: {annotation} | None = None")
    doc_args = "".join(
        f"\n        {p}: {_doc_text(sch.get('description') or p)}" for p, sch in props.items() if isinstance(sch, dict)
    )
    options = [f"side_effect={spec.side_effect!r}"]
    if spec.prerequisites:
        options.append("prerequisites=[" + ", ".join(_prerequisite_source(p) for p in spec.prerequisites) + "]")
    if spec.writes:
        options.append(f"writes={dict(spec.writes)!r}")
    if spec.alternatives:
        options.append(f"alternatives={list(spec.alternatives)!r}")
    if spec.secret:
        options.append(f"secret={tuple(spec.secret)!r}")
    description = _doc_text(spec.description or spec.name)
    signature = ", ".join(["state: State", *args])
    call = "{" + ", ".join(f"{json.dumps(p)}: {p}" for p in props) + "}"
    return f'''

@DOMAIN.tool({", ".join(options)})
def {spec.name}({signature}) -> dict:
    """{description}{chr(10) + chr(10) + "    Args:" + doc_args if doc_args else ""}
    """
    # TODO: the tool's behaviour on the state (raise ToolError("...") for a failure the caller should see).
    state.calls.append({{"tool": "{spec.name}", "arguments": {call}}})
    return {_stub_result(spec)!r}
'''


def _plain(prerequisite: Any) -> bool:
    """A prerequisite that is just its key: present and truthy, about no entity."""
    from .registry.model import Sat

    return prerequisite.sat == Sat() and prerequisite.entity is None and not prerequisite.description


def _prerequisite_source(prerequisite: Any) -> str:
    if _plain(prerequisite):
        return repr(prerequisite.key)
    fields = [f"key={prerequisite.key!r}", f"sat=Sat(op={prerequisite.sat.op!r}, value={prerequisite.sat.value!r})"]
    if prerequisite.entity is not None:
        fields.append(f"entity={prerequisite.entity!r}")
    if prerequisite.description:
        fields.append(f"description={prerequisite.description!r}")
    return f"Prerequisite({', '.join(fields)})"


def _annotations_yaml(source: str, specs: list[Any]) -> str:
    """The sidecar of what each tool declares (the knowledge a tools/list or an OpenAI file cannot carry)."""
    import yaml

    tools: dict[str, Any] = {}
    for spec in specs:
        entry: dict[str, Any] = {"side_effect": spec.side_effect}
        if spec.prerequisites:
            entry["prerequisites"] = [
                p.key if _plain(p) else p.model_dump(mode="json", exclude_defaults=True) for p in spec.prerequisites
            ]
        if spec.writes:
            entry["writes"] = dict(spec.writes)
        if spec.alternatives:
            entry["alternatives"] = list(spec.alternatives)
        if spec.secret:
            entry["secret"] = list(spec.secret)
        tools[spec.name] = entry
    head = (
        f"# The tools of {source}:\n"
        "# what they cannot say in their schemas (docs/kernel.md, 'Your own tools'), as tools.py\n"
        "# declares it: side effects, prerequisites (keys that must be in the scratchpad S), writes (what a call puts\n"
        "# in S), alternatives, secret arguments; add `expect: {result.path: value}` for a check after a call.\n"
        "# forethought agent tools=... annotations=<this file> reads it; keep it in step with tools.py (the test in\n"
        "# tests/ checks that both say the same).\n"
    )
    return head + yaml.safe_dump({"format_version": 1, "tools": tools}, sort_keys=False, width=120)


def _test_source(name: str) -> str:
    return f'''"""Checks of the {name} domain, written by forethought new-domain: its worked solutions verify, and annotations.yaml
says what tools.py declares. Run: pytest <this domain's folder> (FORETHOUGHT_DOMAINS gets the folder above it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1]


def _forethought(*args: str) -> subprocess.CompletedProcess:
    """A fresh process, as your shell runs forethought, with this domain's parent folder on FORETHOUGHT_DOMAINS."""
    dirs = [d for d in os.environ.get("FORETHOUGHT_DOMAINS", "").split(os.pathsep) if d.strip()]
    if not any(Path(d).expanduser().resolve() == FOLDER.parent for d in dirs):
        dirs.append(str(FOLDER.parent))
    env = {{**os.environ, "FORETHOUGHT_DOMAINS": os.pathsep.join(dirs)}}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True)


def test_the_worked_solutions_verify():
    done = _forethought("-m", "forethought.cli", "verify", str(FOLDER / "solutions"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_annotations_say_what_the_tools_declare():
    code = (
        "import sys\\n"
        "from forethought.kernel.domains import load_domain\\n"
        "from forethought.kernel.registry.annotations import annotate\\n"
        "declared = load_domain(sys.argv[1]).registry()\\n"
        "annotated = annotate(declared, sys.argv[2])\\n"
        "keys = ('side_effect', 'prerequisites', 'writes', 'alternatives', 'secret')\\n"
        "for t in declared:\\n"
        "    a = annotated.get(t.name)\\n"
        "    for k in keys:\\n"
        "        if getattr(t, k) != getattr(a, k):\\n"
        "            print(f'{{t.name}}.{{k}}: tools.py {{getattr(t, k)!r}}, annotations.yaml {{getattr(a, k)!r}}')\\n"
    )
    done = _forethought("-c", code, FOLDER.name, str(FOLDER / "annotations.yaml"))
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
'''


def _registry_from(source: str, annotations: str | None) -> Any:
    """The tools of a registry file, or of an MCP server (``mcp:<command>``/``mcp:<url>``, started, listed, stopped)."""
    from .registry.importers import load_registry

    if source.startswith("mcp:"):
        from .agent_command import load_tools

        tools = load_tools(source, annotations, timeout_s=60.0)  # a server that cannot start: a located UserError
        try:
            return tools.registry()
        finally:
            tools.close()
    # A file that cannot be imported raises a RegistryError, a UserError located at the file (and tool, field) already.
    registry = load_registry(source)
    if annotations:
        from .registry.annotations import annotate

        registry = annotate(registry, annotations)
    return registry


def _solution(name: str, specs: list[Any]) -> dict[str, Any]:
    chosen = next((s for s in specs if s.parameters.get("required")), specs[0])
    props = chosen.parameters.get("properties", {}) or {}
    required = list(chosen.parameters.get("required", []) or [])
    values = {p: _example(p, props.get(p, {}), i) for i, p in enumerate(required)}
    said = " and ".join(
        f"{p.replace('_', ' ')} {json.dumps(v) if not isinstance(v, str) else v}" for p, v in values.items()
    )
    user = f"Please {chosen.name.replace('_', ' ')}" + (f" with {said}" if said else "")
    return {
        "format_version": 3,
        "id": f"{name}-example",
        "title": user,
        "description": f"One task: {chosen.name} with the values the request states (written by new-domain).",
        "domains": [name],
        "tags": [],
        "initial_state": {},
        "turns": [
            {
                "user": user,
                "tasks": [
                    {
                        "id": "t1",
                        "text": user,
                        "tool": chosen.name,
                        "parameters": values,
                        "bindings": {p: {"source": "request", "value": v} for p, v in values.items()},
                    }
                ],
                "order": ["t1"],
                "calls": [{"tool": chosen.name, "args": values}],
            }
        ],
    }


def _parse(args: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    positional: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in ("-h", "--help"):
            opts["help"] = "1"
        elif arg.startswith("--") and "=" in arg:
            option, option_value = arg[2:].split("=", 1)
            opts[option] = option_value
        elif arg.startswith("--"):
            value = next(it, None)
            if value is None or value.startswith("--"):
                raise UserError(f"{arg} needs a value ({USAGE})", arg)
            opts[arg[2:]] = value
        elif "=" in arg:
            option, option_value = arg.split("=", 1)
            opts[option] = option_value
        else:
            positional.append(arg)
    unknown = sorted(set(opts) - {"from", "dir", "annotations", "help"})
    if unknown:
        raise UserError(f"unknown option(s) {unknown} ({USAGE})", unknown[0])
    if "help" in opts:
        return opts
    if len(positional) != 1 or "from" not in opts:
        raise UserError(USAGE, "new-domain")
    opts["name"] = positional[0]
    return opts


def write_domain(name: str, source: str, target_dir: str | Path = ".", annotations: str | None = None) -> Path:
    """Write ``target_dir/name/`` from the registry file ``source``; every check before the first write."""
    from .domains import available

    if not _NAME.match(name) or keyword.iskeyword(name):
        raise UserError(f"domain name {name!r}: lower-case letters, digits and _ , starting with a letter", "NAME")
    if name in available():
        raise UserError(f"domain {name!r} exists already (available: {', '.join(available())})", "NAME")
    parent = Path(target_dir)
    if parent.exists() and not parent.is_dir():
        raise UserError(f"{parent} is not a folder", "--dir")
    folder = parent / name
    if folder.exists():
        raise UserError(f"{folder} exists: choose another NAME or --dir (nothing was written)", "NAME")
    if annotations is not None:
        from .registry.annotations import load_annotations

        load_annotations(annotations)  # a bad sidecar is refused before a server is started
    specs = list(_registry_from(source, annotations))
    if not specs:
        raise UserError("the registry holds no tools", source)
    bad = [t.name for t in specs if not t.name.isidentifier() or keyword.iskeyword(t.name)]
    if bad:
        raise UserError(f"tool names {bad} are not Python identifiers: a domain tool is a function", source)
    bad_params = [
        f"{t.name}.{p}"
        for t in specs
        for p in (t.parameters.get("properties") or {})
        if not p.isidentifier() or keyword.iskeyword(p) or p == "state"
    ]
    if bad_params:
        raise UserError(
            f"parameters {bad_params} cannot be Python parameters (a domain tool is a function of the state and its "
            "parameters): rename them, or run these tools as they are with forethought agent tools=mcp:... / "
            "an annotations file",
            source,
        )

    mcp = source.startswith("mcp:")
    origin = source if mcp else Path(source).name
    said = origin.replace("\\", "/").replace('"', "'")  # in a docstring: no escape, no closing quotes
    tools_py = (
        f'"""The {name} domain: tools imported from {said} by forethought new-domain (bodies TODO)."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Any, Literal  # noqa: F401 - parameter types\n\n"
        "from forethought.kernel.domains.base import Domain, ToolError  # noqa: F401 - ToolError: a failed call\n"
        "from forethought.kernel.registry.model import Prerequisite, Sat  # noqa: F401 - prerequisites with a predicate\n\n"
        "from .state import State\n\n"
        f"DOMAIN = Domain({name!r}, State, description={'Tools imported from ' + origin + '.'!r})\n"
        + "".join(_tool_source(s) for s in specs)
    )
    state_py = (
        f'"""The {name} domain\'s state: what its tools read and change (replace the call log with your model).\n\n'
        "The model holds structure only: the state the tools start from, your reference data, is data.json beside this\n"
        "file, read and checked when the domain loads. A scenario's initial_state is laid over it (a field given replaces\n"
        'the file\'s; a table named in merged_tables is merged entry by entry)."""\n\n'
        "from __future__ import annotations\n\nfrom typing import Any\n\n"
        "from forethought.kernel.domains.base import ReferenceData\n\n\n"
        "class State(ReferenceData):\n"
        "    calls: list[dict[str, Any]]\n"
    )
    readme = f"""# Domain `{name}`

Written by `forethought new-domain {name} --from {source}`. Make it yours: the tools' bodies in `tools.py` (TODO),
the state in `state.py` and the data its tools start from in `data.json`, the slot values in `slot_values.json`,
and worked solutions in `solutions/`.

```bash
export FORETHOUGHT_DOMAINS={parent.resolve()}
pytest {folder.resolve()}   # the solutions verify, annotations.yaml agrees with tools.py
forethought verify {folder.resolve() / "solutions"}
```

A few solutions are too few to train on (`generate` refuses a corpus too small for a validation split): add yours to
a corpus (`$CORPUS`: the project's `data_gen/solutions`, or your own), then:

```bash
forethought generate "data.solutions=[$CORPUS,{folder.resolve() / "solutions"}]" data.output_dir=runs/{name}/data
forethought train dataset_dir=runs/{name}/data output_dir=runs/{name}/train
forethought validate train_dir=runs/{name}/train dataset_dir=runs/{name}/data output_dir=runs/{name}/validate
forethought package train_dir=runs/{name}/train validate_dir=runs/{name}/validate dataset_dir=runs/{name}/data output_dir=runs/{name}/bundle
forethought agent tools=domain:{name} backend=hf backend.bundle=runs/{name}/bundle   # on the simulated tools
```
{_binding(source, folder) if mcp else ""}
docs/own_tools.md has the whole path, from a registry file or an MCP server to a validated bundle running on your
tools.
"""
    made = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)  # the last check passed: --dir may be a folder still to make
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        (tmp / "solutions").mkdir()
        (tmp / "__init__.py").write_text(
            f'"""The {name} domain."""\n\nfrom .tools import DOMAIN\n\n__all__ = ["DOMAIN"]\n'
        )
        (tmp / "state.py").write_text(state_py)
        (tmp / "data.json").write_text(json.dumps({"calls": []}) + "\n")
        (tmp / "tools.py").write_text(tools_py)
        (tmp / "slot_values.json").write_text("{}\n")
        (tmp / "annotations.yaml").write_text(
            Path(annotations).read_text(encoding="utf-8") if annotations else _annotations_yaml(origin, specs)
        )
        (tmp / "tests").mkdir()
        (tmp / "tests" / f"test_{name}.py").write_text(_test_source(name))
        (tmp / "README.md").write_text(readme)
        (tmp / "solutions" / f"{name}-example.json").write_text(json.dumps(_solution(name, specs), indent=2) + "\n")
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if made:
            shutil.rmtree(parent, ignore_errors=True)
        raise
    return folder


def _binding(source: str, folder: Path) -> str:
    """The README's section on running the trained bundle on the server itself (the tools' MCP binding)."""
    return f"""
## On the server itself

The domain's tools simulate the server's for training data; a trained bundle runs on the server through its binding,
the server command and `annotations.yaml` (exit 1 if the server dies: nothing is committed for the call it did not
answer):

```bash
forethought agent tools={shlex.quote(source)} annotations={folder.resolve() / "annotations.yaml"} backend=hf backend.bundle=runs/{folder.name}/bundle
```
"""


def cli(args: list[str]) -> int:
    opts = _parse(args)
    if "help" in opts:
        print(USAGE + "\n\n" + (__doc__ or "").split("\n\n", 1)[1].strip())
        return 0
    folder = write_domain(opts["name"], opts["from"], opts.get("dir", "."), opts.get("annotations"))
    print(
        f"wrote {folder}/ (tools.py, state.py, data.json, slot_values.json, annotations.yaml, "
        f"solutions/{opts['name']}-example.json, tests/test_{opts['name']}.py, README.md)"
    )
    print(f"next: export FORETHOUGHT_DOMAINS={folder.parent.resolve()} && forethought verify {folder / 'solutions'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
