"""Contract-compiled decoding: what a primitive's contract can check, compiled into the grammar of its answer.

Each primitive's output contract judges an answer after it is written (kernel/specs/). Much of what it
checks is known before a token is decoded: the registry's tool names, the chosen tool's parameter names,
the batch's task ids, and the values a grounded parameter may take — spans of the request at word
boundaries, the context's and the scratchpad's values, the documented options of an enum, the numbers the
text states. This module turns that knowledge into a JSON schema per request, so a decoder that follows the
schema (llguidance in the hf backend, a vLLM server's structured outputs over the openai backend) cannot
write a tool that is not registered, a parameter the tool lacks, or a value that appears nowhere.

Two rules keep it honest:

- **It admits every answer the contract accepts that our data can hold** (tests/test_decoding_coverage.py
  measures it on every train and validation target; the exceptions are listed there and in
  docs/kernel.md). A grammar that refused a contract-valid target would teach the decoder to be wrong.
- **It never replaces the contract**: the contract still checks every answer (a composed value, the
  dependency structure and a fan-out's fields stay the contract's).

The JSON text format is the one the models are trained on (:data:`JSON_FORMAT`: ``", "`` and ``": "``
separators, no other whitespace, as ``PrimitiveSpec.target_text`` writes it). It travels inside each schema
as ``x-guidance``, the key llguidance reads, so a server using llguidance applies the same format.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .grounding import (
    CONNECTIVE_PUNCTUATION,
    FUNCTION_WORDS,
    MAX_COMPOSED_WORDS,
    PIECES,
    collect_leaves,
    number_tokens,
    synonym_table,
)

# The separators of PrimitiveSpec.target_text (json.dumps(..., separators=(", ", ": "))), and no other whitespace.
JSON_FORMAT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

# A string of more words than this is grounded only as a whole (grounding.MAX_COMPOSED_WORDS): such a value of the
# context or the scratchpad is offered whole.
FREE_TEXT = {"type": "string", "maxLength": 160}
_REGEX_META = set("\\.+*?()|[]{}^$#&-~")
_WORD, _OTHER = 1, 3


def _regex_literal(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


# Inside a word, these joiners bound a word too ("IAH-BOS" names IAH, "John's" names John), "." and "@" do not
# ("report" does not occur in "report.txt"): grounding.Haystack._occurs.
_INNER_BOUNDARY = re.compile(r"([-/+':])")


def _words_and_symbols(text: str) -> tuple[set[str], set[str]]:
    """The words of ``text`` (and the pieces its inner joiners bound) and its meaningful symbols (``$``, ``%``): the
    parts a grounded string is built from."""
    words: set[str] = set()
    symbols: set[str] = set()
    for match in PIECES.finditer(text):
        if match.lastindex == _WORD:
            # every run of the pieces its inner joiners bound: "Coca-Cola's" gives "Coca-Cola", "Cola's", "Coca", ...
            pieces = _INNER_BOUNDARY.split(match.group())  # [piece, joiner, piece, ...]
            for i in range(0, len(pieces), 2):
                for j in range(i, len(pieces), 2):
                    if pieces[i] and pieces[j]:
                        words.add("".join(pieces[i : j + 1]))
        elif match.lastindex == _OTHER and match.group() not in CONNECTIVE_PUNCTUATION and not match.group().isspace():
            symbols.add(match.group())
    return words, symbols


def _case_forms(word: str) -> set[str]:
    """The spellings a value may give a word: as written, lower case, upper case, capitalised. The contract folds
    case entirely; offering every mix of cases would let a decoder spell "ReaD_WRite", one token at a time."""
    return {word, word.lower(), word.upper(), word[:1].upper() + word[1:].lower()}


def _char_class(chars: set[str] | frozenset[str], whitespace: bool = False) -> str:
    return (
        "["
        + ("\\s" if whitespace else "")
        + "".join("\\" + c if c in _REGEX_META or c in "[]" else c for c in sorted(chars))
        + "]"
    )


def _alternation(items: set[str]) -> str:
    return "|".join(_regex_literal(x) for x in sorted(items, key=lambda x: (-len(x), x)))


class ValueSpace:
    """The values a grounded parameter may take in one request: what the grammar offers.

    Built from the same parts as the contract's :class:`~forethought.kernel.grounding.Haystack` (texts, then
    values: the context and the bindable scratchpad), and following its rule for strings: a string is
    grounded when it is a sequence of parts (words and meaningful symbols the haystack holds, their synonyms,
    numbers it states) joined by connective text (whitespace, connective punctuation, function words). The
    grammar admits such sequences more narrowly: parts apart from each other by a space (after at most one mark
    that closes a clause), spelled as written or in one case throughout, and every token and every string value
    of the haystack as a whole; it does not ask a multi-word part to occur contiguously (the contract does). A
    string longer than the composition limit is offered only whole.
    """

    def __init__(self, texts: Sequence[str], values: Sequence[Any]):
        words: set[str] = set()
        symbols: set[str] = set()
        numbers: set[float] = set()
        whole: set[str] = set()
        leaves: list[Any] = []
        for value in values:
            collect_leaves(value, leaves)
        for text in [*[t for t in texts if t], *[x for x in leaves if isinstance(x, str)]]:
            found_words, sym = _words_and_symbols(text)
            words |= found_words
            symbols |= sym
            numbers.update(number_tokens(text))
            if len(text.split()) > MAX_COMPOSED_WORDS:
                whole.add(text)
            # A token between spaces is a value of its own, as written and without the punctuation that closes a
            # clause: a password ("Qwerty!42"), a handle, cd's ".." or "/". Compositions below need a space
            # between their parts, so a part glued to the next by punctuation comes whole, from where it occurs.
            for token in text.split():
                whole.add(token)
                whole.add(token.rstrip(",;:.!?)\"'”’…"))
        # a string of the context or the scratchpad is a value as it stands
        whole.update(x for x in leaves if isinstance(x, str))
        whole.discard("")
        for leaf in leaves:
            if isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
                numbers.add(float(leaf))
        # A currency or unit the haystack names may be written with any name of its group ("dollars" -> "USD"); a
        # name of several words ("us dollars") is a sequence of words.
        table = synonym_table()
        for part in list(words | symbols):
            for other in table.get(part.lower(), ()):
                found_words, sym = _words_and_symbols(other)
                words |= found_words
                symbols |= sym
        self.words = sorted({form for w in words for form in _case_forms(w)})
        self.symbols = sorted(symbols)
        self.numbers = sorted(numbers)
        self.whole = sorted(whole)

    def string_schema(self) -> dict[str, Any]:
        if not self.words and not self.symbols:
            return {"enum": [*self.whole, ""]}
        closing = _char_class(frozenset(",;:.!?)]}\"'”’…"))
        opening = _char_class(frozenset("([{\"'“‘"))
        # Between two parts: one space, after at most one mark that closes a clause ("Paris, France") and before at
        # most one that opens one, or a dash between spaces ("A - B"). Punctuation alone does not join two parts
        # ("For!!!as" is no value: its parts would be glued into one word, which the contract grounds only whole);
        # a token glued by punctuation is offered whole, from the haystack (above). Bounded, so a decoder cannot
        # run on with separators.
        gap = f"(?:{closing}?\\s{opening}?|\\s[-–—&|/]\\s)"
        separator = f"{gap}(?:(?:{_alternation(set(FUNCTION_WORDS))}){gap}){{0,3}}"
        word = f"(?:{_alternation(set(self.words))})" if self.words else None
        symbol = f"(?:{_alternation(set(self.symbols))})" if self.symbols else None
        # a unit: words glued by meaningful symbols ("$5", "50%", "#W123", "Jade%River8"), or symbols alone
        units = [
            f"{symbol}*{word}(?:{symbol}+{word})*{symbol}*" if symbol and word else word,
            f"{symbol}+" if symbol else None,
        ]
        unit = "(?:" + "|".join(u for u in units if u) + ")"
        pattern = {
            "type": "string",
            "pattern": f"^(?:{opening}?{unit}(?:{separator}{unit})*{closing}?)?$",
        }
        return {"anyOf": [pattern, {"enum": self.whole}]} if self.whole else pattern

    def number_schema(self, integers_only: bool = False) -> dict[str, Any]:
        nums = [n for n in self.numbers if n.is_integer() or not integers_only]
        if not nums:
            return {"type": "null"}  # no grounded number in this request: the contract would refuse any
        kind = "integer" if integers_only else "number"
        return {
            "anyOf": [
                {"type": kind, "minimum": int(n) if n.is_integer() else n, "maximum": int(n) if n.is_integer() else n}
                for n in nums
            ]
        }


class SchemaBuilder:
    """Builds one request's schema; the value sets are defined once (``$defs``) and referenced per parameter."""

    def __init__(self, space: ValueSpace):
        self.space = space
        self.defs: dict[str, Any] = {}

    def _ref(self, name: str, schema_fn: Any) -> dict[str, Any]:
        if name not in self.defs:
            self.defs[name] = schema_fn()
        return {"$ref": f"#/$defs/{name}"}

    def strings(self) -> dict[str, Any]:
        return self._ref("grounded_string", self.space.string_schema)

    def numbers(self, integers_only: bool = False) -> dict[str, Any]:
        return self._ref(
            "grounded_integer" if integers_only else "grounded_number", lambda: self.space.number_schema(integers_only)
        )

    def scalar(self) -> dict[str, Any]:
        return self._ref(
            "grounded_scalar",
            lambda: {"anyOf": [self.strings(), self.numbers(), {"type": "boolean"}, {"type": "null"}]},
        )

    def value(self, short_type: str) -> dict[str, Any]:
        """A grounded value of a parameter of this short type (kernel/specs/shared.py ``_short_type``), or null."""
        alts: list[dict[str, Any]]
        if short_type.startswith("enum[") and short_type.endswith("]"):
            options = short_type[5:-1].split("|")
            alts = [{"enum": options}, self.strings()]  # a documented option, or a value the request grounds
        elif short_type == "string":
            alts = [self.strings()]
        elif short_type == "integer":
            alts = [self.numbers(integers_only=True)]
        elif short_type == "number":
            alts = [self.numbers()]
        elif short_type == "boolean":
            alts = [{"type": "boolean"}]
        elif short_type.startswith("list["):
            item = short_type[5:-1]
            inner = self.value(item) if item in ("string", "integer", "number", "boolean") else self._object()
            alts = [{"type": "array", "items": inner, "maxItems": 16}]
        elif short_type == "object":
            alts = [self._object()]
        else:  # a union or an unknown type: any grounded scalar
            alts = [self.scalar()]
        return {"anyOf": [*alts, {"type": "null"}]}

    def _object(self) -> dict[str, Any]:
        # Keys are free (the tool's schema names them, not the request); every value must be grounded.
        return self._ref(
            "grounded_object",
            lambda: {
                "type": "object",
                "additionalProperties": {
                    "anyOf": [self.scalar(), {"type": "array", "items": self.scalar(), "maxItems": 16}]
                },
                "maxProperties": 12,
            },
        )

    def parameters(self, params: dict[str, str]) -> dict[str, Any]:
        """An object of the tool's parameters (any subset, in the tool's declared order), each grounded."""
        return {
            "type": "object",
            "properties": {p: self.value(t) for p, t in params.items()},
            "additionalProperties": False,
        }

    def finish(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, **({"$defs": self.defs} if self.defs else {}), "x-guidance": dict(JSON_FORMAT)}


