"""docs/own_tools.md must keep working: its Python blocks run here, in order, each printing what the text block
after it shows; then section 5's commands run as written, in a temporary folder outside the repository — from the
MCP server to a domain folder, two worked solutions, verify, generate, train, validate, package, run (the bundle on
the domain's simulated tools) and the agent running the bundle on the server (issue 27's chain), at the suite's tiny
scale."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "own_tools.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)

# What the test appends to each command of section 5 (the doc says so): the suite's two-step scale, and a bundle
# that fails its gates taken as a smoke bundle.
TINY = {
    "generate": "data.sizes={decompose:24,get_order:12,check_prerequisites:12,match_func:24,match_fill:12} "
    "data.workers=1 data.validation_fraction=0.25",
    "train": "model=tiny train=quick train.max_steps=2 train.max_eval_examples=4 model.tiny.vocab_size=1024 "
    "logging=none model.pretrain.max_steps=2 model.pretrain.em_eval_steps=null train.em_eval_steps=null",
    "validate": "max_examples=2 max_new_tokens=8 base_comparison=false compare_decoding=false",
    "package": "allow_failed_gates=true",
    "run": "backend.allow_smoke=true backend.max_new_tokens=16 kernel.retries=0",
    "agent": "backend.allow_smoke=true backend.max_new_tokens=16 kernel.retries=0",
}


def _run_python_blocks(namespace: dict) -> None:
    blocks = FENCE.findall(DOC.read_text(encoding="utf-8"))
    pairs = [(body, blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None)
             for i, (lang, body) in enumerate(blocks) if lang == "python"]  # fmt: skip
    assert len(pairs) == 3 and all(expected is not None for _, expected in pairs)
    for code, expected in pairs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert out.getvalue() == expected, f"docs/own_tools.md output drifted for block:\n{code}"


def section_5_commands() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("\n## 5. ") :]
    return "\n".join(body for lang, body in FENCE.findall(section) if lang == "bash")


def _preamble() -> str:
    table = " ".join(f"[{k}]={json.dumps(v)}" for k, v in TINY.items())
    return f"""set -euo pipefail
declare -A TINY=({table})
forethought() {{
  local rc=0
  echo "+ forethought $1" >&2
  command forethought "$@" ${{TINY[$1]:-}} || rc=$?
  # a two-step model fails its gates and its turns may halt: exit 1, validate's and agent's verdict (the doc says so);
  # a refusal (2) or a crash still fails the script
  if [[ ($1 == validate || $1 == run || $1 == agent) && $rc == 1 ]]; then return 0; fi
  return $rc
}}
"""


def test_the_tutorial_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _run_python_blocks({"__name__": "docs_own_tools", "SERVERS": str(ROOT / "tests" / "mcp_servers")})


def test_section_5_runs_as_written_from_the_mcp_server_to_a_bundle_running_on_it(tmp_path, monkeypatch):
    assert not tmp_path.resolve().is_relative_to(ROOT)  # a folder outside the repository, as a user's
    monkeypatch.chdir(tmp_path)
    # section 3 writes the annotations file section 5 starts from
    _run_python_blocks({"__name__": "docs_own_tools", "SERVERS": str(ROOT / "tests" / "mcp_servers")})
    script = section_5_commands()
    for command in ("new-domain", "verify", "generate", "train", "validate", "package", "run", "agent"):
        assert f"forethought {command} " in script, f"section 5 lost its {command} command"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SERVERS": str(ROOT / "tests" / "mcp_servers"),
        "CORPUS": str(ROOT / "tests" / "fixtures" / "solutions"),
    }
    env.pop("FORETHOUGHT_DOMAINS", None)
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(["bash", "-c", _preamble() + script], cwd=tmp_path, env=env, capture_output=True, text=True)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    assert "2/2 solutions verified" in done.stdout and "2 passed" in done.stdout  # verify; the domain's own test
    assert "Traceback" not in log, log[-6000:]

    folder = tmp_path / "domains" / "calendar"
    assert {p.name for p in folder.iterdir()} >= {"tools.py", "state.py", "annotations.yaml", "slot_values.json",
                                                   "solutions", "tests", "README.md"}  # fmt: skip
    assert 'writes={"session": "result.token"}' in folder.joinpath("tools.py").read_text().replace("'", '"')
    runs = tmp_path / "runs" / "calendar"
    rows = [json.loads(line) for p in (runs / "data").glob("*/*.jsonl") for line in p.read_text().splitlines()]
    assert any(r["solution_id"].startswith("calendar-") for r in rows)  # the new domain's rows are in the datasets
    assert (runs / "validate" / "gates.json").is_file()
    manifest = json.loads((runs / "bundle" / "manifest.json").read_text())
    assert manifest["smoke"] and set(manifest["primitives"]) >= {"decompose", "match_func"}
    replayed = runs / "run" / "calendar-login-then-cancel"
    assert len(json.loads((replayed / "turns.json").read_text())) == 2
    assert '"name": "cancel_event"' in (replayed / "trace.jsonl").read_text()  # the domain's tools were offered
    agent = runs / "agent"
    assert {"turns.json", "calls.jsonl", "final_state.json", "trace.jsonl", "trace.html"} <= {
        p.name for p in agent.iterdir()
    }
    assert len(json.loads((agent / "turns.json").read_text())) == 2  # both user turns of turns.txt ran
    trace = (agent / "trace.jsonl").read_text()
    assert '"name": "cancel_event"' in trace and '"name": "login"' in trace  # the server's tools were offered
