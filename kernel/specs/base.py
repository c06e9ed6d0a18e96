"""The primitive spec: everything about one SLM primitive, stated once (kernel/specs/<name>.py each holds one)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from forethought.primitives import Check, Contract, Primitive, slm
from forethought.primitives.primitive import Message, default_parse

from ..grounding import canonical
from . import adapter, demonstrations, shared
from .decisions import DecisionContract, decision_text, default_decision_key
from .shared import MAX_TASKS, whole_numbers

# ------------------------------------------------------------------------ specs
_SPEC_HASHES: dict[str, str] = {}


@functools.cache
def spec_golden() -> dict[str, list[dict[str, Any]]]:
    """kernel/spec_golden.json: primitive -> its golden inputs and targets."""
    return json.loads((Path(__file__).parent.parent / "spec_golden.json").read_text(encoding="utf-8"))


def forget_spec_hashes(name: str) -> None:
    """Drop a primitive's cached spec hashes (it was registered anew, or unregistered)."""
    for key in [k for k in _SPEC_HASHES if k.split(":")[0] == name]:
        del _SPEC_HASHES[key]


@dataclass(frozen=True)
class Annotation:
    """One annotated turn of a worked solution (kernel/scenario.py's Turn), as a spec's oracle reads it."""

    turn: Any
    tasks: dict[str, Any]  # task id -> its TaskAnn

    @classmethod
    def of(cls, turn: Any) -> Annotation:
        tasks = {t.id: t for t in turn.tasks or []}
        for task in turn.tasks or []:  # a fan-out task's instances are answered as tasks of their own ("t2[0]", ...)
            tasks.update({i.id: i for i in task.instance_tasks()})
        return cls(turn, tasks)


@dataclass(frozen=True)
class GenerationRules:
    """How ``forethought generate`` (data_gen/generate.py) turns this primitive's decision points into examples."""

    # Variant changes (data_gen/augment.py's Variant flags "permuted", "renamed") after which the same
    # input would have another, equally right target: examples of such variants are not written.
    drop_variants: frozenset[str] = frozenset()
    # (input, target, rng) -> the input presented in another order, so that copying the input never wins.
    shuffle_input: Callable[[Any, Any, random.Random], Any] | None = None
    # (input, target, names) -> the input with the tools ``names`` (the target's and its alternatives) taken out
    # and the answer it then has, or None: train rows where no listed tool does the task (data.variations.without_target)
    without_target: Callable[[Any, Any, frozenset[str]], tuple[Any, Any] | None] | None = None
    # (input, pick in [0, 1)) -> the input with its task written as one listed tool's own description, and the
    # answer it then has, or None: train rows tying every listed tool's words to its name, not only the tools the
    # solutions' tasks use (data.variations.tool_description)
    tool_description: Callable[[Any, float], tuple[Any, Any] | None] | None = None


@dataclass(frozen=True)
class Retrieval:
    """Demonstrations retrieved for this primitive's inputs (kernel/specs/demonstrations.py): the decisions of train
    solutions nearest to the input, shown in one of its fields. Off unless a store is active for the primitive."""

    field: str  # the input field that shows them (None there when no store is active: no line, the prompt as before)
    # (input, target) -> the (text, answer) a train decision stores, or None (nothing to store)
    stored: Callable[[Any, Any], tuple[str, str] | None]
    # input -> (the text to match, the answers it may be shown: the tools its prompt lists)
    query: Callable[[Any], tuple[str, list[str]]]


@dataclass(frozen=True)
class Derivation:
    """Decision points taken at another primitive's: every input of ``source`` the kernel asks the oracle
    during a replay gives one input of this primitive (``make_input``), answered by this spec's oracle.
    For a primitive whose kernel step does not run during replays (yet); see docs/primitives.md."""

    source: str
    make_input: Callable[[Any], BaseModel]


