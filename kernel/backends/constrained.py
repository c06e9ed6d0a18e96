"""JSON-schema-constrained decoding for the hf backend (optional; needs ``llguidance``).

At each step the logits of tokens that cannot continue a JSON value of the
primitive's output schema are set to -inf, so every completion parses and
the type level of the contract holds by construction (value and semantic
checks still run). Install with ``pip install 'forethought[constrained]'``.
"""

from __future__ import annotations

import json
from typing import Any

_TOKENIZERS: dict[tuple[int, int], Any] = {}


def _lltokenizer(tokenizer: Any, n_vocab: int, eos: list[int]) -> Any:
    try:
        import llguidance.hf
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise RuntimeError("constrained decoding needs llguidance: pip install 'forethought[constrained]'") from exc
    key = (id(tokenizer), n_vocab)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = (tokenizer, llguidance.hf.from_tokenizer(tokenizer, n_vocab=n_vocab, eos_token=eos[0]))
    return _TOKENIZERS[key][1]


class SchemaLogitsProcessor:
    """A transformers logits processor holding one grammar matcher per batch row."""

    def __init__(self, tokenizer: Any, schemas: list[dict[str, Any] | None], eos: list[int]):
        self.tokenizer = tokenizer
        self.schemas = schemas
        self.eos = eos
        self.matchers: list[Any] | None = None
        self.done: list[bool] = []
        self.started = False

    def _init(self, n_vocab: int) -> None:
        import llguidance

        lltok = _lltokenizer(self.tokenizer, n_vocab, self.eos)
        self.matchers = []
        for s in self.schemas:
            if s is None:
                self.matchers.append(None)
                continue
            grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(s), defaults={"whitespace_flexible": False})
            self.matchers.append(llguidance.LLMatcher(lltok, grammar))
        self.done = [m is None for m in self.matchers]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch
        from llguidance.torch import allocate_token_bitmask, fill_next_token_bitmask

        batch, n_vocab = scores.shape
        if self.matchers is None:
            self._init(n_vocab)
        assert self.matchers is not None
        if self.started:
            last = input_ids[:, -1].tolist()
            for i, m in enumerate(self.matchers):
                if self.done[i] or m is None:
                    continue
                if last[i] in self.eos or not m.consume_token(last[i]):
                    self.done[i] = True
        self.started = True
        mask = allocate_token_bitmask(batch, n_vocab)
        for i, m in enumerate(self.matchers):
            if not self.done[i] and m is not None:
                fill_next_token_bitmask(m, mask, i)  # once the value is complete: only the end-of-turn token
        # Unpack the 32-bit words into a boolean [batch, vocab] mask (no torch.compile needed).
        bits = (mask.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1
        allowed = bits.reshape(batch, -1)[:, :n_vocab].bool().to(scores.device)
        for i in range(batch):
            if self.done[i] or self.matchers[i] is None:
                allowed[i] = True  # finished rows are padded anyway
        return scores.masked_fill(~allowed, float("-inf"))


def schema_logits_processor(tokenizer: Any, schemas: list[dict[str, Any] | None], eos: list[int]):
    from transformers import LogitsProcessorList

    return LogitsProcessorList([SchemaLogitsProcessor(tokenizer, schemas, eos)])
