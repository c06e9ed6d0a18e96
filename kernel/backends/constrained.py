"""Contract-compiled decoding for the hf backend (llguidance).

At each step the logits of tokens that cannot continue an answer of the
request's decoding schema (kernel/decoding.py: the primitive's contract
compiled into a grammar, in the JSON text format the models are trained on)
are set to -inf, so every completion parses, names only registered tools and
parameters and takes only grounded values; the contract still checks it.
"""

from __future__ import annotations

from typing import Any

from ..decoding import compile_grammar

_TOKENIZERS: dict[tuple[int, int], Any] = {}


def _lltokenizer(tokenizer: Any, n_vocab: int, eos: list[int]) -> Any:
    try:
        import llguidance.hf
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise RuntimeError("constrained decoding needs llguidance: pip install llguidance") from exc
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
        for schema in self.schemas:
            if schema is None:
                self.matchers.append(None)
                continue
            self.matchers.append(llguidance.LLMatcher(lltok, compile_grammar(schema)))
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
            for i, matcher in enumerate(self.matchers):
                if self.done[i] or matcher is None:
                    continue
                if last[i] in self.eos or not matcher.consume_token(last[i]):
                    self.done[i] = True
        self.started = True
        mask = allocate_token_bitmask(batch, n_vocab)
        for i, matcher in enumerate(self.matchers):
            if not self.done[i] and matcher is not None:
                fill_next_token_bitmask(matcher, mask, i)  # once the value is complete: only the end-of-turn token
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
