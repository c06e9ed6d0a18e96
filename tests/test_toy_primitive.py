"""A sixth primitive, registered in the test and nowhere else, goes through the whole chain (issue 14).

``count_tasks`` answers how many unit tasks a request asks for. Its spec is
the only thing written for it: its oracle reads the answer from the
annotation every worked solution already carries (the turn's tasks), and
its decision points are taken at decompose's (``derived_from``), so the
solutions, the conf files and the code of generate, train, validate,
package and the hf backend are untouched. The kernel step that calls it
is placed in the real kernel program (before decompose) and the turn runs
through Kernel.run_turn with the packaged bundle's hf backend. Everything is tiny
(random base, two training steps per adapter: the first, in warmup, has learning rate 0).

Its prompt is written by the rendering adapter from its types (no render function: the spec states only its
instructions; the label, the field description and the answer format come from CountTasksInput and
CountTasksOutput), and its decisions reach TurnResult.decisions, the HTML trace and the responder's rendering
with no code of theirs naming it (issue 26).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, Field

from forethought.kernel.specs import (
    MAX_TASKS,
    PRIMITIVE_NAMES,
    SPECS,
    Derivation,
    Label,
    PrimitiveSpec,
    registered,
)
from forethought.primitives import Check, Sequence, Step

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("llguidance")

FIX = Path(__file__).parent / "fixtures" / "solutions"
SOLUTIONS = Path(__file__).resolve().parents[1] / "data_gen" / "solutions"


class CountTasksInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: Annotated[str, Label("Request")]


class CountTasksOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(description="Count one task per tool call.")


def _within_fan_out(inp: CountTasksInput, out: CountTasksOutput) -> str | None:
    return None if 0 <= out.count <= MAX_TASKS else f"count {out.count} is outside 0..{MAX_TASKS}"


def _corrupt(ans: dict, rng, tools: list[str]) -> str:
    ans["count"] = ans.get("count", 0) + rng.choice([-1, 1])
    return "off_by_one"


COUNT_TASKS = PrimitiveSpec(
    name="count_tasks",
    instructions="Count the unit tasks the request asks for.",
    input_type=CountTasksInput,
    output_type=CountTasksOutput,
    checks=(Check("within_fan_out", "value", _within_fan_out),),
    canonical_fn=lambda out: out.count,
    decoding_schema=lambda inp, max_tasks=MAX_TASKS: {
        "type": "object",
        "properties": {"count": {"type": "integer", "minimum": 0, "maximum": max_tasks}},
        "required": ["count"],
        "additionalProperties": False,
    },
    oracle=lambda inp, ann: {"count": len(ann.turn.tasks or [])},
    default_size=8,
    gate_threshold=0.5,
    noise_kinds=("off_by_one",),
    corrupt=_corrupt,
    derived_from=Derivation("decompose", lambda d: CountTasksInput(user=d.user)),
    golden_cases=({"input": {"user": "Go to the archive folder and list it"}, "target": {"count": 2}},),
)


@pytest.fixture()
def toy():
    with registered(COUNT_TASKS) as spec:
        yield spec
    assert "count_tasks" not in SPECS


def test_a_registered_sixth_primitive_runs_generate_train_validate_package_kernel(toy, tmp_path, one_torch_thread):
    from forethought.bundle.manifest import load_bundle
    from forethought.data_gen.generate import DataConfig, generate
    from forethought.kernel.backends.hf import HFBackend
    from forethought.kernel.environment import Environment
    from forethought.kernel.program import Kernel
    from forethought.kernel.records import KernelConfig
    from forethought.kernel.scratchpad import Scratchpad
    from forethought.kernel.specs import spec_hashes
    from forethought.primitives import Program, Sequence
    from forethought.training.package import PackageConfig, package
    from forethought.training.train import config_from_overrides, run
    from forethought.training.validate import ValidateConfig, run_validation

    assert PRIMITIVE_NAMES[-1] == "count_tasks" and len(PRIMITIVE_NAMES) == 6
    data, train, gates_dir, bundle_dir = (tmp_path / d for d in ("data", "train", "validate", "bundle"))

    # generate: no size named for count_tasks -> its spec's default_size (8), like every other here
    sizes = {p: 8 for p in PRIMITIVE_NAMES if p != "count_tasks"}
    stats = generate(
        DataConfig(solutions=[str(FIX)], output_dir=str(data), sizes=sizes, validation_fraction=0.25, workers=1)
    )
    toy_stats = stats["primitives"]["count_tasks"]
    assert (
        toy_stats["requested"] == 8 and toy_stats["train"]["examples"] >= 1 and toy_stats["validation"]["examples"] >= 1
    )
    assert stats["spec_hashes"]["count_tasks"] == toy.spec_hash
    rows = [
        json.loads(x)
        for s in ("train", "validation")
        for x in (data / "count_tasks" / f"{s}.jsonl").read_text().splitlines()
    ]
    for row in rows:  # rendered by the spec, answered by its oracle from the annotation
        assert row["prompt"] == toy.messages(CountTasksInput.model_validate_json(row["input"]))
        assert (
            row["completion"][0]["content"] == toy.target_text(row["target"])
            and 1 <= row["target"]["count"] <= MAX_TASKS
        )

    # train: one adapter per registered primitive, the toy's among them
    cfg = config_from_overrides(
        [
            "primitive=all",
            "model=tiny",
            "model.pretrain=null",
            "model.tiny.vocab_size=1024",
            "train=quick",
            "train.max_steps=2",
            "train.max_eval_examples=2",
            "train.em_eval_steps=null",
            "train.eval_strategy=no",
            "logging=none",
            "logging.progress=false",
            f"dataset_dir={data}",
            f"output_dir={train}",
        ]
    )
    results = run(cfg)
    assert set(PRIMITIVE_NAMES) <= set(results) and results["count_tasks"].metrics["global_step"] == 2

    # validate: the toy's gate uses its spec's threshold, its contract and exact-match rule
    vcfg = ValidateConfig(
        train_dir=str(train),
        dataset_dir=str(data),
        output_dir=str(gates_dir),
        max_examples=2,
        max_new_tokens=8,
        base_comparison=False,
        compare_decoding=False,
        decoding="constrained",
        device="cpu",
    )
    gates = run_validation(vcfg)
    gate = gates["primitives"]["count_tasks"]
    assert gate["threshold"] == 0.5 and gate["spec_hash"] == toy.spec_hash and gate["n"] == 2
    assert (
        gate["parse_rate"] == 1.0 and gate["contract_valid_rate"] == 1.0
    )  # constrained decoding by the spec's decoding schema
    assert "| count_tasks |" in (gates_dir / "gates.md").read_text()

    # package: a smoke bundle (a one-step random model fails gates) holding the toy's adapter
    package(
        PackageConfig(
            train_dir=str(train),
            validate_dir=str(gates_dir),
            dataset_dir=str(data),
            output_dir=str(bundle_dir),
            allow_failed_gates=True,
        )
    )
    bundle = load_bundle(bundle_dir, spec_hashes(), allow_smoke=True)
    assert bundle.manifest["primitives"]["count_tasks"]["spec_hash"] == toy.spec_hash

    # kernel: the one kernel step that calls it, placed in the real kernel program (before decompose,
    # on the same request), run by Kernel.run_turn with the bundle's hf backend on a real domain turn
    backend = HFBackend.from_bundle(bundle_dir, device="cpu", allow_smoke=True, max_new_tokens=16)
    assert backend._constrained("count_tasks")  # decoded as its gate was measured
    kernel = Kernel(KernelConfig(retries=0, backend_retries=0))
    root = kernel.program.root
    assert [s.label for s in root.steps[:3]] == ["init_scratchpad", "init_decompose", "decompose"]
    kernel.program = Program(
        Sequence(*root.steps[:2], count_tasks_step(toy, kernel.config), *root.steps[2:], label="kernel"),
        name=kernel.program.name,
    )
    env = Environment(["file_system"])
    result, trace = kernel.run_turn(
        user="Go to the archive folder and list it",
        env=env,
        scratchpad=Scratchpad({}),
        registry=env.registry(),
        backend=backend,
        trace="full",
    )
    assert result.backend_error is None
    toy_calls = [r for r in trace if r.primitive == "count_tasks" and r.kind == "slm"]
    assert len(toy_calls) == 1 and toy_calls[0].contract["ok"] and 0 <= toy_calls[0].output["count"] <= MAX_TASKS
    # the turn went on from the toy's step into decompose (what the random adapters answer there is not the point)
    assert any(r.primitive == "decompose" for r in trace)
    # the answer it accepted is the toy's decision in the turn's generic map, and the trace views show it
    assert result.decisions["count_tasks"] == {"turn": toy_calls[0].output}
    _assert_shown(result, trace, toy_calls[0].output["count"])


def test_the_toy_prompt_is_written_by_the_adapter_from_its_types(toy):
    """No render function: the instructions are the spec's, the rest is derived from the two types."""
    from forethought.kernel.specs.adapter import answer_format

    assert not hasattr(toy, "render_user")
    assert answer_format(CountTasksOutput) == 'Answer with JSON: {"count": n}.'
    assert toy.messages(CountTasksInput(user="Go to the archive folder and list it")) == [
        {
            "role": "system",
            # the instructions, the output field's Field(description=...), the answer format written from the type
            "content": "Count the unit tasks the request asks for. Count one task per tool call. "
            'Answer with JSON: {"count": n}.',
        },
        # one "Label: value" line per input field, the label from the field's Label metadata
        {"role": "user", "content": "Request: Go to the archive folder and list it"},
    ]


