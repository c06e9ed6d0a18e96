"""transformers + peft backend: one base model, one named LoRA adapter per primitive.

Requests are grouped by adapter; each group is decoded greedily in batches
(left padding, KV cache), stopping on the chat template's end-of-turn token
(derived from the template, ``<end_of_turn>`` as the fallback) as well as the
tokenizer's and the model's eos. The same batched generator is used by ``forethought
validate``, so gates measure exactly what the kernel will run.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from forethought.bundle.manifest import bundle_tool_rendering, load_bundle
from forethought.primitives import SLMReply, SLMRequest

from ..specs import bundle_stores, set_stores, set_tool_rendering, spec_hashes

BASE = "__base__"  # generate with every adapter disabled


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


# Used when the chat template does not reveal its end-of-turn token (Gemma's names).
FALLBACK_STOP_TOKENS = ("<end_of_turn>", "<eos>")
_PROBE = "ForethoughtStopProbe"


def _special_ids(tokenizer: Any) -> set[int]:
    ids = {i for i in (getattr(tokenizer, "all_special_ids", None) or []) if isinstance(i, int)}
    for token_id, token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(token, "special", False):
            ids.add(token_id)
    return ids


def template_stop_ids(tokenizer: Any) -> list[int]:
    """The special token the chat template writes right after an assistant message (its end-of-turn token).

    Renders a one-exchange conversation and tokenizes what follows the assistant's content: Gemma's
    ``<end_of_turn>``, ChatML's ``<|im_end|>``, Llama 3's ``<|eot_id|>``. Empty when there is no template,
    it cannot be rendered, or what follows the content does not start with a special token.
    """
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": _PROBE}], tokenize=False
        )
    except Exception:
        return []
    if not isinstance(text, str) or _PROBE not in text:
        return []
    tail = text[text.rindex(_PROBE) + len(_PROBE) :]
    if not tail:
        return []
    try:
        ids = tokenizer(tail, add_special_tokens=False)["input_ids"]
    except Exception:
        return []
    special = _special_ids(tokenizer)
    return [ids[0]] if ids and ids[0] in special else []


def stop_ids(tokenizer: Any, model: Any = None) -> list[int]:
    """Token ids that end a completion, the end-of-turn token first (constrained decoding uses it as EOS).

    The chat template's end-of-turn token (:func:`template_stop_ids`; :data:`FALLBACK_STOP_TOKENS` when it
    cannot be derived), the tokenizer's eos token, and the eos ids of the model's generation config.
    """
    ids: list[int] = []

    def add(token_id: Any) -> None:
        if isinstance(token_id, int) and token_id >= 0 and token_id != tokenizer.unk_token_id and token_id not in ids:
            ids.append(token_id)

    derived = template_stop_ids(tokenizer)
    for token_id in derived:
        add(token_id)
    if not derived:
        for token in FALLBACK_STOP_TOKENS:
            add(tokenizer.convert_tokens_to_ids(token))  # an unknown token maps to unk (or None): skipped
    add(tokenizer.eos_token_id)
    gen = getattr(model, "generation_config", None) if model is not None else None
    eos = getattr(gen, "eos_token_id", None)
    for token_id in eos if isinstance(eos, (list, tuple)) else [eos]:
        add(token_id)
    return ids


def render_prompts(tokenizer: Any, messages: Sequence[list[dict[str, str]]]) -> list[str]:
    return [tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False) for m in messages]


def generate(
    model: Any,
    tokenizer: Any,
    messages: Sequence[list[dict[str, str]]],
    *,
    adapter: str | None,
    batch_size: int = 16,
    max_new_tokens: int = 384,
    schemas: Sequence[dict[str, Any] | None] | None = None,
    on_batch: Any = None,
) -> list[str]:
    """Greedy completions for chat prompts with one adapter (or ``BASE`` for none).

    With ``schemas`` (one JSON schema per prompt), decoding is constrained so
    each completion is valid JSON of that schema.
    """
    import contextlib

    import torch

    if adapter is not None and adapter != BASE and hasattr(model, "set_adapter"):
        model.set_adapter(adapter)
    ctx = model.disable_adapter() if adapter == BASE and hasattr(model, "disable_adapter") else contextlib.nullcontext()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    texts = render_prompts(tokenizer, messages)
    # Longest first: batches of similar length waste less padding; results are put back in order.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    out: list[str] = [""] * len(texts)
    device = next(model.parameters()).device
    eos = stop_ids(tokenizer, model)
    with ctx, torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            # The template already starts with <bos>: no second one (trl PR #3328).
            enc = tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False).to(
                device
            )
            kwargs: dict[str, Any] = {}
            if schemas is not None:
                from .constrained import schema_logits_processor

                kwargs["logits_processor"] = schema_logits_processor(tokenizer, [schemas[i] for i in idx], eos)
            gen = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                eos_token_id=eos,
                pad_token_id=tokenizer.pad_token_id,
                use_cache=True,
                **kwargs,
            )
            new = gen[:, enc["input_ids"].shape[1] :]
            for j, i in enumerate(idx):
                out[i] = tokenizer.decode(new[j], skip_special_tokens=True).strip()
            if on_batch is not None:
                on_batch(len(idx))
    return out


class HFBackend:
    name = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 16,
        max_new_tokens: int = 384,
        constrained: bool | Mapping[str, bool] = False,
        model_id: str = "",
        bundle: Any = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.constrained = constrained  # for every adapter, or per adapter (a primitive's name)
        self.model_id = model_id
        self.bundle = bundle
        self.adapters = set(getattr(model, "peft_config", {}) or {})

    @classmethod
    def from_bundle(
        cls,
        path: str | Path,
        *,
        device: str = "auto",
        batch_size: int = 16,
        max_new_tokens: int = 384,
        constrained: bool | None = None,
        allow_smoke: bool = False,
    ) -> HFBackend:
        """``constrained=None`` decodes each primitive as its gate was measured (the manifest's ``decoding``); the prompts
        are rendered as the adapters were trained (the manifest's ``tool_rendering``, and the demonstrations it carries
        retrieved from, both set for this process)."""
        set_tool_rendering(bundle_tool_rendering(path))
        set_stores(bundle_stores(path))
        bundle = load_bundle(path, spec_hashes(), allow_smoke=allow_smoke)
        if bundle.smoke:
            print(
                f"WARNING: bundle {bundle.path} is marked SMOKE: one or more adapters FAILED their validation gates "
                "(written with allow_failed_gates=true). Its outputs are not fit for use beyond smoke tests.",
                file=sys.stderr,
            )
        if constrained is None:
            constrained = {name: d == "constrained" for name, d in bundle.manifest["decoding"].items()}
        model, tok = bundle.load_model(pick_device(device))
        return cls(
            model,
            tok,
            batch_size=batch_size,
            max_new_tokens=max_new_tokens,
            constrained=constrained,
            model_id=bundle.base_id,
            bundle=bundle,
        )

    def _constrained(self, adapter: str) -> bool:
        if isinstance(self.constrained, Mapping):
            return bool(self.constrained.get(adapter, False))
        return bool(self.constrained)

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        groups: dict[str, list[int]] = defaultdict(list)
        for i, request in enumerate(requests):
            groups[request.adapter or request.primitive].append(i)
        out: list[SLMReply | None] = [None] * len(requests)
        for adapter, idx in groups.items():
            if self.adapters and adapter not in self.adapters:
                raise KeyError(f"hf backend: no adapter named {adapter!r} (loaded: {sorted(self.adapters)})")
            reqs = [requests[i] for i in idx]
            texts = generate(
                self.model,
                self.tokenizer,
                [r.messages for r in reqs],
                adapter=adapter,
                batch_size=self.batch_size,
                max_new_tokens=self.max_new_tokens,
                schemas=[r.json_schema for r in reqs] if self._constrained(adapter) else None,
            )
            meta = {"backend": "hf", "model": self.model_id, "adapter": adapter}
            if self.bundle is not None:
                meta["bundle"] = str(self.bundle.path)
                meta["adapter_sha256"] = self.bundle.adapter_digest(adapter)
            for i, text in zip(idx, texts, strict=False):
                out[i] = SLMReply(text, dict(meta))
        return out  # type: ignore[return-value]
