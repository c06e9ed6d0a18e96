"""The transformers + peft backend (kernel/backends/hf.py) on tiny random Gemma 3 models built in-process.

Nothing is downloaded: tokenizers are byte-level BPEs trained on a few strings, models are random
``Gemma3ForCausalLM``s of a few hundred thousand parameters, LoRA adapters are randomly initialised.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from pydantic import BaseModel  # noqa: E402

from forethought.kernel.backends import hf  # noqa: E402
from forethought.primitives import SLMRequest  # noqa: E402

CORPUS = [
    "stop after 1 stop after 2 stop after 3",
    "Summarise the request: list the files, then read one.",
    '{"tool_name": "ls", "ordered_task_ids": ["t1", "t2"]}',
    "A B A B hello world",
] * 20
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PLAIN = (  # a template whose turns end in plain text: no end-of-turn token to derive
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


def gemma_tokenizer():
    from forethought.training.tiny import build_tokenizer

    return build_tokenizer(CORPUS, 320)


def chatml_tokenizer(template: str = CHATML):
    """A non-Gemma tokenizer: ChatML turns, ``</s>`` as eos, no ``<end_of_turn>`` in the vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<pad>", "</s>", "<s>", "<unk>", "<|im_start|>", "<|im_end|>"]
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=320,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        extra_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    fast.chat_template = template
    return fast


def tiny_model(tok, seed: int = 0, sliding_window: int = 16):
    from transformers import Gemma3ForCausalLM

    from forethought.training.config import TinyShape
    from forethought.training.tiny import tiny_text_config

    shape = TinyShape(hidden_size=64, intermediate_size=128, num_layers=2, sliding_window=sliding_window)
    torch.manual_seed(seed)
    return Gemma3ForCausalLM(tiny_text_config(shape, tok)).eval()


@pytest.fixture(scope="module")
def gemma():
    tok = gemma_tokenizer()
    return tiny_model(tok), tok


def _msgs(*users: str) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": u}] for u in users]


# ------------------------------------------------------------------ stop tokens (derived from the template)
def test_stop_ids_come_from_the_chat_template():
    gemma_tok = gemma_tokenizer()
    eot = gemma_tok.convert_tokens_to_ids("<end_of_turn>")
    assert hf.template_stop_ids(gemma_tok) == [eot]
    assert hf.stop_ids(gemma_tok) == [
        eot,
        gemma_tok.eos_token_id,
    ]  # end of turn first: constrained decoding uses it as EOS

    chatml_tok = chatml_tokenizer()
    im_end = chatml_tok.convert_tokens_to_ids("<|im_end|>")
    assert hf.template_stop_ids(chatml_tok) == [im_end]
    assert hf.stop_ids(chatml_tok) == [
        im_end,
        chatml_tok.eos_token_id,
    ]  # the hard-coded <end_of_turn> would have missed <|im_end|>


def test_stop_ids_fall_back_to_end_of_turn_and_add_the_model_eos():
    gemma_tok = gemma_tokenizer()
    eot, eos = gemma_tok.convert_tokens_to_ids("<end_of_turn>"), gemma_tok.eos_token_id
    gemma_tok.chat_template = None  # no template: nothing to derive
    assert hf.template_stop_ids(gemma_tok) == [] and hf.stop_ids(gemma_tok) == [eot, eos]
    gemma_tok.chat_template = PLAIN  # turns end in plain text: nothing to derive either
    assert hf.template_stop_ids(gemma_tok) == [] and hf.stop_ids(gemma_tok) == [eot, eos]
    chatml_tok = chatml_tokenizer(PLAIN)  # no template token and no <end_of_turn>: eos only
    assert hf.stop_ids(chatml_tok) == [chatml_tok.eos_token_id]

    class Model:
        class generation_config:
            eos_token_id = [eos, 7]

    assert hf.stop_ids(gemma_tok, Model()) == [eot, eos, 7]