def test_the_toy_decisions_reach_the_turn_result_the_html_trace_and_the_responder(toy):
    """The toy's step in the kernel program, answered by the oracle from a worked solution's annotation (no model):
    its decision is in TurnResult.decisions and both trace views show it, though no code of theirs names it."""
    from forethought.kernel.program import Kernel
    from forethought.kernel.records import KernelConfig
    from forethought.kernel.runner import oracle_factory, run_solution
    from forethought.kernel.solution_file import load_solution
    from forethought.primitives import Program

    kernel = Kernel(KernelConfig(retries=0, strict_invariants=True))
    root = kernel.program.root
    kernel.program = Program(
        Sequence(*root.steps[:2], count_tasks_step(toy, kernel.config), *root.steps[2:], label="kernel"),
        name=kernel.program.name,
    )
    sol = load_solution(SOLUTIONS / "file_system" / "paper_figure1.json").rendered()
    run = run_solution(sol, kernel, oracle_factory(sol), trace="off")  # recorded at every trace level
    for turn, annotated in zip(run.turns, sol.turns, strict=True):
        assert turn.decisions["count_tasks"] == {"turn": {"count": len(annotated.tasks or [])}}
    _assert_shown(run.turns[0], run.traces[0], len(sol.turns[0].tasks or []))


