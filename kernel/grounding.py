"""Value grounding: does a proposed value appear in the text or state it must come from?

Used by value-level contracts (a parameter value must be grounded in the user
request, the turn context or the scratchpad, never invented) and by the
canonical exact-match forms. The rule is stated in docs/kernel.md, section
"Grounding"; in short:

- a **number** is grounded when it equals a number leaf of the context or S,
  or a *number token* of the text (a run of digits standing alone: not part of
  an identifier such as ``HAT001``, a date such as ``2024-06-03``, a time such
  as ``10:30`` or a version such as ``1.2.3``);
- a **string** is grounded when it occurs in the haystack at word boundaries
  (``Berlin`` is not grounded by ``Berlinale``), or when it is a *composition*:
  a sequence of grounded parts (each a span of whole words occurring at word
  boundaries, a synonym of one, or a grounded number) joined by connective
  text (whitespace, the punctuation in ``CONNECTIVE_PUNCTUATION``, the words in
  ``FUNCTION_WORDS``), with at least one grounded part;
- synonyms (currency and unit names) come from ``SYNONYMS`` plus the groups a
  domain lists in ``kernel/domains/<name>/synonyms.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from forethought.bounded import read_json_file

# A word: word characters, possibly joined by inner punctuation (report.txt, L-9009, 2024-06-03, a@b.com, 10:30, don't).
# A word is matched whole or not at all: "report.txt" is one part, never "report" plus "." plus "txt".
JOINERS = ".-@/+':"
_WORD = r"\w+(?:[" + re.escape(JOINERS) + r"]\w+)*"
PIECES = re.compile(r"(" + _WORD + r")|(\s+)|(.)", re.S)

# A number token: digits (optionally with thousands commas and a decimal part) that are not glued to a word
# character or a joiner on either side, so identifiers, dates, times and versions yield no numbers.
# Joined to letters after it is fine ("a 12-share buy", "ticket 48's"); joined to digits on either side (a date,
# a time, a version, a phone number) or to a word before it (L-9009, HAT-001) is not a number of its own. Letters
# glued to the digits count only when they name a unit of the synonym table or an ordinal ("3GB", "5km", "3rd"),
# or begin a capitalised word.
_NUMBER_TOKEN = re.compile(
    r"(?<!\w)(?<!\w[.@/+:'\-])(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)([^\W\d_]*)(?!\w)(?![.@/+:'\-]\d)"
)
_ORDINALS = frozenset({"st", "nd", "rd", "th"})
# A capitalised word glued after the digits starts a new word (lines joined without a break, as in BFCL's
# "Revenue: $5000Expenses: $3000"), unlike an id's letters.
_NEW_WORD = re.compile(r"[A-Z][a-z]")
_RUN = re.compile(r"\w+")
_NUMBER_WORD = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")

# Connective text a composed value may add around its grounded parts. Deliberately small: symbols that carry
# meaning ($ % € # @ + * =) are not connective and must themselves be grounded.
CONNECTIVE_PUNCTUATION = frozenset(",;:.!?-–—/&()[]{}\"'“”‘’…|")
# A value of more words than this is grounded only as a whole: compositions are short (a tweet, a comment, a
# subject line), and the cut search is quadratic in the words.
MAX_COMPOSED_WORDS = 64
FUNCTION_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "via", "with"}
)

# Equivalent names of currencies and units; a value part is grounded when any name of its group is. Groups must
# be unambiguous in every domain (the contracts do not know which domain a value belongs to), so "pound" is
# left out: it names both a currency and a weight.
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("usd", "us$", "$", "dollar", "dollars", "us dollar", "us dollars"),
    ("eur", "€", "euro", "euros"),
    ("gbp", "£", "pounds sterling", "sterling"),
    ("jpy", "¥", "yen"),
    ("chf", "swiss franc", "swiss francs"),
    ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    ("mi", "mile", "miles"),
    ("m", "meter", "meters", "metre", "metres"),
    ("kg", "kilogram", "kilograms", "kilo", "kilos"),
    ("lb", "lbs"),
    ("h", "hr", "hrs", "hour", "hours"),
    ("min", "mins", "minute", "minutes"),
    ("°c", "celsius", "degrees celsius"),
    ("°f", "fahrenheit", "degrees fahrenheit"),
)


@cache
def synonym_table() -> dict[str, frozenset[str]]:
    """Each name -> its group: ``SYNONYMS`` plus every domain folder's ``synonyms.json`` (a JSON list of lists of
    names; the built-in domains and yours, kernel/domains/__init__.py). Read from the files, not from imported
    domains, so the table is the same in every process whichever domains it loaded; a group sharing a name with
    another is merged into it."""
    from .domains import domain_folders

    groups = [set(g) for g in SYNONYMS]
    for path in [d / "synonyms.json" for d in domain_folders().values() if (d / "synonyms.json").is_file()]:
        data = read_json_file(path)
        if not (
            isinstance(data, list)
            and all(isinstance(g, list) and g and all(isinstance(x, str) and x.strip() for x in g) for g in data)
        ):
            raise ValueError(f'{path}: expected a JSON list of non-empty lists of names, e.g. [["usd", "dollars"]]')
        groups += [{_fold(x) for x in g} for g in data]
    merged: list[set[str]] = []
    for group in groups:
        group = {_fold(x) for x in group}
        for overlapping in [m for m in merged if m & group]:
            group |= overlapping
            merged.remove(overlapping)
        merged.append(group)
    return {name: frozenset(g) for g in merged for name in g}


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def number_tokens(text: str) -> list[float]:
    """The numbers a text states as numbers (see ``_NUMBER_TOKEN``): ``"HAT001"`` and ``"2024-06-03"`` give none."""
    units = synonym_table()
    return [
        float(n.replace(",", ""))
        for n, glued in _NUMBER_TOKEN.findall(text)
        if not glued or glued.lower() in units or glued.lower() in _ORDINALS or _NEW_WORD.match(glued)
    ]


def normalize(value: Any) -> Any:
    """Canonical form for comparisons: integral floats become ints, dict keys sorted."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(value[k]) for k in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    return value


