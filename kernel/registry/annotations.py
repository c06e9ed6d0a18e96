"""Annotations for imported tools: what an OpenAI ``tools`` file or an MCP ``tools/list`` cannot carry, in a sidecar
YAML file validated against the registry it annotates.

    format_version: 1
    tools:
      get_event: {side_effect: false, writes: {event: result}}
      cancel_event:
        side_effect: true
        prerequisites: [session]              # a key that must be present and not null; or {key, sat, entity}
        expect: {status: cancelled}           # a postcondition: these result fields have these values
        alternatives: [cancel_event_v2]

Every tool named must be in the registry, every field is checked (a misspelt one is an error naming it), and the
annotated tool is validated again as a whole (a per-entity prerequisite must name one of its parameters).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from forethought.bounded import loads_yaml
from forethought.errors import UserError

from .model import Prerequisite, Sat, ToolSpec
from .registry import Registry

FORMAT_VERSION = 1


class ToolAnnotation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # strict: YAML's "yes" or 1 is not taken for true, nor 1 for a string (a typo is an error, not a guess)
    side_effect: StrictBool | None = None
    prerequisites: list[Prerequisite | StrictStr] | None = None
    writes: dict[str, StrictStr] | None = None
    alternatives: list[StrictStr] | None = None
    secret: list[StrictStr] | None = None
    expect: dict[str, Any] = Field(
        default_factory=dict, description="result path -> the value a successful call returns"
    )


class AnnotationsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: StrictInt = FORMAT_VERSION
    tools: dict[str, ToolAnnotation]


def load_annotations(path: str | Path) -> AnnotationsFile:
    file_path = Path(path)
    where = str(file_path)
    try:
        data = loads_yaml(file_path.read_text(encoding="utf-8"), where)
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"not valid YAML: {exc}", where) from None
    version = data.get("format_version", FORMAT_VERSION) if isinstance(data, dict) else FORMAT_VERSION
    if isinstance(version, bool) or version != FORMAT_VERSION:
        raise UserError(
            f"format_version {data.get('format_version')!r}: this forethought reads version {FORMAT_VERSION}", where
        )
    try:
        return AnnotationsFile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = ".".join(str(x) for x in error["loc"])
        msg = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        raise UserError(f"{loc}: {msg}", where) from None


def annotate(registry: Registry, annotations: AnnotationsFile | str | Path) -> Registry:
    """A copy of ``registry`` with each annotated tool's declared knowledge set."""
    where = str(annotations) if not isinstance(annotations, AnnotationsFile) else "annotations"
    ann = annotations if isinstance(annotations, AnnotationsFile) else load_annotations(annotations)
    unknown = sorted(set(ann.tools) - {t.name for t in registry})
    if unknown:
        raise UserError(f"annotates tools the registry does not have: {', '.join(unknown)} (it has: "
                        f"{', '.join(t.name for t in registry)})", where)  # fmt: skip
    out = []
    for spec in registry:
        annotation = ann.tools.get(spec.name)
        if annotation is None:
            out.append(spec)
            continue
        update: dict[str, Any] = {k: v for k, v in annotation.model_dump(exclude={"expect"}, exclude_none=True).items()}
        if annotation.prerequisites is not None:
            update["prerequisites"] = [
                p if isinstance(p, Prerequisite) else Prerequisite(key=p, sat=Sat()) for p in annotation.prerequisites
            ]
        try:
            new = ToolSpec.model_validate({**spec.model_dump(), **update})
        except ValidationError as exc:
            raise UserError(f"tools.{spec.name}: {exc.errors()[0]['msg']}", where) from None
        if spec.name in new.alternatives:
            raise UserError(f"tools.{spec.name}.alternatives: a tool is not its own alternative", where)
        unknown_alt = [n for n in new.alternatives if n not in {t.name for t in registry}]
        if unknown_alt:
            raise UserError(f"tools.{spec.name}.alternatives: not in the registry: {', '.join(unknown_alt)}", where)
        out.append(
            new.record_import(hints=spec.hints, notes=[n for n in spec.notes if not n.startswith("side effects:")])
        )
    return Registry(out, name=registry.name)


def expectation_checks(annotations: AnnotationsFile | None, tool: str) -> list[Any]:
    """The ``expect`` postconditions of ``tool``: each result path must hold its value."""
    from ..toolgate import resolve_path

    if annotations is None or tool not in annotations.tools:
        return []
    checks = []
    for path, want in annotations.tools[tool].expect.items():

        def check(args: dict[str, Any], result: Any, state: Any, path: str = path, want: Any = want) -> str | None:
            got = resolve_path(result if isinstance(result, dict) else {"result": result}, path)
            return None if got == want else f"result.{path} is {got!r}, expected {want!r}"

        check.__name__ = f"expect {path}"
        checks.append(check)
    return checks
