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
SERVER = Path(__file__).parent / "mcp_servers" / "calendar_server.py"


def _fresh(*args: str, domains: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FORETHOUGHT_DOMAINS": str(domains)}
    return subprocess.run([sys.executable, "-m", "forethought.cli", *args], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("registry", ["openai_legacy_functions.json", "mcp_tools_list.json"])
def test_a_new_domain_from_a_registry_file_verifies_outside_the_package(registry, tmp_path, capsys):
    assert main(["new-domain", "mine", "--from", str(REGISTRIES / registry), "--dir", str(tmp_path)]) == 0
    folder = tmp_path / "mine"
    assert {p.name for p in folder.iterdir()} == {
        "__init__.py", "state.py", "data.json", "tools.py", "slot_values.json", "annotations.yaml", "solutions",
        "tests", "README.md",
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
        (["mine", "--from", "mcp:/nonexistent/server-cmd"], "cannot start or initialise"),
        (["mine", "--from", "mcp:"], "mcp: needs a server command"),
    ],
)
def test_a_refused_new_domain_writes_nothing(args, message, tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    if "--from" not in args and "--form" not in args:
        args = [*args, "--from", str(REGISTRIES / "openai_legacy_functions.json")]
    before = tree(tmp_path)
    assert main(["new-domain", *args, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err
    source = args[args.index("--from") + 1] if "--from" in args[:-1] else None
    if source and not source.startswith("mcp:"):
        # the file is named at most once (it was printed twice: "error: F: F: file not found")
        assert err.count(source) <= 1
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


def test_an_agent_runs_on_a_scaffolded_domains_tools(tmp_path):
    """`agent tools=domain:<name>`: the kernel on a domain of yours in its initial state, in a fresh process that finds
    it on FORETHOUGHT_DOMAINS (a scripted OpenAI-compatible model; the whole chain with a trained bundle, run and
    agent included, is docs/own_tools.md section 5, run by tests/test_own_tools_docs.py)."""
    import json

    from tests.openai_stub import ChatServer

    class CloseTicket:
        def answer(self, body):
            text = {
                "decompose": {"tasks": [{"id": "t1", "text": "Close ticket 42", "tool_name": "close_ticket",
                                         "depends_on": [], "parameters": {"ticket_id": 42}}]},
                "match_func": {"tool_name": "close_ticket"},
                "match_fill": {"values": {}},
                "get_order": {"ordered_task_ids": ["t1"]},
                "check_prerequisites": {"task": None},
            }[body["model"]]  # fmt: skip
            return {"role": "assistant", "content": json.dumps(text)}

    assert (
        main(["new-domain", "desk", "--from", str(REGISTRIES / "openai_legacy_functions.json"), f"dir={tmp_path}"]) == 0
    )
    conversation = tmp_path / "turns.txt"
    conversation.write_text("Close ticket 42\n")
    out = tmp_path / "agent"
    with ChatServer(CloseTicket()) as srv:
        ran = _fresh("agent", "tools=domain:desk", f"conversation={conversation}", "backend=openai",
                     f"backend.base_url={srv.url}", "kernel.backend_retries=0", f"output_dir={out}",
                     domains=tmp_path)  # fmt: skip
    assert ran.returncode == 0 and "turn 1: t1=executed" in ran.stdout, ran.stdout + ran.stderr
    assert "close_ticket(ticket_id=42)" in ran.stdout
    final = json.loads((out / "final_state.json").read_text())
    assert final["desk"]["calls"] == [{"tool": "close_ticket", "arguments": {"ticket_id": 42}}]  # the TODO body ran
    missing = _fresh("agent", "tools=domain:nope", f"conversation={conversation}", "backend=openai",
                     f"output_dir={tmp_path / 'o2'}", domains=tmp_path)  # fmt: skip
    assert missing.returncode == 2 and "no domain 'nope'" in missing.stderr


def test_a_new_domain_from_a_running_mcp_server_and_its_own_test(tmp_path, capsys):
    """--from mcp:<command>: the server's tools/list (read-only hints -> side effects) and the annotations given make
    the tools; annotations.yaml is the sidecar agent reads; the README says how the bundle runs on the server; the
    folder's own test (its solutions verify, annotations.yaml agrees with tools.py) passes as written, and fails once
    the two disagree."""
    pytest.importorskip("mcp")
    ann = tmp_path / "calendar.annotations.yaml"
    ann.write_text(
        "tools:\n  login: {writes: {session: result.token}}\n"
        "  cancel_event: {prerequisites: [session, {key: event_open, entity: event_id}]}\n"
    )
    server = f"mcp:{sys.executable} {SERVER}"
    domains = tmp_path / "domains"  # made by new-domain
    assert main(["new-domain", "cal", "--from", server, "--annotations", str(ann), "--dir", str(domains)]) == 0
    folder = domains / "cal"
    tools_py = (folder / "tools.py").read_text()
    assert "@DOMAIN.tool(side_effect=False)\ndef get_event(state: State, event_id: str)" in tools_py  # readOnlyHint
    assert (
        "prerequisites=['session', Prerequisite(key='event_open', sat=Sat(op='truthy', value=None), entity='event_id')]"
        in tools_py
    )
    assert "return {'ok': True, 'token': 'TODO-token'}" in tools_py  # the login's write finds a value
    assert (folder / "annotations.yaml").read_text() == ann.read_text()  # the sidecar given, as it is
    readme = (folder / "README.md").read_text()
    assert f"forethought agent tools='{server}' annotations={folder / 'annotations.yaml'}" in readme
    env = {**os.environ, "FORETHOUGHT_DOMAINS": ""}
    own = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)], env=env,
                         cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert own.returncode == 0 and "2 passed" in own.stdout, own.stdout + own.stderr
    (folder / "annotations.yaml").write_text("tools:\n  login: {side_effect: false}\n")
    drifted = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)], env=env,
                             cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert drifted.returncode == 1 and "login.side_effect: tools.py True, annotations.yaml False" in drifted.stdout