@dataclass(frozen=True)
class PrimitiveSpec:
    name: str
    # The prose of the system prompt: the task, in the primitive's words. The adapter (kernel/specs/adapter.py)
    # adds the output fields' descriptions and the answer format, and lays out the user message, from the types.
    instructions: str
    input_type: type[BaseModel]
    output_type: type[BaseModel]
    checks: tuple[Check, ...]
    canonical_fn: Callable[[Any], Any]
    # (input, max_tasks=MAX_TASKS) -> the output's JSON schema specialised to the input, for constrained decoding.
    # Names the model must copy (registered tools, batch task ids, the missing parameters) become enums or fixed
    # keys, and free strings get a length bound, so decoding cannot produce them wrongly; ``max_tasks`` is the
    # kernel's declared fan-out (KernelConfig.max_tasks).
    decoding_schema: Callable[..., dict[str, Any]]
    # (input, annotation) -> the answer the annotations give (the oracle backend, and so every training target).
    oracle: Callable[[Any, Annotation], dict[str, Any]]
    default_size: int  # examples generated when data.sizes does not name the primitive
    gate_threshold: float  # exact-match gate when validate's thresholds do not name it
    # The noisy oracle's errors: ``corrupt(answer, rng, tool_names)`` changes the parsed answer in place by one
    # error typical of the primitive and returns its kind, one of ``noise_kinds``.
    noise_kinds: tuple[str, ...] = ()
    corrupt: Callable[[dict[str, Any], random.Random, list[str]], str] | None = None
    generation: GenerationRules = field(default_factory=GenerationRules)
    derived_from: Derivation | None = None
    # Golden inputs and targets ({"input", "target"}) for a spec that kernel/spec_golden.json does not list.
    golden_cases: tuple[dict[str, Any], ...] = ()
    # Input fields whose line in the user message shows something other than the field's value: field name ->
    # (input) -> the value to show (adapter.NOT_SHOWN: no line). Only what the types cannot say.
    shown_as: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    # (input) -> the key of a decision in TurnResult.decisions; by default the input's task id, else "turn"
    # (kernel/specs/decisions.py).
    keyed_by: Callable[[Any], str] | None = None
    retrieval: Retrieval | None = None

    @property
    def system(self) -> str:
        """The whole system prompt, derived by the adapter from the instructions and the output type."""
        return adapter.system_prompt(self.instructions, self.output_type)

    def user_text(self, inp: BaseModel) -> str:
        """The user message for ``inp``, laid out by the adapter from the input type."""
        return adapter.user_message(inp, self.shown_as)

    def system_text(self) -> str:
        """The system prompt under the active tool rendering: whole, or (``compact``) its first sentence and its
        answer-format sentence only. A model fine-tuned on the primitive learns the rest from its examples; a
        small model trained here pays for every prompt token in every step (docs/training.md)."""
        if shared.active_tool_rendering() not in shared.COMPACT_RENDERINGS:
            return self.system
        sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(self.system.split()))
        answer = [x for x in sentences if x.startswith("Answer with JSON")]
        return " ".join([sentences[0], *[a for a in answer if a != sentences[0]]])

    def messages(self, inp: BaseModel, feedback: Sequence[str] = ()) -> list[Message]:
        msgs: list[Message] = [
            {"role": "system", "content": self.system_text()},
            {"role": "user", "content": self.user_text(inp)},
        ]
        if feedback:
            # Retries see the violations of their previous answer (never in training data).
            msgs[-1] = {
                "role": "user",
                "content": msgs[-1]["content"]
                + "\n\nYour previous answer was rejected:\n"
                + "\n".join(f"- {f}" for f in feedback)
                + "\nAnswer again with corrected JSON.",
            }
        return msgs

    def contract(self) -> Contract:
        return Contract(
            value=[c for c in self.checks if c.level == "value"],
            semantic=[c for c in self.checks if c.level == "semantic"],
        )

    def parse(self, text: str) -> Any:
        return default_parse(text)

    def target_text(self, output: BaseModel | dict[str, Any]) -> str:
        """The completion a model is trained to produce: compact JSON of the output, a whole number written as one
        (``20``, not ``20.0``: the grounded number, in the one form the decoding grammar offers)."""
        data = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
        dumped = whole_numbers(self.output_type.model_validate(data).model_dump(mode="json"))
        return json.dumps(dumped, ensure_ascii=False, separators=(", ", ": "))

    def canonical(self, output: BaseModel | dict[str, Any]) -> str:
        """Canonical string for exact match (same for prediction and target)."""
        out = output if isinstance(output, self.output_type) else self.output_type.model_validate(output)
        return canonical(self.canonical_fn(out))

    def exact_match(self, prediction: Any, target: Any) -> bool:
        try:
            return self.canonical(prediction) == self.canonical(target)
        except Exception:
            return False

    def check_output(self, inp: BaseModel | dict[str, Any], output: Any):
        """Type + value + semantic contract of one output (used by data generation and gates)."""
        inp_m = inp if isinstance(inp, self.input_type) else self.input_type.model_validate(inp)
        return self.contract().check(self.name, self.output_type, inp_m, output)

    @property
    def spec_hash(self) -> str:
        """What the model sees and how its answer is judged, under the active tool rendering, hashed (cached; see
        :meth:`compute_spec_hash`)."""
        store = demonstrations.active_store(self.name) if self.retrieval is not None else None
        key = f"{self.name}:{shared.active_tool_rendering()}:{store.k if store else '-'}"
        if key not in _SPEC_HASHES:
            _SPEC_HASHES[key] = self.compute_spec_hash()
        return _SPEC_HASHES[key]

    def demonstrated(
        self, inp: BaseModel, store: demonstrations.DemonstrationStore | None = None, exclude: str | None = None
    ) -> BaseModel:
        """``inp`` with its demonstrations retrieved from ``store`` (default: the process's store for this primitive),
        none of solution ``exclude``; ``inp`` as it is when the spec retrieves none or no store is active. The one
        retrieval of generate (each row, its own solution excluded) and of the kernel (each request)."""
        if self.retrieval is None:
            return inp
        store = store if store is not None else demonstrations.active_store(self.name)
        if store is None:
            return inp
        text, answers = self.retrieval.query(inp)
        return inp.model_copy(update={self.retrieval.field: store.nearest(text, answers, exclude)})

    def golden(self) -> list[tuple[BaseModel, BaseModel]]:
        """Fixed inputs and targets (kernel/spec_golden.json, else ``golden_cases``) whose rendering the spec hash
        covers; with a store active, each input shown the golden decisions nearest to it (a store of the golden
        cases themselves, so the snapshot does not depend on the data)."""
        cases = spec_golden().get(self.name) or list(self.golden_cases)
        if not cases:
            raise ValueError(
                f"primitive {self.name!r} has no golden cases (kernel/spec_golden.json or PrimitiveSpec.golden_cases)"
            )
        pairs = [
            (self.input_type.model_validate(g["input"]), self.output_type.model_validate(g["target"])) for g in cases
        ]
        active = demonstrations.active_store(self.name) if self.retrieval is not None else None
        if active is None or self.retrieval is None:
            return pairs
        stored = [self.retrieval.stored(inp, target) for inp, target in pairs]
        golden_store = demonstrations.DemonstrationStore(
            self.name, active.k, [(f"golden-{i}", *s) for i, s in enumerate(stored) if s is not None]
        )
        return [(self.demonstrated(inp, golden_store), target) for inp, target in pairs]

    def input_schema(self) -> dict[str, Any]:
        """The input type's JSON schema as the spec hash covers it: without the demonstrations' field while no store
        is active (the prompt is then what it was before the field existed, and so is the hash of bundles trained so)."""
        schema = self.input_type.model_json_schema()
        if self.retrieval is not None and demonstrations.active_store(self.name) is None:
            schema["properties"].pop(self.retrieval.field, None)
            schema.get("$defs", {}).pop(demonstrations.Demonstration.__name__, None)
            if not schema.get("$defs"):
                schema.pop("$defs", None)
        return schema

    def golden_rendering(self) -> str:
        """Everything the model sees and is trained to answer for the golden inputs, as text.

        A prompt change anywhere (the system prompt, a helper such as render_tools,
        messages(), the retry feedback, target_text, the decoding schema or the
        canonical form) changes this text, so it changes the spec hash; the tests
        keep it as a snapshot, so the change is also a visible diff.
        """
        parts = [f"# {self.name}"]
        for i, (inp, target) in enumerate(self.golden()):
            parts.append(f"## golden {i}: messages")
            parts.append(json.dumps(self.messages(inp), ensure_ascii=False, indent=1))
            parts.append(f"## golden {i}: messages of a retry")
            parts.append(
                json.dumps(
                    self.messages(inp, ("[value] golden_check: an example violation",))[-1],
                    ensure_ascii=False,
                    indent=1,
                )
            )
            parts.append(f"## golden {i}: target text\n{self.target_text(target)}")
            parts.append(f"## golden {i}: canonical form\n{self.canonical(target)}")
            parts.append(
                f"## golden {i}: decoding schema\n{json.dumps(self.decoding_schema(inp), sort_keys=True, ensure_ascii=False)}"
            )
            parts.append(
                f"## golden {i}: contract verdict\n{json.dumps(self.check_output(inp, target).to_dict(), sort_keys=True, default=str)}"
            )
        return "\n".join(parts) + "\n"

    def compute_spec_hash(self) -> str:
        """Changes whenever the prompt, schemas, rendering, contract or canonical form change."""
        digest = hashlib.sha256()
        digest.update(self.golden_rendering().encode())
        digest.update(json.dumps(self.input_schema(), sort_keys=True).encode())
        digest.update(json.dumps(self.output_type.model_json_schema(), sort_keys=True).encode())
        # The contract's checks judge answers the golden targets may not exercise: their source too; and with a store
        # active, how it retrieves (what a decision stores, what a query asks, the overlap).
        store = demonstrations.active_store(self.name) if self.retrieval is not None else None
        retrieval: list[Callable[..., Any]] = []
        if store is not None and self.retrieval is not None:
            # how many (the golden cases may be too few to show it), and the words the overlap leaves out (a constant
            # the functions' source below only names)
            digest.update(f"demonstrations k={store.k} stop={sorted(demonstrations.STOP_WORDS)}".encode())
            retrieval = [self.retrieval.stored, self.retrieval.query, store.nearest, demonstrations.words]
        for fn in [self.canonical_fn, *[c.fn for c in self.checks], *retrieval]:
            try:
                digest.update(inspect.getsource(fn).encode())
            except (OSError, TypeError):
                digest.update(getattr(fn, "__qualname__", repr(fn)).encode())
        return digest.hexdigest()[:16]

    def decision_key(self, inp: BaseModel) -> str:
        """Where TurnResult.decisions keeps this primitive's answer to ``inp`` (kernel/specs/decisions.py)."""
        return self.keyed_by(inp) if self.keyed_by is not None else default_decision_key(inp)

    def decision_text(self, decision: Mapping[str, Any]) -> str:
        """One decision (an output, as JSON) in a line, for the trace views."""
        return decision_text(self.output_type, decision)

    def primitive(self, *, adapter: str | None = None, max_tasks: int = MAX_TASKS) -> Primitive:
        """The SLM primitive of this spec. Its contract also hands every output it accepts to the decision recorder of
        the running kernel turn (decisions.recording_decisions), so any spec's step fills TurnResult.decisions."""
        return slm(
            self.name,
            self.input_type,
            self.output_type,
            DecisionContract(self, self.contract()),
            render=self.messages,
            parse=self.parse,
            json_schema=functools.partial(self.decoding_schema, max_tasks=max_tasks),
            adapter=adapter or self.name,
            version=self.spec_hash,
        )
