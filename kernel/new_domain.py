"""``forethought new-domain NAME --from FILE [--dir DIR]``: a domain folder of your own, from a registry file.

Reads the tools of an OpenAI ``tools`` file, an MCP ``tools/list`` reply or BFCL function docs (the importers of
``forethought registry check``, with an annotations sidecar if given) and writes ``DIR/NAME/``:

- ``tools.py``: one ``@DOMAIN.tool`` function per tool, typed from its JSON schema, side effect, prerequisites and
  writes as imported (an OpenAI tool is side-effecting unless annotated otherwise); each body logs the call in the
  state and returns ``{"ok": true}``, marked TODO: replace it with the tool's behaviour on the state;
- ``state.py``: the domain's pydantic state (a log of calls to begin with);
- ``slot_values.json``: the values your solutions' slots vary over (empty: generate warns until you fill it);
- ``solutions/NAME-example.json``: a one-turn worked solution of the first tool that takes a parameter, which
  ``forethought verify`` accepts as written;
- ``README.md``: the commands from here to a bundle, with ``FORETHOUGHT_DOMAINS`` set to DIR.

Every check runs before the first write (a name that is no Python identifier or already a domain, a folder that
exists, a registry that does not import): a refusal writes nothing. The folder is written under a temporary name
and renamed into place, so it is there whole or not at all.
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from forethought.errors import UserError

USAGE = "usage: forethought new-domain NAME --from REGISTRY_FILE [--dir DIR] [--annotations FILE]"
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


def _tool_source(spec: Any) -> str:
    props: dict[str, Any] = spec.parameters.get("properties", {}) or {}
    required = list(spec.parameters.get("required", []) or [])
    args = []
    for p, sch in props.items():
        t = _py_type(sch if isinstance(sch, dict) else {})
        args.append(f"{p}: {t}" if p in required else f"{p}: {t} | None = None")
    doc_args = "".join(
        f"\n        {p}: {(sch.get('description') or p).strip()}" for p, sch in props.items() if isinstance(sch, dict)
    )
    options = [f"side_effect={spec.side_effect!r}"]
    if spec.prerequisites:
        options.append(f"prerequisites={[p.key for p in spec.prerequisites]!r}")
    if spec.writes:
        options.append(f"writes={dict(spec.writes)!r}")
    if spec.secret:
        options.append(f"secret={tuple(spec.secret)!r}")
    description = (spec.description or spec.name).strip().replace('"""', "'''")
    signature = ", ".join(["state: State", *args])
    call = "{" + ", ".join(f"{json.dumps(p)}: {p}" for p in props) + "}"
    return f'''

@DOMAIN.tool({", ".join(options)})
def {spec.name}({signature}) -> dict:
    """{description}{chr(10) + chr(10) + "    Args:" + doc_args if doc_args else ""}
    """
    # TODO: the tool's behaviour on the state (raise ToolError("...") for a failure the caller should see).
    state.calls.append({{"tool": "{spec.name}", "arguments": {call}}})
    return {{"ok": True}}
'''


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
    for a in it:
        if a in ("-h", "--help"):
            opts["help"] = "1"
        elif a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            opts[k] = v
        elif a.startswith("--"):
            value = next(it, None)
            if value is None or value.startswith("--"):
                raise UserError(f"{a} needs a value ({USAGE})", a)
            opts[a[2:]] = value
        elif "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        else:
            positional.append(a)
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
    from .registry.importers import RegistryError, load_registry

    if not _NAME.match(name) or keyword.iskeyword(name):
        raise UserError(f"domain name {name!r}: lower-case letters, digits and _ , starting with a letter", "NAME")
    if name in available():
        raise UserError(f"domain {name!r} exists already (available: {', '.join(available())})", "NAME")
    parent = Path(target_dir)
    if not parent.is_dir():
        raise UserError(f"{parent} is not a folder", "--dir")
    folder = parent / name
    if folder.exists():
        raise UserError(f"{folder} exists: choose another NAME or --dir (nothing was written)", "NAME")
    try:
        registry = load_registry(source)
        if annotations:
            from .registry.annotations import annotate

            registry = annotate(registry, annotations)
    except RegistryError as exc:
        raise UserError(str(exc), source) from None
    specs = list(registry)
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

    tools_py = (
        f'"""The {name} domain: tools imported from {Path(source).name} by forethought new-domain (bodies TODO)."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Any, Literal  # noqa: F401 - parameter types\n\n"
        "from forethought.kernel.domains.base import Domain, ToolError  # noqa: F401 - ToolError: a failed call\n\n"
        "from .state import State\n\n"
        f'DOMAIN = Domain("{name}", State, description="Tools imported from {Path(source).name}.")\n'
        + "".join(_tool_source(s) for s in specs)
    )
    state_py = (
        f'"""The {name} domain\'s state: what its tools read and change (replace the call log with your model)."""\n\n'
        "from __future__ import annotations\n\nfrom typing import Any\n\nfrom pydantic import BaseModel, Field\n\n\n"
        "class State(BaseModel):\n"
        "    calls: list[dict[str, Any]] = Field(default_factory=list)\n"
    )
    readme = f"""# Domain `{name}`

Written by `forethought new-domain {name} --from {source}`. Make it yours: the tools' bodies in `tools.py` (TODO),
the state in `state.py`, the slot values in `slot_values.json`, and worked solutions in `solutions/`.

```bash
export FORETHOUGHT_DOMAINS={parent.resolve()}
forethought verify {folder.resolve() / "solutions"}
forethought generate 'data.solutions=[{folder.resolve() / "solutions"}]' data.output_dir=runs/{name}/data
forethought train model=tiny dataset_dir=runs/{name}/data output_dir=runs/{name}/train
```

docs/own_tools.md has the whole path, from a registry file to a validated bundle running on your tools.
"""
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=parent))
    try:
        (tmp / "solutions").mkdir()
        (tmp / "__init__.py").write_text(
            f'"""The {name} domain."""\n\nfrom .tools import DOMAIN\n\n__all__ = ["DOMAIN"]\n'
        )
        (tmp / "state.py").write_text(state_py)
        (tmp / "tools.py").write_text(tools_py)
        (tmp / "slot_values.json").write_text("{}\n")
        (tmp / "README.md").write_text(readme)
        (tmp / "solutions" / f"{name}-example.json").write_text(json.dumps(_solution(name, specs), indent=2) + "\n")
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def cli(args: list[str]) -> int:
    opts = _parse(args)
    if "help" in opts:
        print(USAGE + "\n\n" + (__doc__ or "").split("\n\n", 1)[1].strip())
        return 0
    folder = write_domain(opts["name"], opts["from"], opts.get("dir", "."), opts.get("annotations"))
    print(f"wrote {folder}/ (tools.py, state.py, slot_values.json, solutions/{opts['name']}-example.json, README.md)")
    print(f"next: export FORETHOUGHT_DOMAINS={folder.parent.resolve()} && forethought verify {folder / 'solutions'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli(sys.argv[1:]))
