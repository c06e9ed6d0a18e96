"""The composed_value tag needs real evidence: a committed string argument grounded only by its parts.

verify recomputes, from the replay, which committed task calls carry a string argument that the grounding rule
(docs/kernel.md, "Grounding") accepts as a composition of at least two grounded parts and connective text while the
whole value occurs in none of the request, the turn context and S at the task's Lookup. A solution whose strings are
all grounded whole, or whose only "composed" string is an enum value of its parameter, does not back the tag.
"""

from __future__ import annotations

import json
from pathlib import Path

from forethought.data_gen.verify import verify_paths
from forethought.kernel.grounding import Haystack

SOLUTIONS = Path(__file__).resolve().parents[1] / "data_gen" / "solutions"
NEEDS = "tag 'composed_value' needs a committed call with a string argument grounded only by its parts"


def _load(rel: str) -> dict:
    return json.loads((SOLUTIONS / rel).read_text())


def _verify(tmp_path: Path, data: dict) -> tuple[bool, str | None]:
    path = tmp_path / "solution.json"
    path.write_text(json.dumps(data))
    (res,) = verify_paths([path], warnings=False)
    return res.ok, res.error


def test_composed_only_is_true_for_a_composition_and_false_for_a_whole_value():
    hay = Haystack(["Comment the two file names report.txt and notes.md, separated by a comma."])
    assert hay.composed_only("report.txt, notes.md")
    assert hay.composed_only("notes.md; report.txt")
    # the whole value occurs (case and whitespace folded): grounded whole, not composed
    assert not hay.composed_only("Report.txt  and notes.md")
    assert not hay.composed_only("report.txt")


def test_composed_only_is_false_when_a_part_is_not_grounded():
    hay = Haystack(["Comment the two file names report.txt and notes.md, separated by a comma."])
    assert not hay.composed_only("report.txt, secret.md")
    assert not hay.composed_only("report.txt, notes")  # a piece of a word is not a part ("notes" of "notes.md")
    assert not hay.composed_only("report.txt $ notes.md")  # "$" carries meaning: not connective


def test_composed_only_needs_two_parts_a_single_part_in_connective_text_assembles_nothing():
    hay = Haystack(["Tweet the name report.txt"])
    assert hay.contains("the report.txt.")  # grounded by the contract ...
    assert not hay.composed_only("the report.txt.")  # ... but not evidence of a composed value


def test_composed_only_reads_parts_from_state_values():
    hay = Haystack(["Message USR007 the two stocks on my watchlist."], [{"watchlist": ["NVDA", "KO"]}])
    assert hay.composed_only("NVDA and KO")
    assert not hay.composed_only("NVDA and AAPL")


def test_the_tag_is_accepted_on_a_solution_with_a_composed_argument(tmp_path):
    solution = _load("social/comment_two_file_names.json")
    assert "composed_value" in solution["tags"]
    assert _verify(tmp_path, solution) == (True, "")


def test_the_tag_is_refused_when_the_same_string_is_grounded_whole(tmp_path):
    # The same comment, but the request now quotes it verbatim: the value is grounded whole, so nothing is composed.
    solution = _load("social/comment_two_file_names.json")
    turn = solution["turns"][0]
    turn["user"] = 'Comment on tweet 4 with the text "${f1}, ${f2}".'
    turn["paraphrases"] = []
    ok, err = _verify(tmp_path, solution)
    assert not ok and NEEDS in err
    solution["tags"].remove("composed_value")  # the solution itself is right: only the tag lacks evidence
    assert _verify(tmp_path, solution) == (True, "")


def test_the_tag_is_refused_on_a_solution_whose_strings_are_all_grounded_whole(tmp_path):
    solution = _load("file_system/paper_figure1.json")
    solution["tags"].append("composed_value")
    ok, err = _verify(tmp_path, solution)
    assert not ok and NEEDS in err


def test_an_enum_value_is_not_evidence(tmp_path):
    # "ordered by mistake" is an enum value of cancel_pending_order's reason; the request says "I ordered it by
    # mistake", so the grounding rule alone would read the value as a composition of "ordered" and "mistake".
    solution = _load("retail/cancel_pending_inline_identification.json")
    assert Haystack([solution["turns"][0]["user"]]).composed_only("ordered by mistake")
    solution["tags"].append("composed_value")
    ok, err = _verify(tmp_path, solution)
    assert not ok and NEEDS in err