def with_format(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with the trained JSON text format attached (``x-guidance``)."""
    return {**schema, "x-guidance": dict(JSON_FORMAT)}


# ------------------------------------------------------------------ membership
_BYTE_TOKENIZER: list[Any] = []


def _byte_tokenizer() -> Any:
    """An llguidance tokenizer of one token per byte: membership of a text in a grammar, whatever model's tokenizer."""
    if not _BYTE_TOKENIZER:
        import llguidance

        class _Bytes:
            eos_token_id = 256
            bos_token_id = None
            tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
            special_token_ids = [256]

            def __call__(self, text: Any) -> list[int]:
                return list(text if isinstance(text, bytes) else text.encode("utf-8"))

        _BYTE_TOKENIZER.append(llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes())))
    return _BYTE_TOKENIZER[0]


def compile_grammar(schema: dict[str, Any]) -> str:
    """The llguidance grammar of a decoding schema (its ``x-guidance`` format included)."""
    import json

    import llguidance

    return llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=dict(JSON_FORMAT))


def admits(schema: dict[str, Any], text: str) -> str | None:
    """None when the schema's grammar admits ``text`` exactly; otherwise why not (where it stopped)."""
    import llguidance

    tok = _byte_tokenizer()
    matcher = llguidance.LLMatcher(tok, compile_grammar(schema))
    if matcher.is_error():
        return f"the schema does not compile: {matcher.get_error()}"
    data = text.encode("utf-8")
    n = matcher.try_consume_tokens(list(data))
    if n < len(data):
        return f"refused at byte {n}: ...{data[max(0, n - 40) : n].decode('utf-8', 'replace')!r} then {data[n : n + 20].decode('utf-8', 'replace')!r}"
    if not matcher.is_accepting():
        return "the text ends before the grammar does"
    return None
