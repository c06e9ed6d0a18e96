"""The dataset row format, and its `datasets` features.

Rows are trl's conversational prompt-completion format plus metadata::

    {"id", "solution_id", "primitive", "prompt": [messages], "completion": [one assistant message],
     "target": <the completion's JSON as an object>, "input": <the primitive's structured input, as a JSON string>,
     "near_duplicate_across_split": <true when the prompt, slot values and digits masked, also occurs in the other split>}

``target`` holds free-form mappings (tool parameters, filled values) whose
keys differ between rows; Arrow cannot infer one struct type for them across
files, so load both splits with these features (``Json`` for the target)::

    datasets.load_dataset("json", data_files={...}, features=data_gen.formats.features())

or load the primitive's folder directly (its README declares the features):
``datasets.load_dataset("runs/data/decompose")``.
"""

from __future__ import annotations

from typing import Any

ROW_FIELDS = ("id", "solution_id", "primitive", "prompt", "completion", "target", "input", "near_duplicate_across_split")


def features() -> Any:
    from datasets import Features, Json, List, Value

    message = {"role": Value("string"), "content": Value("string")}
    return Features(
        {
            "id": Value("string"),
            "solution_id": Value("string"),
            "primitive": Value("string"),
            "prompt": List(message),
            "completion": List(message),
            "target": Json(),
            "input": Value("string"),
            "near_duplicate_across_split": Value("bool"),
        }
    )


def card_front_matter() -> str:
    """YAML header that lets ``datasets.load_dataset(<primitive folder>)`` load both splits with the right features."""
    return """---
configs:
- config_name: default
  data_files:
  - split: train
    path: train.jsonl
  - split: validation
    path: validation.jsonl
dataset_info:
  features:
  - name: id
    dtype: string
  - name: solution_id
    dtype: string
  - name: primitive
    dtype: string
  - name: prompt
    list:
    - name: role
      dtype: string
    - name: content
      dtype: string
  - name: completion
    list:
    - name: role
      dtype: string
    - name: content
      dtype: string
  - name: target
    dtype: json
  - name: input
    dtype: string
  - name: near_duplicate_across_split
    dtype: bool
---
"""