class _Scripted:
    """Forward hook: row r emits "A" k_r times (k_r read from its prompt, "stop after k"), then the end-of-turn
    token, then "B" for ever. If decoding did not stop on the end-of-turn token, "B"s would follow."""

    def __init__(self, tok, eot: int):
        self.tok, self.eot = tok, eot
        self.a, self.b = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
        self.k: list[int] = []
        self.step = 0
        self.forwards = 0

    def __call__(self, module, args, kwargs, output):
        ids = kwargs["input_ids"]
        if ids.shape[1] > 1:  # prefill: a new generate call
            self.k = [int(re.search(r"stop after (\d)", self.tok.decode(row)).group(1)) for row in ids]
            self.step = 0
        else:
            self.step += 1
        self.forwards += 1
        logits = output.logits
        for row_index, k in enumerate(self.k):
            target = self.a if self.step < k else self.eot if self.step == k else self.b
            logits[row_index, -1, :] = -1e4
            logits[row_index, -1, target] = 1e4
        return output


@pytest.mark.parametrize("kind", ["gemma", "chatml"])
def test_decoding_stops_at_the_end_of_turn_token(kind):
    tok = gemma_tokenizer() if kind == "gemma" else chatml_tokenizer()
    model = tiny_model(tok)
    eot = tok.convert_tokens_to_ids("<end_of_turn>" if kind == "gemma" else "<|im_end|>")
    model.generation_config.eos_token_id = tok.eos_token_id  # only the tokenizer/template may supply the end of turn
    script = _Scripted(tok, eot)
    handle = model.register_forward_hook(script, with_kwargs=True)
    try:
        out = hf.generate(
            model,
            tok,
            _msgs("stop after 3", "stop after 1", "please stop after 2"),
            adapter=None,
            batch_size=3,
            max_new_tokens=20,
        )
    finally:
        handle.remove()
    assert out == ["AAA", "A", "AA"]
    assert script.forwards == 4  # one batch, stopped when its last row ended (3 tokens + end of turn), not at 20


# ------------------------------------------------------------------ batching
def test_batched_greedy_outputs_equal_per_example_outputs(gemma):
    model, tok = gemma
    prompts = _msgs(
        "hi", "list the files, then read one " * 3, '{"tool_name": "ls"}', "A B A B hello world " * 2, "stop"
    )
    batched = hf.generate(model, tok, prompts, adapter=None, batch_size=4, max_new_tokens=8)
    single = [hf.generate(model, tok, [p], adapter=None, batch_size=1, max_new_tokens=8)[0] for p in prompts]
    assert batched == single
    assert len(set(single)) > 1  # the prompts really lead to different completions


# ------------------------------------------------------------------ adapters
class _In(BaseModel):
    value: int = 0


@pytest.fixture(scope="module")
def two_adapters():
    """A base model with two randomly initialised LoRA adapters, and the base model's own outputs (before wrapping)."""
    from peft import LoraConfig, get_peft_model

    tok = gemma_tokenizer()
    model = tiny_model(tok, seed=3)
    prompts = _msgs("list the files", "hello world, then read one")
    base_out = hf.generate(model, tok, prompts, adapter=None, max_new_tokens=6)

    def cfg():
        return LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)

    torch.manual_seed(11)
    peft_model = get_peft_model(model, cfg(), adapter_name="decompose")
    torch.manual_seed(12)
    peft_model.add_adapter("match_func", cfg())
    peft_model.eval()
    return peft_model, tok, prompts, base_out