def test_without_annotations_the_sidecar_says_what_the_import_found(tmp_path):
    assert main(["new-domain", "mine", "--from", str(REGISTRIES / "openai_legacy_functions.json"),
                 "--dir", str(tmp_path)]) == 0  # fmt: skip
    from forethought.kernel.registry.annotations import load_annotations

    sidecar = load_annotations(tmp_path / "mine" / "annotations.yaml")
    # an imported OpenAI tool is side-effecting unless annotated (issue 27 part 4)
    assert {n: a.side_effect for n, a in sidecar.tools.items()} == {"create_ticket": True, "close_ticket": True}


def test_a_domain_registered_by_an_entry_point_is_found(tmp_path):
    """An installed package registers its domain under the entry-point group forethought.domains (here a package and
    its dist-info on PYTHONPATH, as pip would leave them), and every command finds it."""
    assert main(["new-domain", "desk", "--from", str(REGISTRIES / "openai_legacy_functions.json"),
                 "--dir", str(tmp_path / "src" / "acme_tools")]) == 0  # fmt: skip
    (tmp_path / "src" / "acme_tools" / "__init__.py").write_text("")
    dist = tmp_path / "src" / "acme_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[forethought.domains]\ndesk = acme_tools.desk\n")
    env = {**os.environ, "FORETHOUGHT_DOMAINS": "", "PYTHONPATH": str(tmp_path / "src")}
    solutions = tmp_path / "src" / "acme_tools" / "desk" / "solutions"
    listed = subprocess.run([sys.executable, "-m", "forethought.cli", "verify", str(solutions)], env=env,
                            capture_output=True, text=True)  # fmt: skip
    assert listed.returncode == 0 and "1/1 solutions verified" in listed.stdout, listed.stdout + listed.stderr
