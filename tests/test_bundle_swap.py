"""package's swap of a bundle at its path, crash by crash (issue 25 part 7; docs/guarantees.md "Refusals change nothing").

Replacing a folder takes two renames (the old bundle aside as `.<name>.old`, the new one in) and then the old one's
deletion. tests/test_refusals.py kills a real package between the renames; here the deletion itself is interrupted at
every one of its steps, and the aside name is found taken by something of the user's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from forethought.bundle.manifest import MANIFEST, recover_swap, swap_in
from forethought.errors import UserError
from tests.disk import tree


def _bundle(path: Path, version: int) -> Path:
    """A folder recover_swap takes for a bundle (it holds a manifest), with files and a nested folder to delete."""
    (path / "adapters" / "decompose").mkdir(parents=True)
    for name in ("a.safetensors", "b.json", "c.txt"):
        (path / name).write_text(f"{name} v{version}")
    (path / "adapters" / "decompose" / "adapter_config.json").write_text(f"v{version}")
    (path / MANIFEST).write_text(f'{{"version": {version}}}')  # made last: listed first on some file systems
    return path


class _Crash(BaseException):
    """The process dying at that point: nothing after it runs."""


def _deletion_steps(tmp_path: Path) -> int:
    """How many unlink/rmdir calls deleting the old bundle takes (the crash points to try)."""
    count = 0
    real_unlink, real_rmdir = os.unlink, os.rmdir

    def unlink(*args, **kwargs):
        nonlocal count
        count += 1
        return real_unlink(*args, **kwargs)

    def rmdir(*args, **kwargs):
        nonlocal count
        count += 1
        return real_rmdir(*args, **kwargs)

    out = _bundle(tmp_path / "count" / "out", 1)
    staged = _bundle(tmp_path / "count" / "staged", 2)
    os.unlink, os.rmdir = unlink, rmdir
    try:
        swap_in(staged, out)
    finally:
        os.unlink, os.rmdir = real_unlink, real_rmdir
    return count


def _dying_at(k: int, calls: list[int], real):
    """``real``, except that the ``k``-th call counted in ``calls`` crashes instead."""

    def call(*args, **kw):
        calls[0] += 1
        if calls[0] == k:
            raise _Crash
        return real(*args, **kw)

    return call


def test_a_crash_at_any_step_of_the_old_bundles_deletion_is_finished_by_the_next_load_and_package(
    tmp_path, monkeypatch
):
    # The old bundle was deleted in directory order: a crash after its manifest went left a remnant recover_swap did
    # not recognise, and every later package failed on it (the first rename cannot replace a non-empty folder).
    steps = _deletion_steps(tmp_path)
    assert steps >= 6
    for k in range(1, steps + 1):
        root = tmp_path / f"crash{k}"
        out = _bundle(root / "out", 1)
        staged = _bundle(root / "staged", 2)
        real_unlink, real_rmdir = os.unlink, os.rmdir
        calls = [0]  # unlink and rmdir calls so far, counted together
        monkeypatch.setattr(os, "unlink", _dying_at(k, calls, real_unlink))
        monkeypatch.setattr(os, "rmdir", _dying_at(k, calls, real_rmdir))
        with pytest.raises(_Crash):
            swap_in(staged, out)
        monkeypatch.setattr(os, "unlink", real_unlink)
        monkeypatch.setattr(os, "rmdir", real_rmdir)
        assert (out / MANIFEST).read_text() == '{"version": 2}', k  # the new bundle is in place
        recover_swap(out)  # what the next load does
        assert (out / MANIFEST).read_text() == '{"version": 2}', k
        swap_in(_bundle(root / "staged3", 3), out)  # and the next package
        assert (out / MANIFEST).read_text() == '{"version": 3}', k
        assert sorted(p.name for p in root.iterdir()) == ["out"], k  # nothing left aside


@pytest.mark.parametrize("kind", ["a folder of yours", "a file"])
def test_a_swap_whose_aside_name_is_taken_is_refused_and_changes_nothing(kind, tmp_path):
    # The first rename failed with an OSError after the whole package was built: an internal error, exit 1.
    out = _bundle(tmp_path / "out", 1)
    staged = _bundle(tmp_path / ".out.partial", 2)
    aside = tmp_path / ".out.old"
    if kind == "a file":
        aside.write_text("mine")
    else:
        aside.mkdir()
        (aside / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    with pytest.raises(UserError) as err:
        swap_in(staged, out)
    assert err.value.where == "output_dir" and str(aside) in str(err.value) and "is in the way" in str(err.value)
    assert tree(tmp_path) == before


def test_an_empty_aside_folder_is_replaced_by_the_swap(tmp_path):
    # What a crash between the manifest's unlink and the folder's removal leaves: it holds nothing, so the rename
    # replaces it (the crash test above goes through that point too).
    out = _bundle(tmp_path / "out", 1)
    (tmp_path / ".out.old").mkdir()
    swap_in(_bundle(tmp_path / "staged", 2), out)
    assert (out / MANIFEST).read_text() == '{"version": 2}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
