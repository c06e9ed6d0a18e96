"""The dataset row, defined once: generate writes it, the dataset card describes it, train and validate read it.

``<dataset_dir>/<primitive>/{train,validation}.jsonl`` holds one :class:`DatasetRow` per line: trl's
conversational prompt-completion format (``prompt``, ``completion``) plus the metadata validation and
the reports need. A row is checked whole on reading (:func:`read_rows`), and every bad row is reported
with its file, line and field, so train and validate accept and refuse exactly the same rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from forethought.bounded import JSONProblem, json_path, loads_json
from forethought.errors import UserError

from .unit import MAX_FILE_BYTES, checked_bytes, load_manifest, split_problem

MAX_REPORTED = 10  # bad rows listed in one error; the rest are counted


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: str
    content: str


class DatasetRow(BaseModel):
    """One example. The field descriptions are the dataset card's (:mod:`forethought.data_gen.formats`)."""

    # strict: a row is JSON, so a number where a string belongs is an error, not a conversion
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, description="the example's id: `<primitive>-<hash of its prompt and completion>`")
    solution_id: str = Field(min_length=1, description="the worked solution it comes from (splits are by solution)")
    primitive: str = Field(min_length=1, description="the primitive it trains (the folder it is in)")
    prompt: list[Message] = Field(min_length=1, description="system + user messages, as the kernel renders them")
    completion: list[Message] = Field(
        min_length=1, max_length=1, description="one assistant message: the target as compact JSON"
    )
    target: Any = Field(description="the completion's JSON as an object (what validation compares with)")
    input: str = Field(
        description="the primitive's structured input as a JSON string, from which its spec renders the prompt "
        "(key order is rendering order); validation checks outputs against it"
    )
    near_duplicate_across_split: bool = Field(
        description="true when the prompt, slot values and digits masked, also occurs in the other split"
    )
    # Optional, so datasets written before it read as they were (no such rows then but without_target's, unmarked).
    train_only: bool = Field(
        False,
        description="true for a row written for training only, not a decision a solution holds "
        "(data.variations.without_target, tool_description): the dev split carved from train solutions leaves it out",
    )

    @field_validator("prompt")
    @classmethod
    def _prompt_roles(cls, prompt: list[Message]) -> list[Message]:
        roles = [m.role for m in prompt]
        if roles[0] == "system":
            roles = roles[1:]
        if (
            not roles
            or any(r != ("user" if i % 2 == 0 else "assistant") for i, r in enumerate(roles))
            or roles[-1] != "user"
        ):
            raise ValueError(
                "roles must be [system], user, assistant, user, ... ending with user (Gemma's template has no other roles)"
            )
        return prompt

    @field_validator("completion")
    @classmethod
    def _one_json_answer(cls, completion: list[Message]) -> list[Message]:
        if completion[0].role != "assistant":
            raise ValueError("the completion message's role must be 'assistant'")
        if not completion[0].content.strip():
            raise ValueError("empty completion")
        try:  # every primitive answers in JSON; a completion that is not JSON teaches the model to break its contract
            loads_json(completion[0].content, "completion")
        except json.JSONDecodeError:
            raise ValueError(
                "the completion's content is not JSON (every primitive's target is a JSON object)"
            ) from None
        except UserError as exc:
            raise ValueError(f"the completion's content: {exc.message}") from None
        return completion

    @field_validator("input")
    @classmethod
    def _input_is_json(cls, text: str) -> str:
        try:
            loads_json(text, "input")
        except json.JSONDecodeError:
            raise ValueError("not valid JSON") from None
        except UserError as exc:
            raise ValueError(exc.message) from None
        return text

    @model_validator(mode="after")
    def _target_is_the_completion(self) -> DatasetRow:
        # Otherwise the model is trained on one answer (the completion) and judged against another (the target).
        if json.loads(self.completion[0].content) != self.target:
            raise ValueError("field 'target' is not the completion's JSON")
        return self

    @model_validator(mode="after")
    def _valid_for_its_primitive(self) -> DatasetRow:
        """``input`` and ``target`` as the primitive's spec types them: a target that is JSON but not the primitive's
        output would teach the model an answer its contract refuses. Part of the row, so generate, train and validate
        accept and refuse the same rows."""
        from forethought.kernel.specs import SPECS

        spec = SPECS.get(self.primitive)
        if spec is None:
            raise ValueError(
                f"field 'primitive': {self.primitive!r} is not a registered primitive ({', '.join(SPECS)})"
            )
        try:
            spec.input_type.model_validate(self.input_value)
        except ValidationError as exc:
            raise ValueError(f"field 'input' is not a {spec.input_type.__name__}: {_first(exc)}") from None
        try:
            spec.target_text(self.target)
        except (ValidationError, TypeError, ValueError) as exc:
            raise ValueError(
                f"field 'target' is not a valid {spec.name} target (its output type {spec.output_type.__name__}): "
                f"{_first(exc)}"
            ) from None
        return self

    @cached_property
    def input_value(self) -> Any:
        """``input`` parsed: the primitive's structured input as JSON values."""
        return json.loads(self.input)

    def prompt_messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages (dicts), as a chat template and the backends take them."""
        return [m.model_dump() for m in self.prompt]

    def line(self) -> str:
        """The row as one JSON Lines line (no newline), fields in their declared order."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False)


