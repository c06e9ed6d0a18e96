"""scripts/lint_names.py (issue 26): single-letter names are reported, words and the allowed letters pass, and the
folders `make lint` checks are clean."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from lint_names import check_source  # noqa: E402

BAD = """
import numpy as np

def load(p, *, f=None):
    x = p.read()
    for c in x:
        pass
    with open(p) as h:
        pass
    try:
        pass
    except ValueError as e:
        pass
    if (m := len(x)) > 2:
        pass
    a, (b, *rest) = 1, (2, 3)
    return x
"""

GOOD = """
from typing import TypeVar

T = TypeVar("T")

def load(path, *, fallback=None):
    text = path.read()
    n = len(text)
    for i, char in enumerate(text):
        for j in range(n):
            pass
    squares = [x * x for x in range(n)]
    pairs = {k: v for k, v in zip(text, text)}
    key = sorted(text, key=lambda c: c.lower())
    y = 2 * n + 1  # names: math
    _ = squares, pairs, key, y
    return text
"""


def test_every_single_letter_binding_is_reported():
    reports = check_source(BAD, "bad.py")
    assert [re.search(r"'(\w+)'", line).group(1) for line in reports] == [
        "p", "f", "x", "c", "h", "e", "m", "a", "b",
    ]  # fmt: skip
    assert reports[0] == "bad.py:4:10: single-letter name 'p'"


def test_words_and_the_allowed_letters_pass():
    assert check_source(GOOD, "good.py") == []


def test_the_folders_make_lint_checks_are_clean():
    makefile = (ROOT / "Makefile").read_text()
    line = next(
        line for line in makefile.splitlines() if line.strip().startswith("$(BIN)/python scripts/lint_names.py")
    )
    folders = line.split("lint_names.py", 1)[1].split()
    assert folders, "the Makefile names no folder for lint_names.py"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lint_names.py"), *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