def _assert_shown(result, trace, count: int) -> None:
    from forethought.bench import responder
    from forethought.kernel.trace_html import render_html

    page = render_html("toy", [result], [trace])
    # numbered by its place in the registry (the sixth), titled from its name, its value under its field's name
    assert f"<span class='sp'>6. Count-Tasks:</span> count = <code>{count}</code>" in page
    text = responder.render_turn(result.user, result, trace)
    assert f"## Decisions (other primitives)\n- count (count_tasks): {count}\n" in text


def count_tasks_step(spec, config):
    """The kernel step for the toy: the decompose input in, the toy's answer recorded, the same input out."""
    from forethought.kernel.program import _symbolic_step
    from forethought.kernel.specs import DecomposeInput

    def ask(decompose_input: DecomposeInput, turn) -> CountTasksInput:
        turn.pending_decompose = decompose_input  # carried across the SLM step, whose input and output its spec fixes
        return CountTasksInput(user=decompose_input.user)

    def resume(answer: CountTasksOutput, turn) -> DecomposeInput:
        return turn.pending_decompose

    return Sequence(
        _symbolic_step("ask_count_tasks", ask, DecomposeInput, CountTasksInput),
        Step(spec.primitive(max_tasks=config.max_tasks), retries=config.retries, label="count_tasks"),
        _symbolic_step("resume_decompose", resume, CountTasksOutput, DecomposeInput),
        label="count_tasks_step",
    )