def _first(exc: Exception) -> str:
    """The first problem of a validation error, with its field, on one line."""
    if isinstance(exc, ValidationError) and exc.errors():
        error = exc.errors()[0]
        loc = ".".join(str(x) for x in error["loc"])
        return (f"{loc}: " if loc else "") + error["msg"].removeprefix("Value error, ")
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def row_problem(raw: Any) -> tuple[DatasetRow | None, str | None]:
    """A parsed JSON value as a row, or why it is not one (the first problem, named by field)."""
    if not isinstance(raw, dict):
        return None, f"not a JSON object (got {type(raw).__name__})"
    try:
        return DatasetRow.model_validate(raw), None
    except ValidationError as exc:
        errors = exc.errors()
        error = errors[0]
        field = ".".join(str(x) for x in error["loc"])
        msg = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            text = f"field {field!r} is missing"
        elif error["type"] == "extra_forbidden":
            text = f"field {field!r} is not a dataset row field ({', '.join(DatasetRow.model_fields)})"
        elif not field:
            text = msg  # a check across fields names its field itself
        else:
            text = f"field {field!r}: {msg}"
        return None, text + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def dataset_text(dataset_dir: str | Path, rel: str) -> str:
    """A dataset file's text, refused unless the dataset's manifest vouches for exactly these bytes."""
    path = Path(dataset_dir) / rel
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"larger than {MAX_FILE_BYTES >> 20} MiB; split the dataset", str(path))
    try:
        return checked_bytes(dataset_dir, rel).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not UTF-8 text (byte {exc.start}: {exc.reason}); datasets are UTF-8 JSON Lines", str(path)
        ) from None


def read_rows(dataset_dir: str | Path, primitive: str, split: str, *, limit: int | None = None) -> list[DatasetRow]:
    """The rows of ``<dataset_dir>/<primitive>/<split>.jsonl``, each checked; every bad one is listed with its line.

    A row must be a :class:`DatasetRow` of this primitive (its ``input`` and ``target`` valid for the primitive's spec),
    on its side of the train/validation split (the manifest's held-out solutions). Train and validate read through
    here alike. Stops after ``limit`` good rows.
    """
    rel = f"{primitive}/{split}.jsonl"
    path = Path(dataset_dir) / rel
    held_out = set(load_manifest(dataset_dir)["validation_solutions"])
    text = dataset_text(dataset_dir, rel)
    rows: list[DatasetRow] = []
    errors: list[str] = []
    for i, line in enumerate(text.split("\n"), start=1):  # not splitlines(): JSON strings may hold U+2028
        if not line.strip():
            continue
        try:
            raw = loads_json(line, str(path))
        except json.JSONDecodeError as exc:
            errors.append(f"line {i}: not valid JSON ({exc.msg})")
            continue
        except JSONProblem as exc:
            errors.append(f"line {i}: {exc.detail}" + (f" at {json_path(exc.path)}" if exc.path else ""))
            continue
        named = raw.get("primitive") if isinstance(raw, dict) else None
        if isinstance(named, str) and named != primitive:  # before the row is read as that primitive's
            row, problem = None, f"field 'primitive' is {named!r}, expected {primitive!r} (the folder it is in)"
        else:
            row, problem = row_problem(raw)
        if row is not None:
            problem = split_problem(row.solution_id, split, held_out)
        if problem:
            errors.append(f"line {i}: {problem}")
            continue
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    if errors:
        more = f"\n  ... and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
        raise UserError(f"{len(errors)} bad row(s):\n  " + "\n  ".join(errors[:MAX_REPORTED]) + more, str(path))
    return rows


# ------------------------------------------------------------ the dev split
def is_dev_solution(solution_id: str, fraction: float, seed: int) -> bool:
    """Whether a train solution is held out as *dev* (for early stopping and checkpoint selection).

    Decided by a hash of the solution id and the seed alone, so every primitive, and the base stage, hold out
    the same solutions without reading each other's rows; a solution is all dev or all train. Validation
    solutions never come into it: they are in another file, held out by ``forethought generate``.
    """
    if fraction <= 0:
        return False
    digest = hashlib.sha256(f"dev:{seed}:{solution_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def dev_solutions(solutions: Iterable[str], fraction: float, seed: int) -> set[str]:
    """The dev solutions among a primitive's train solutions: with a fraction > 0 and at least two of them, dev holds
    at least one (the one of lowest hash) and train keeps at least one. Training carves its dev rows with it, and
    generate keeps these solutions out of a demonstrations store (kernel/specs/demonstrations.py)."""
    ordered = sorted(set(solutions))
    if fraction <= 0:
        return set()
    dev = {s for s in ordered if is_dev_solution(s, fraction, seed)}
    if len(ordered) >= 2 and not dev:
        dev = {min(ordered, key=lambda s: hashlib.sha256(f"dev:{seed}:{s}".encode()).digest())}
    if dev == set(ordered):
        dev.discard(max(ordered))
    return dev
