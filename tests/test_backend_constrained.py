"""JSON-schema-constrained decoding: even a random model's outputs parse and name only what exists."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("llguidance")

from forethought.kernel.backends.hf import generate  # noqa: E402
from forethought.kernel.specs import SPECS, DecomposeInput, GetOrderInput, MatchFuncInput, TaskRef, ToolBrief  # noqa: E402

TOOLS = [
    ToolBrief(name=n, description=f"{n} tool", params={"x": "string"}, required=["x"])
    for n in ("cd", "ls", "mkdir", "grep")
]


@pytest.fixture(scope="module")
def model_and_tokenizer():
    import torch
    from transformers import Gemma3ForCausalLM

    from forethought.training.config import TinyShape
    from forethought.training.tiny import build_tokenizer, tiny_text_config

    texts = [
        json.dumps({"tool_name": t.name, "ordered_task_ids": ["t1", "t2"]}) + " Task: list files " for t in TOOLS
    ] * 40
    tok = build_tokenizer(texts, 400)
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(
        tiny_text_config(TinyShape(hidden_size=64, intermediate_size=128, num_layers=2), tok)
    ).eval()
    return model, tok


def _run(model, tok, spec, inputs, max_new_tokens=48):
    msgs = [spec.messages(i) for i in inputs]
    schemas = [spec.decoding_schema(i) for i in inputs]
    return generate(model, tok, msgs, adapter=None, max_new_tokens=max_new_tokens, batch_size=4, schemas=schemas)


def test_match_func_outputs_are_registered_tools_by_construction(model_and_tokenizer):
    model, tok = model_and_tokenizer
    spec = SPECS["match_func"]
    inputs = [MatchFuncInput(task=TaskRef(id=f"t{i}", text=f"do thing {i}"), tools=TOOLS) for i in range(4)]
    for inp, out in zip(inputs, _run(model, tok, spec, inputs), strict=False):
        assert spec.check_output(inp, json.loads(out)).ok, out  # type and value levels hold


def test_get_order_outputs_are_permutations_by_construction(model_and_tokenizer):
    model, tok = model_and_tokenizer
    spec = SPECS["get_order"]
    inputs = [GetOrderInput(user="u", tasks=[TaskRef(id=f"t{j}", text="x") for j in range(1, 4)]) for _ in range(2)]
    for _inp, out in zip(inputs, _run(model, tok, spec, inputs), strict=False):
        parsed = json.loads(out)
        assert sorted(parsed["ordered_task_ids"]) == ["t1", "t2", "t3"]


def test_unconstrained_random_model_does_not_parse(model_and_tokenizer):
    """The control: without the grammar, the same random model produces no valid JSON."""
    model, tok = model_and_tokenizer
    spec = SPECS["match_func"]
    inputs = [MatchFuncInput(task=TaskRef(id="t1", text="do thing"), tools=TOOLS)]
    out = generate(model, tok, [spec.messages(i) for i in inputs], adapter=None, max_new_tokens=24)
    from pydantic import ValidationError

    with pytest.raises((json.JSONDecodeError, ValidationError)):
        spec.output_type.model_validate(json.loads(out[0]))


def test_decompose_schema_is_valid_and_bounded():
    spec = SPECS["decompose"]
    schema = spec.decoding_schema(DecomposeInput(user="u", tools=TOOLS))
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)
    variants = schema["properties"]["tasks"]["items"]["anyOf"]  # one per registered tool, and one for "no listed tool"
    assert [v["properties"]["tool_name"]["const"] for v in variants] == ["cd", "ls", "mkdir", "grep", None]
    assert [list(v["properties"]["parameters"]["properties"]) for v in variants] == [["x"]] * 4 + [[]]
    assert schema["properties"]["tasks"]["maxItems"] == 12  # the kernel's declared fan-out
