"""The rendering adapter: a primitive's prompt derived from its pydantic types, as DSPy's ChatAdapter derives one
from a Signature.

A spec states only what is particular to it: its instructions (the prose of the system prompt) and, for an input
field whose type's layout does not fit, what its line shows (``PrimitiveSpec.shown_as``). The adapter derives the
rest from the input and output types:

- the system prompt: the instructions, then the description (``Field(description=...)``) of every output field
  that has one, the fields of nested models included, in declaration order, then the answer-format sentence
  ``Answer with JSON: {...}.`` written from the output type (:func:`answer_format`);
- the user message: one ``Label: value`` line per input field, in declaration order (:func:`user_message`). The
  label is the field's :class:`Label` or ``title``, else its name capitalised; the value is written by the field's
  type, a tool list and a task list as lines below the label.

What it writes is what the golden renderings (tests/snapshots/prompts/) and so the spec hashes cover.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from . import shared
from .shared import TaskRef, ToolBrief

# What a ``shown_as`` function returns for a field that gets no line of its own (its value is shown in another's).
NOT_SHOWN: Any = object()


@dataclass(frozen=True)
class Label:
    """``Annotated`` metadata: the label of an input field's line (``user: Annotated[str, Label("Request")]``), or the
    name a one-field output's value goes by in the trace views. Like ``Field(title=...)``, which the adapter also
    reads, but kept out of the JSON schema, which the spec hash covers: a label the prompt already showed before it
    was declared here (the hand-written layouts of before the adapter) leaves the recorded spec hashes as they were."""

    text: str


@dataclass(frozen=True)
class Placeholder:
    """``Annotated`` metadata: what the answer format writes for a value of this type, where the type's own
    placeholder says too little (a dict's keys: ``dict[Annotated[str, Placeholder("<param>")], Any]``)."""

    text: str


# ------------------------------------------------------------ the answer format
def _metadata_placeholder(annotation: Any) -> str | None:
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, Placeholder):
                return meta.text
    return None


def _without_none(annotation: Any) -> tuple[Any, bool]:
    """The annotation with ``None`` taken out of a union, and whether it was there."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = typing.get_args(annotation)
        kept = [m for m in members if m is not type(None)]
        rest = kept[0] if len(kept) == 1 else typing.Union[tuple(kept)]  # noqa: UP007 - built from a runtime tuple
        return rest, len(kept) < len(members)
    return annotation, False


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def value_shape(annotation: Any) -> str:
    """How the answer format writes a value of type ``annotation``: a nested model by its keys
    (``{"tool_name", "parameters"}``), a list by its items, a nullable type with ``or null``."""
    placeholder = _metadata_placeholder(annotation)
    if placeholder is not None:
        return json.dumps(placeholder)
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    inner, nullable = _without_none(annotation)
    shape = _shape(inner)
    return f"{shape} or null" if nullable else shape


def _shape(annotation: Any) -> str:
    if _is_model(annotation):
        return "{" + ", ".join(json.dumps(name) for name in annotation.model_fields) + "}"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset, Sequence):
        item = args[0] if args else Any
        return f"[{value_shape(item)}]" if _is_model(_without_none(item)[0]) else "[...]"
    if origin is dict:
        key, value = args if args else (str, Any)
        return "{" + (value_shape(key) if _metadata_placeholder(key) else '"<key>"') + f": {value_shape(value)}" + "}"
    if origin is Literal:
        return " or ".join(json.dumps(v) for v in args)
    if annotation is str:
        return '"..."'
    if annotation is bool:
        return "true or false"
    if annotation in (int, float):
        return "n"
    return "value"


def answer_format(output_type: type[BaseModel]) -> str:
    """The sentence that tells the model the JSON to write: ``Answer with JSON: {"tool_name": "..." or null}.``"""
    fields = ", ".join(
        f"{json.dumps(name)}: {value_shape(f.annotation)}" for name, f in output_type.model_fields.items()
    )
    return f"Answer with JSON: {{{fields}}}."


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    if _is_model(annotation):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _nested_models(a)]


def field_descriptions(model: type[BaseModel], seen: frozenset[type] = frozenset()) -> list[str]:
    """The descriptions of the model's fields and of its nested models' fields, depth first, in declaration order."""
    out: list[str] = []
    for info in model.model_fields.values():
        if info.description:
            out.append(info.description.strip())
        for nested in _nested_models(info.annotation):
            if nested not in seen:
                out += field_descriptions(nested, seen | {model, nested})
    return out


@functools.cache  # every prompt asks for it: derived once per spec
def system_prompt(instructions: str, output_type: type[BaseModel]) -> str:
    return " ".join([instructions.strip(), *field_descriptions(output_type), answer_format(output_type)])


# ------------------------------------------------------------ the input layout
def declared_label(info: Any) -> str | None:
    """The label a field declares: its :class:`Label`, else its ``title``."""
    marked = [m.text for m in getattr(info, "metadata", ()) if isinstance(m, Label)]
    return marked[0] if marked else info.title


def field_label(name: str, info: Any) -> str:
    """A field's label: the one it declares, else its name capitalised (``tool_name``: "Tool name")."""
    return declared_label(info) or name.replace("_", " ").capitalize()


def _written(value: Any, annotation: Any) -> tuple[str, bool]:
    """A field's value as its line writes it, and whether it goes on the lines below the label (a block)."""
    inner, _ = _without_none(annotation)
    item = (typing.get_args(inner) or (Any,))[0] if typing.get_origin(inner) is list else None
    if isinstance(value, shared.Lines):
        return str(value) or "(none)", True
    if item is ToolBrief:
        return shared.render_tools(value), True
    if item is TaskRef:
        return "\n".join(f"- {t.id}: {t.text}" for t in value), True
    if item is str:
        return ", ".join(value), False
    if inner is ToolBrief:
        return shared.render_tools([value])[2:], False  # the tool's line without its list bullet
    if inner is TaskRef:
        return value.text, False
    if isinstance(value, str):
        return value, False
    return shared.inline_json(value), False


def user_message(inp: BaseModel, shown_as: Mapping[str, Callable[[Any], Any]]) -> str:
    """One ``Label: value`` line per input field; ``shown_as[field](inp)`` replaces a field's value (or is
    :data:`NOT_SHOWN`, leaving its line out)."""
    lines = []
    for name, info in type(inp).model_fields.items():
        value = shown_as[name](inp) if name in shown_as else getattr(inp, name)
        if value is NOT_SHOWN:
            continue
        label = field_label(name, info)
        text, block = _written(value, info.annotation)
        lines.append(f"{label}:\n{text}" if block else f"{label}: {text}")
    return "\n".join(lines)