def test_requests_are_grouped_and_routed_to_their_adapter(two_adapters, monkeypatch):
    model, tok, prompts, base_out = two_adapters
    want = {a: hf.generate(model, tok, prompts, adapter=a, max_new_tokens=6) for a in ("decompose", "match_func")}
    assert want["decompose"] != want["match_func"]  # the two adapters have different effects
    assert base_out not in (want["decompose"], want["match_func"])
    assert hf.generate(model, tok, prompts, adapter=hf.BASE, max_new_tokens=6) == base_out  # BASE disables adapters

    calls = []
    real = hf.generate

    def spy(model, tokenizer, messages, *, adapter, **kw):
        calls.append((adapter, len(messages)))
        return real(model, tokenizer, messages, adapter=adapter, **kw)

    monkeypatch.setattr(hf, "generate", spy)
    backend = hf.HFBackend(model, tok, batch_size=2, max_new_tokens=6, model_id="tiny")
    reqs = [
        SLMRequest("decompose", _In(), prompts[0]),
        SLMRequest("match_func", _In(), prompts[0]),
        SLMRequest("decompose", _In(), prompts[1]),
        SLMRequest("match_func", _In(), prompts[1]),
        SLMRequest("decompose", _In(), prompts[1], adapter="match_func"),  # an explicit adapter wins over the primitive
    ]
    replies = backend.complete(reqs)
    assert sorted(calls) == [("decompose", 2), ("match_func", 3)]  # one generate call per adapter
    assert [r.text for r in replies] == [
        want["decompose"][0],
        want["match_func"][0],
        want["decompose"][1],
        want["match_func"][1],
        want["match_func"][1],
    ]
    assert [r.model["adapter"] for r in replies] == ["decompose", "match_func", "decompose", "match_func", "match_func"]
    assert all(r.model["backend"] == "hf" and r.model["model"] == "tiny" for r in replies)


def test_an_unknown_adapter_or_primitive_is_a_clear_error(two_adapters):
    model, tok, prompts, _ = two_adapters
    backend = hf.HFBackend(model, tok, max_new_tokens=2)
    with pytest.raises(KeyError, match=r"no adapter named 'get_order' \(loaded: \['decompose', 'match_func'\]\)"):
        backend.complete([SLMRequest("get_order", _In(), prompts[0])])
    with pytest.raises(KeyError, match=r"no adapter named 'decompose_v2'"):
        backend.complete([SLMRequest("decompose", _In(), prompts[0], adapter="decompose_v2")])


def test_the_hf_backend_decodes_as_the_bundle_gates_were_measured(monkeypatch):
    """backend.constrained=null takes the bundle's manifest.decoding, per primitive; an explicit setting wins."""
    from types import SimpleNamespace

    from forethought.kernel.backends.hf import HFBackend

    def fake_bundle(decoding):
        return SimpleNamespace(
            smoke=False,
            path="b",
            base_id="base",
            manifest={"decoding": decoding},
            load_model=lambda device: (SimpleNamespace(peft_config={}), None),
        )

    recorded = {"decompose": "free", "match_func": "constrained"}
    monkeypatch.setattr(hf, "bundle_tool_rendering", lambda path: "full")
    monkeypatch.setattr(hf, "bundle_stores", lambda path: [])
    monkeypatch.setattr(hf, "load_bundle", lambda path, spec_hashes, allow_smoke=False: fake_bundle(recorded))
    backend = HFBackend.from_bundle("b", device="cpu")
    assert (backend._constrained("decompose"), backend._constrained("match_func")) == (False, True)
    for explicit in (True, False):
        backend = HFBackend.from_bundle("b", device="cpu", constrained=explicit)
        assert (backend._constrained("decompose"), backend._constrained("match_func")) == (explicit, explicit)


def test_the_pieces_tokenizer_gives_a_word_one_token_wherever_it_stands():
    # The structure split makes "Check the tire pressure" and check_tire_pressure two opaque tokens; a model trained
    # from scratch then cannot see that a new wording names the tool (docs/training.md, "The tokenizer").
    from forethought.training.tiny import build_tokenizer

    corpus = ["Check the tire pressure", "- check_tire_pressure(): Read the pressure", "displayCarStatus", '"I-501"']
    pieces = build_tokenizer(corpus * 20, 400, "pieces")

    def tokens(tok, text):
        return tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])

    request, name = tokens(pieces, "Check the tire pressure"), tokens(pieces, "check_tire_pressure")
    assert {"tire", "pressure"} <= set(request) & set(name)
    assert tokens(pieces, "displayCarStatus") == ["display", "Car", "Status"]
    for text in [*corpus, "Zoë’s café on 2026-12-05"]:  # every text round-trips, unknown letters included
        assert pieces.decode(pieces(text, add_special_tokens=False)["input_ids"]) == text
    structure = build_tokenizer(corpus * 20, 400, "structure")
    assert not {"tire", "pressure"} & set(tokens(structure, "check_tire_pressure"))
