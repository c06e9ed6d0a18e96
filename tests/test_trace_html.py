"""The HTML trace (kernel/trace_html.py) leads with what went wrong (issue 28 item 7): a step its contract rejected is
marked in the main view, on its sub-process and at the top of its turn, with the violation text and what came of it;
the scratchpad is a table."""

from __future__ import annotations

import re
from pathlib import Path

from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.runner import oracle_factory, run_solution
from forethought.kernel.solution_file import load_solution
from forethought.kernel.trace_html import render_html
from forethought.primitives import SLMReply

FIG1 = Path(__file__).resolve().parents[1] / "data_gen" / "solutions" / "file_system" / "paper_figure1.json"


class FirstDecomposeEmpty:
    """The oracle, except that each turn's first decompose answers no tasks (its contract rejects that; the retry gets
    the oracle's answer)."""

    def __init__(self, inner):
        self.inner, self.name, self.spoiled = inner, "oracle", False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def complete(self, requests):
        replies = self.inner.complete(requests)
        out = []
        for req, rep in zip(requests, replies, strict=True):
            if req.primitive == "decompose" and not self.spoiled:
                self.spoiled, rep = True, SLMReply(text='{"tasks": []}')
            out.append(rep)
        return out


def _page(spoil: bool) -> str:
    sol = load_solution(FIG1).rendered()
    oracle = oracle_factory(sol)
    factory = (lambda i, t: FirstDecomposeEmpty(oracle(i, t))) if spoil else oracle
    res = run_solution(sol, Kernel(KernelConfig()), factory, trace="steps")
    assert all(not t.halted for t in res.turns)
    return render_html("fig1", res.turns, res.traces)


def _main_view(page: str) -> str:
    """The page without its collapsible per-step tables: what a reader sees without expanding anything."""
    return re.sub(r"<details.*?</details>", "", page, flags=re.S)


def test_a_rejected_then_retried_decompose_is_marked_in_the_main_view_with_its_violation():
    page = _page(spoil=True)
    main = _main_view(page)
    why = "[semantic] covers_request: a non-empty request was decomposed into no tasks"
    # at the top of each turn, and on the Decompose box itself; never shown as clean
    assert main.count("1 step(s) rejected by their contract") == 2
    assert main.count(why) >= 4
    decompose_boxes = re.findall(r"<span class='sp'>1\. Decompose</span>(.*?)<ul>", main, flags=re.S)
    assert len(decompose_boxes) == 2
    assert all("rejected ×1 — retried: accepted on attempt 2" in b and why in b for b in decompose_boxes)
    assert "<code>kernel/decompose</code> attempt 1" in main
    # the detailed table opens by itself and marks the rejected row
    assert "<details open>" in page and page.count("<tr class='rejected'>") == 2


def test_a_clean_run_has_no_marks_and_shows_the_scratchpad_as_a_table():
    page = _page(spoil=False)
    assert "step(s) rejected" not in page and "class='mark'" not in page
    assert "<details open>" not in page and "<tr class='rejected'>" not in page
    # turn 2 gets turn 1's scratchpad as a key | value table, and the page ends with the scratchpad after the last turn
    assert "Scratchpad carried in (S):</b> <table class='scratchpad'><tr><th>key</th><th>value</th></tr>" in page
    assert "<tr><td><code>dir_name</code></td><td>archive</td></tr>" in page
    assert "Scratchpad after turn 2</h2><div class='box'><table class='scratchpad'>" in page