def canonical(value: Any) -> str:
    return json.dumps(normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Haystack:
    """Everything a value may be grounded in; text and numbers are extracted on first use."""

    def __init__(self, texts: Iterable[str] = (), values: Iterable[Any] = ()):
        self._texts = list(texts)
        self._values = list(values)
        self._text: str | None = None
        self._numbers: set[float] | None = None
        self._leaves: list[Any] | None = None
        self._runs: set[str] | None = None
        self._spans: dict[str, bool] = {}
        self._strings: dict[str, bool] = {}

    def _all_leaves(self) -> list[Any]:
        if self._leaves is None:
            leaves: list[Any] = []
            for value in self._values:
                collect_leaves(value, leaves)
            self._leaves = leaves
        return self._leaves

    @property
    def text(self) -> str:
        """The texts and the string leaves, lower-cased, whitespace folded, one per line."""
        if self._text is None:
            parts = [t for t in self._texts if t] + [x for x in self._all_leaves() if isinstance(x, str) and x]
            self._text = "\n".join(" ".join(p.lower().split()) for p in parts)
        return self._text

    @property
    def numbers(self) -> set[float]:
        if self._numbers is None:
            nums: set[float] = set()
            for text in [t for t in self._texts if t] + [x for x in self._all_leaves() if isinstance(x, str)]:
                if any(c.isdigit() for c in text):
                    nums.update(number_tokens(text))
            for leaf in self._all_leaves():
                if isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
                    nums.add(float(leaf))
            self._numbers = nums
        return self._numbers

    def contains(self, value: Any, enum: Iterable[Any] | None = None) -> bool:
        if value is None or isinstance(value, bool):
            return True
        if enum is not None and value in list(enum):
            return True
        if isinstance(value, (int, float)):
            return float(value) in self.numbers
        if isinstance(value, str):
            folded = _fold(value)
            return not folded or self._string(folded)
        if isinstance(value, dict):
            return all(self.contains(v) for v in value.values())
        if isinstance(value, (list, tuple)):
            return all(self.contains(v) for v in value)
        return False

    def composed_only(self, value: str) -> bool:
        """``value`` is grounded as a composition of at least two grounded parts that carry content (a word
        outside ``FUNCTION_WORDS`` or a meaningful symbol) and connective text, not as a whole (verify's evidence
        for the ``composed_value`` tag). One such part wrapped in connective text ("the report.txt.") is grounded
        too, but it assembles nothing, so it is no evidence."""
        folded = _fold(value)
        return bool(folded) and not self._part(folded) and self._composed(folded, min_parts=2)

    # ------------------------------------------------------------ strings
    @property
    def runs(self) -> set[str]:
        """The runs of word characters in the text: a span can occur only if each of its runs is one (a cheap
        necessary test, so a value that cannot be grounded costs no scan of a large text)."""
        if self._runs is None:
            self._runs = set(_RUN.findall(self.text))
        return self._runs

    def _could_occur(self, span: str) -> bool:
        return all(r in self.runs for r in _RUN.findall(span))

    def _occurs(self, span: str) -> bool:
        """``span`` (folded) occurs in the text at word boundaries: not inside a longer word, nor inside a dotted
        name ("report" does not occur in "report.txt", nor "john" in "john.doe@x.com"). Hyphens, slashes,
        colons and apostrophes do bound a word there ("IAH-BOS" names IAH, "projects/q3" names projects,
        "John's" names John)."""
        if not self._could_occur(span):
            return False
        text, n = self.text, len(span)
        check_before, check_after = _is_word(span[0]), _is_word(span[-1])
        j = text.find(span)
        while j >= 0:
            end = j + n
            before_ok = (
                not check_before
                or j == 0
                or not (_is_word(text[j - 1]) or (text[j - 1] in ".@" and j >= 2 and _is_word(text[j - 2])))
            )
            after_ok = (
                not check_after
                or end == len(text)
                or not (_is_word(text[end]) or (text[end] in ".@" and end + 1 < len(text) and _is_word(text[end + 1])))
            )
            if before_ok and after_ok:
                return True
            j = text.find(span, j + 1)
        return False

    def _part(self, span: str) -> bool:
        """A grounded part: the span itself or one of its synonyms occurs, or it is a number the haystack holds."""
        hit = self._spans.get(span)
        if hit is None:
            group = synonym_table().get(span, ())
            hit = self._occurs(span) or any(self._occurs(s) for s in group if s != span)
            if not hit and _NUMBER_WORD.fullmatch(span):
                hit = float(span.replace(",", "")) in self.numbers
            self._spans[span] = hit
        return hit

    def _string(self, folded: str) -> bool:
        hit = self._strings.get(folded)
        if hit is None:
            hit = self._part(folded) or self._composed(folded)
            self._strings[folded] = hit
        return hit

    def _composed(self, folded: str, min_parts: int = 1) -> bool:
        """Dynamic programme over the value's pieces: reach[k] is None (unreachable) or the most grounded parts
        (capped at ``min_parts``; above 1, only parts with content count) of a cut of the first k pieces;
        the value is composed when reach[n] is ``min_parts``."""
        pieces = [(m.lastindex, m.group()) for m in PIECES.finditer(folded)]
        if sum(kind == 1 for kind, _ in pieces) > MAX_COMPOSED_WORDS:
            return False  # a long text is grounded only as a whole (it is quoted, not composed)
        syn_names = synonym_table()
        # Every word must be able to take part: a function word, a synonym, a number, or runs the text has.
        for kind, piece in pieces:
            if (
                kind == 1
                and piece not in FUNCTION_WORDS
                and piece not in syn_names
                and not self._could_occur(piece)
                and not (_NUMBER_WORD.fullmatch(piece) and float(piece.replace(",", "")) in self.numbers)
            ):
                return False
        n = len(pieces)
        reach: list[int | None] = [None] * (n + 1)
        reach[0] = 0
        for k in range(n):
            here = reach[k]
            if here is None:
                continue
            kind, piece = pieces[k]
            if kind == 2 or (kind == 3 and piece in CONNECTIVE_PUNCTUATION) or (kind == 1 and piece in FUNCTION_WORDS):
                reach[k + 1] = max(reach[k + 1] or 0, here)
            if kind == 2 or (kind == 3 and piece in CONNECTIVE_PUNCTUATION):
                continue  # a part starts with a word or a meaningful symbol, never with connective text
            span, content = "", False
            for last in range(k, n):
                mkind, mpiece = pieces[last]
                span += mpiece
                content = (
                    content
                    or (mkind == 1 and mpiece not in FUNCTION_WORDS)
                    or (mkind == 3 and mpiece not in CONNECTIVE_PUNCTUATION)
                )
                # a part ends with a word or a meaningful symbol (trailing connective text is covered by the step above)
                if (mkind == 1 or (mkind == 3 and mpiece not in CONNECTIVE_PUNCTUATION)) and self._part(span):
                    # the contract (min_parts 1) takes any grounded part; more parts are counted only when they carry
                    # content, so "the" that happens to occur does not turn "the report.txt" into two parts
                    step = 1 if content or min_parts == 1 else 0
                    reach[last + 1] = max(reach[last + 1] or 0, min(here + step, min_parts))
                # a longer span can only occur if this one could (or a synonym name starts with it)
                if not ((mkind != 1 or self._could_occur(mpiece)) and span in self.text) and not any(
                    s.startswith(span) for s in syn_names
                ):
                    break
        return reach[n] == min_parts


def collect_leaves(value: Any, out: list[Any]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            collect_leaves(item, out)
    elif isinstance(value, (list, tuple)):
        for item in value:
            collect_leaves(item, out)
    else:
        out.append(value)
