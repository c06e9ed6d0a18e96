"""Your own domain outside the package (issue 27 part 6): `forethought new-domain` writes a folder from a registry
file, FORETHOUGHT_DOMAINS makes it a domain every command finds (in a fresh process, as a user's shell would), its
worked solution verifies as written, and every refusal writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from forethought.cli import main
from tests.disk import tree

REGISTRIES = Path(__file__).parent / "fixtures" / "registries"


def _fresh(*args: str, domains: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FORETHOUGHT_DOMAINS": str(domains)}
    return subprocess.run([sys.executable, "-m", "forethought.cli", *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("registry", ["openai_legacy_functions.json", "mcp_tools_list.json"])
def test_a_new_domain_from_a_registry_file_verifies_outside_the_package(registry, tmp_path, capsys):
    assert main(["new-domain", "mine", "--from", str(REGISTRIES / registry), "--dir", str(tmp_path)]) == 0
    folder = tmp_path / "mine"
    assert {p.name for p in folder.iterdir()} == {
        "__init__.py", "state.py", "tools.py", "slot_values.json", "solutions", "README.md"
    }  # fmt: skip
    assert "FORETHOUGHT_DOMAINS" in capsys.readouterr().out
    listed = _fresh("verify", str(folder / "solutions"), domains=tmp_path)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "1/1 solutions verified" in listed.stdout
    # the domain's own files are where the commands look for them
    probe = _fresh_python(
        "from forethought.kernel.domains import available, load_domain\n"
        "from forethought.data_gen.augment import slot_values_path\n"
        "print('mine' in available(), len(load_domain('mine').tools) > 0, slot_values_path('mine'))",
        domains=tmp_path,
    )
    assert probe.split() == ["True", "True", str(folder / "slot_values.json")]


def _fresh_python(code: str, *, domains: Path) -> str:
    env = {**os.environ, "FORETHOUGHT_DOMAINS": str(domains)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["Mine"], "lower-case letters"),
        (["telecom"], "exists already"),
        (["class"], "lower-case letters"),
        (["mine", "--from", str(REGISTRIES / "openai_tools.json")], "send_email.x-internal"),
        (["mine", "--from", str(REGISTRIES / "bfcl_list.json")], "not Python identifiers"),
        (["mine", "--from", str(REGISTRIES / "absent.json")], "file not found"),
        (["mine", "--from"], "needs a value"),
        (["mine", "--form", "x"], "unknown option"),
    ],
)
def test_a_refused_new_domain_writes_nothing(args, message, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    if "--from" not in args and "--form" not in args:
        args = [*args, "--from", str(REGISTRIES / "openai_legacy_functions.json")]
    before = tree(tmp_path)
    assert main(["new-domain", *args, "--dir", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_an_existing_folder_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tools.py").write_text("# mine\n")
    before = tree(tmp_path)
    assert (
        main(["new-domain", "mine", "--from", str(REGISTRIES / "openai_legacy_functions.json"), f"dir={tmp_path}"]) == 2
    )
    assert "exists" in capsys.readouterr().err and tree(tmp_path) == before


def test_the_domain_path_refuses_a_missing_folder_and_a_name_taken_twice(tmp_path):
    missing = _fresh("verify", "data_gen/solutions/ticket", domains=tmp_path / "absent")
    assert missing.returncode != 0 and "FORETHOUGHT_DOMAINS" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "telecom").mkdir()
    (tmp_path / "telecom" / "__init__.py").write_text("")
    twice = _fresh("verify", "data_gen/solutions/ticket", domains=tmp_path)
    assert twice.returncode != 0 and "defined twice" in twice.stderr and "Traceback" not in twice.stderr
