"""How a dataset row is described to others: its `datasets` features, the card's YAML header and field list.

All three are derived from the one row definition, :class:`forethought.data_gen.row.DatasetRow`, so a
field added there appears in every description. Rows are trl's conversational prompt-completion format
plus metadata.

``target`` holds free-form mappings (tool parameters, filled values) whose
keys differ between rows; Arrow cannot infer one struct type for them across
files, so load both splits with these features (``Json`` for the target)::

    datasets.load_dataset("json", data_files={...}, features=forethought.data_gen.formats.features())

or load the primitive's folder directly (its README declares the features):
``datasets.load_dataset("runs/pipeline/data/decompose")``.
"""

from __future__ import annotations

from typing import Any

from .row import DatasetRow, Message


def field_kinds() -> dict[str, str]:
    """Each row field's kind, in the row's field order: ``string``, ``bool``, ``json`` or ``messages``."""
    kinds = {}
    for name, field in DatasetRow.model_fields.items():
        ann = field.annotation
        if ann is str:
            kinds[name] = "string"
        elif ann is bool:
            kinds[name] = "bool"
        elif ann == list[Message]:
            kinds[name] = "messages"
        elif ann is Any:
            kinds[name] = "json"
        else:  # a new field type needs its datasets feature spelled out here
            raise TypeError(f"DatasetRow.{name}: no datasets feature for {ann!r}")
    return kinds


def features() -> Any:
    # datasets loads lazily: generate and the readers import this module, and datasets is slow to import.
    from datasets import Features, Json, List, Value

    message = {"role": Value("string"), "content": Value("string")}
    by_kind = {
        "string": lambda: Value("string"),
        "bool": lambda: Value("bool"),
        "json": Json,
        "messages": lambda: List(message),
    }
    return Features({name: by_kind[kind]() for name, kind in field_kinds().items()})


def card_front_matter() -> str:
    """YAML header that lets ``datasets.load_dataset(<primitive folder>)`` load both splits with the right features."""
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        "    path: train.jsonl",
        "  - split: validation",
        "    path: validation.jsonl",
        "dataset_info:",
        "  features:",
    ]
    for name, kind in field_kinds().items():
        lines.append(f"  - name: {name}")
        if kind == "messages":
            lines += [
                "    list:",
                "    - name: role",
                "      dtype: string",
                "    - name: content",
                "      dtype: string",
            ]
        else:
            lines.append(f"    dtype: {kind}")
    return "\n".join(lines) + "\n---\n"


def field_list() -> str:
    """The row's fields with their descriptions, as a Markdown list (the dataset card's)."""
    return "\n".join(f"- `{name}`: {field.description}" for name, field in DatasetRow.model_fields.items())
