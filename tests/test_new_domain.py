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


def test_a_scaffolded_domain_generates_data_and_an_agent_runs_a_bundle_on_it(tiny_pipeline, tmp_path):
    """The chain on a folder outside the repository: new-domain, a second worked solution, verify, generate (with the
    fixture corpus, as a user adds their domain to a corpus), and `agent tools=domain:<name>` over a packaged bundle
    (the suite's tiny pipeline: smoke-labelled, its answers are not the point; that the kernel runs the bundle on the
    new domain's tools, and writes its files, is)."""
    import json

    from tests.conftest import FIXTURE_SOLUTIONS

    assert (
        main(["new-domain", "desk", "--from", str(REGISTRIES / "openai_legacy_functions.json"), f"dir={tmp_path}"]) == 0
    )
    solutions = tmp_path / "desk" / "solutions"
    example = json.loads(next(solutions.glob("*.json")).read_text())
    second = json.loads(json.dumps(example))
    user = "Open a ticket titled printer-jam and close ticket 42"
    second.update(id="desk-create-then-close", title=user)
    second["turns"][0].update(
        user=user,
        tasks=[
            {"id": "t1", "text": "Open a ticket titled printer-jam", "tool": "create_ticket",
             "parameters": {"title": "printer-jam"}, "bindings": {"title": {"source": "request", "value": "printer-jam"}}},
            {"id": "t2", "text": "Close ticket 42", "tool": "close_ticket", "parameters": {"ticket_id": 42},
             "bindings": {"ticket_id": {"source": "request", "value": 42}}},
        ],
        order=["t1", "t2"],
        calls=[{"tool": "create_ticket", "args": {"title": "printer-jam"}},
               {"tool": "close_ticket", "args": {"ticket_id": 42}}],
    )  # fmt: skip
    (solutions / "desk-create-then-close.json").write_text(json.dumps(second, indent=2))
    verified = _fresh("verify", str(solutions), domains=tmp_path)
    assert verified.returncode == 0 and "2/2 solutions verified" in verified.stdout, verified.stderr
    data = tmp_path / "data"
    generated = _fresh(
        "generate",
        f"data.solutions=[{FIXTURE_SOLUTIONS},{solutions}]",
        f"data.output_dir={data}",
        "data.sizes={decompose:24,get_order:12,check_prerequisites:12,match_func:24,match_fill:12}",
        "data.workers=2",
        "data.validation_fraction=0.25",
        domains=tmp_path,
    )
    assert generated.returncode == 0, generated.stderr
    rows = [json.loads(line) for p in data.glob("*/*.jsonl") for line in p.read_text().splitlines()]
    assert any(r["solution_id"].startswith("desk-") for r in rows)  # the new domain's rows are in the datasets

    conversation = tmp_path / "turns.txt"
    conversation.write_text("Close ticket 42\n")
    out = tmp_path / "agent"
    ran = _fresh(
        "agent",
        "tools=domain:desk",
        f"conversation={conversation}",
        "backend=hf",
        f"backend.bundle={tiny_pipeline / 'bundle'}",
        "backend.allow_smoke=true",
        "backend.max_new_tokens=16",
        "kernel.retries=0",
        f"output_dir={out}",
        domains=tmp_path,
    )
    assert "turn 1:" in ran.stdout and "Traceback" not in ran.stderr, ran.stderr[-2000:]
    assert {"turns.json", "calls.jsonl", "trace.jsonl", "trace.html"} <= {p.name for p in out.iterdir()}
    assert '"name": "close_ticket"' in (out / "trace.jsonl").read_text()  # the new domain's tools were offered
