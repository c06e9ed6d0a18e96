"""`forethought agent`: the kernel on your own tools from the command line, a conversation file of user turns, a
scripted OpenAI-compatible server as the model (tests/openai_stub.py), the files `run` writes; over Python tools
(module:attr) and over a real MCP server (mcp:<command>)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forethought.cli import main
from tests.openai_stub import ChatServer

SERVER = Path(__file__).parent / "mcp_servers" / "calendar_server.py"


class Scripted:
    """Answers each primitive (the model name is the primitive's) from the turn's request."""

    def answer(self, body):
        primitive = body["model"]
        request = next(m["content"] for m in body["messages"] if m["role"] == "user")
        cancel = "cancel e1" in request
        tool, params = ("cancel_event", {"event_id": "e1"}) if cancel else ("login", {"user": "ann"})
        text = {
            "decompose": {"tasks": [{"id": "t1", "text": "cancel e1" if cancel else "log in as ann", "tool_name": tool,
                                     "depends_on": [], "parameters": params}]},
            "match_func": {"tool_name": tool},
            "match_fill": {"values": {}},
            "get_order": {"ordered_task_ids": ["t1"]},
            "check_prerequisites": {"task": None},
        }[primitive]  # fmt: skip
        return {"role": "assistant", "content": json.dumps(text)}


def _agent(tools: str, srv: ChatServer, tmp_path: Path, *extra: str) -> list[str]:
    conv = tmp_path / "conversation.txt"
    conv.write_text("# a comment\nlog in as ann\n\ncancel e1\n")
    return ["agent", f"tools={tools}", f"conversation={conv}", "backend=openai", f"backend.base_url={srv.url}",
            "kernel.backend_retries=0", f"output_dir={tmp_path / 'out'}", "record=true", *extra]  # fmt: skip


@pytest.mark.parametrize("tools", ["tests.test_own_tools:Calendar", f"mcp:{sys.executable} {SERVER}"])
def test_a_conversation_over_your_own_tools(tools, tmp_path, capsys):
    extra = []
    if tools.startswith("mcp:"):
        ann = tmp_path / "ann.yaml"
        ann.write_text(
            "tools:\n  login: {writes: {session: result.token}}\n  cancel_event: {prerequisites: [session]}\n"
        )
        extra = [f"annotations={ann}"]
    with ChatServer(Scripted()) as srv:
        assert main(_agent(tools, srv, tmp_path, *extra)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "turn 1: t1=executed" in out and "turn 2: t1=executed" in out and 'cancel_event(event_id="e1")' in out
    folder = tmp_path / "out"
    assert {p.name for p in folder.iterdir()} == {"turns.json", "calls.jsonl", "final_state.json", "trace.jsonl",
                                                  "trace.html", "recording.jsonl"}  # fmt: skip
    turns = json.loads((folder / "turns.json").read_text())
    assert [t["scratchpad"].get("session") for t in turns] == ["tok-ann", "tok-ann"]  # S carried into turn 2
    calls = [json.loads(line) for line in (folder / "calls.jsonl").read_text().splitlines()]
    assert [(c["turn"], c["tool"]) for c in calls] == [(0, "login"), (1, "cancel_event")]
    if not tools.startswith("mcp:"):
        assert json.loads((folder / "final_state.json").read_text())["events"]["e1"]["status"] == "cancelled"


def test_bad_agent_inputs_are_refused_before_anything_runs(tmp_path, capsys):
    assert main(["agent", "tools=tests.test_own_tools:Calendar", "backend=oracle", f"output_dir={tmp_path / 'o'}"]) == 2
    assert "a conversation has none" in capsys.readouterr().err
    assert main(["agent", "tools=tests.test_own_tools:Nope", "backend=openai", f"conversation={tmp_path / 'absent.txt'}",
                 f"output_dir={tmp_path / 'o'}"]) == 2  # fmt: skip
    assert "cannot read the conversation" in capsys.readouterr().err
    (tmp_path / "c.txt").write_text("hi\n")
    assert main(["agent", "tools=tests.test_own_tools:Nope", "backend=openai", f"conversation={tmp_path / 'c.txt'}",
                 f"output_dir={tmp_path / 'o'}"]) == 2  # fmt: skip
    assert "has no 'Nope'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_tools_that_cannot_be_loaded_are_one_line_refusals(tmp_path, monkeypatch, capsys):
    """An MCP server that cannot start, a URL with a key in it, a module that fails to import or a class that raises:
    each a located exit 2 naming `tools`, never a traceback (the second review's findings)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "badsyn.py").write_text("def f(:\n")
    (tmp_path / "needsdep.py").write_text("import not_installed_anywhere\n")
    (tmp_path / "raises.py").write_text("class Tools:\n    def __init__(self):\n        raise RuntimeError('no db')\n")
    (tmp_path / "c.txt").write_text("hi\n")
    cases = [
        ("mcp:/nonexistent/server-cmd", "cannot start or initialise"),
        ("mcp:http://user:sk-SECRET-in-url@127.0.0.1:9/mcp", "user:key@host"),
        ("badsyn:X", "importing 'badsyn' failed: SyntaxError"),
        ("needsdep:X", "module 'needsdep' imports 'not_installed_anywhere', which is not installed"),
        ("raises:Tools", "raises:Tools() failed: RuntimeError: no db"),
        (".x:y", "importing '.x' failed"),
    ]
    for tools, needle in cases:
        rc = main(["agent", f"tools={tools}", "conversation=c.txt", "backend=openai", f"output_dir={tmp_path / 'o'}"])
        err = capsys.readouterr().err
        assert rc == 2 and needle in err and "Traceback" not in err, (tools, err)
        assert "sk-SECRET-in-url" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_conversation_file_is_refused_at_the_size_bound(tmp_path, capsys):
    rc = main(["agent", "tools=tests.test_own_tools:Calendar", "conversation=/dev/zero", "backend=openai",
               f"output_dir={tmp_path / 'o'}"])  # fmt: skip
    assert rc == 2 and "larger than 32 MiB" in capsys.readouterr().err


class Requests(Scripted):
    """Each request names one task: its tool and parameters (the turn's first line)."""

    TASKS = {
        "cancel e1": ("cancel_event", {"event_id": "e1"}),
        "log in as ann": ("login", {"user": "ann"}),
        "archive e2": ("archive_event", {"event_id": "e2"}),
        "cancel e2 the old way": ("cancel_event_v0", {"event_id": "e2"}),
        "crash": ("crash", {}),
    }

    def answer(self, body):
        request = next(m["content"] for m in body["messages"] if m["role"] == "user")
        said = next(k for k in sorted(self.TASKS, key=len, reverse=True) if k in request.splitlines()[0])
        tool, params = self.TASKS[said]
        text = {
            "decompose": {"tasks": [{"id": "t1", "text": said, "tool_name": tool, "depends_on": [],
                                     "parameters": params}]},
            "match_func": {"tool_name": tool},
            "match_fill": {"values": {}},
            "get_order": {"ordered_task_ids": ["t1"]},
            "check_prerequisites": {"task": None},
        }[body["model"]]  # fmt: skip
        return {"role": "assistant", "content": json.dumps(text)}


@pytest.mark.parametrize(
    "tools, turns",
    [
        (f"mcp:{sys.executable} {SERVER} --faults", ["cancel e1", "log in as ann", "cancel e1", "archive e2", "crash"]),
        ("tests.test_own_tools:Calendar", ["cancel e1", "log in as ann", "cancel e1", "cancel e2 the old way"]),
    ],
    ids=["mcp-server", "python-tools"],
)
def test_a_blocked_prerequisite_a_failed_postcondition_and_a_dead_server_over_the_cli(tools, turns, tmp_path, capsys):
    """The Done-when of issue 27 through `forethought agent` and a scripted OpenAI-compatible model: S carried across
    turns, ToolGate blocking a call whose prerequisite is not in S, a failed postcondition halting its task with
    nothing committed (the run goes on: a tool's failure is an outcome), and (the server) a dead server stopping the
    run: exit 1, its call not committed."""
    conv = tmp_path / "turns.txt"
    conv.write_text("\n".join(turns) + "\n")
    ann = tmp_path / "ann.yaml"
    ann.write_text("tools:\n  login: {writes: {session: result.token}}\n"
                   "  cancel_event: {prerequisites: [session], expect: {status: cancelled}}\n"
                   "  archive_event: {expect: {status: archived}}\n")  # fmt: skip
    extra = [f"annotations={ann}"] if tools.startswith("mcp:") else []
    out = tmp_path / "out"
    with ChatServer(Requests()) as srv:
        rc = main(["agent", f"tools={tools}", f"conversation={conv}", "backend=openai", f"backend.base_url={srv.url}",
                   "kernel.backend_retries=0", f"output_dir={out}", *extra])  # fmt: skip
    printed = capsys.readouterr()
    assert rc == (1 if tools.startswith("mcp:") else 0), printed.err  # a turn without an answer fails the run
    lines = [line for line in printed.out.splitlines() if line.startswith("turn ")]
    assert lines[:4] == ["turn 1: t1=blocked", "turn 2: t1=executed", "turn 3: t1=executed", "turn 4: t1=tool_failed"]
    saved = json.loads((out / "turns.json").read_text())
    assert [t["scratchpad"].get("session") for t in saved][1:3] == ["tok-ann", "tok-ann"]  # carried into turn 3
    assert not saved[0]["calls"]  # the blocked call never reached the tools
    failed = saved[3]["outcomes"]["t1"]
    assert failed["status"] == "tool_failed" and (
        "result.status is 'scheduled', expected 'archived'" in failed["reason"]
        or "event e2 is not cancelled" in failed["reason"]
    )
    calls = [(c["turn"], c["tool"]) for c in map(json.loads, (out / "calls.jsonl").read_text().splitlines())]
    assert calls == [(1, "login"), (2, "cancel_event")]  # the failed call and the dead server's are not committed
    if tools.startswith("mcp:"):
        assert lines[4].startswith("turn 5: MCP server") and "tools/call crash got no answer" in lines[4]
        assert "1 of 5 turn(s) got no answer" in printed.err
    else:
        state = json.loads((out / "final_state.json").read_text())["events"]
        assert state["e1"]["status"] == "cancelled" and state["e2"]["status"] == "scheduled"  # the copy was dropped


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_the_interactive_mode_reads_turns_from_a_terminal(tmp_path):
    """Without conversation=, turns come from the terminal (here a pseudo-terminal, as a user's shell gives it): a
    prompt per turn, each turn's outcome printed before the next prompt, S carried across, an empty line ends the
    conversation; the files are those of a conversation file."""
    import os
    import pty
    import select
    import subprocess

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    with ChatServer(Scripted()) as srv:
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "forethought.cli", "agent", "tools=tests.test_own_tools:Calendar", "backend=openai",
             f"backend.base_url={srv.url}", "kernel.backend_retries=0", f"output_dir={out}", "record=true"],
            stdin=slave, stdout=slave, stderr=slave, cwd=root, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        seen = ""

        def expect(text: str) -> None:
            nonlocal seen
            while text not in seen:
                ready, _, _ = select.select([master], [], [], 120)
                assert ready, f"no {text!r} from the agent; it printed:\n{seen}"
                try:
                    chunk = os.read(master, 4096).decode(errors="replace")
                except OSError:  # the terminal closed: the process ended
                    chunk = ""
                assert chunk, f"the agent ended before {text!r}; it printed:\n{seen}"
                seen += chunk

        try:
            expect("you> ")
            os.write(master, b"log in as ann\n")
            expect("turn 1: t1=executed")
            expect("you> ")
            os.write(master, b"cancel e1\n")
            expect('cancel_event(event_id="e1")')
            expect("you> ")
            os.write(master, b"\n")  # an empty line: the conversation ends
            expect("wrote ")
            assert proc.wait(timeout=120) == 0, seen
        finally:
            proc.kill()
            proc.wait()
            os.close(master)
    assert seen.count("you> ") == 3
    assert {p.name for p in out.iterdir()} == {"turns.json", "calls.jsonl", "final_state.json", "trace.jsonl",
                                               "trace.html", "recording.jsonl"}  # fmt: skip
    turns = json.loads((out / "turns.json").read_text())
    assert [t["user"] for t in turns] == ["log in as ann", "cancel e1"]
    assert turns[1]["scratchpad"]["session"] == "tok-ann"
    assert json.loads((out / "final_state.json").read_text())["events"]["e1"]["status"] == "cancelled"


def test_a_strict_replay_renders_as_the_recording_says(tmp_path, monkeypatch, capsys):
    """A recording is looked up by the rendered prompt: its header says how the prompts were rendered (the tool
    rendering, the demonstrations stores' digests), and a strict replay (no model loaded) renders them so, taking the
    stores from the bundle it names, refused when that bundle does not hold them."""
    from forethought.bundle.manifest import MANIFEST, sha256_file
    from forethought.kernel.specs import DemonstrationStore, set_stores, set_tool_rendering

    bundle = tmp_path / "bundle"
    (bundle / "demonstrations").mkdir(parents=True)
    store = DemonstrationStore("match_func", 2, [("s1", "log in as bob", "login")])
    path = bundle / "demonstrations" / "match_func.jsonl"
    path.write_text(store.to_text())
    entry = {"path": "demonstrations/match_func.jsonl", "sha256": sha256_file(path)}
    # what the backend reads of a manifest (its own schema is tests/test_validate_package.py's)
    monkeypatch.setattr(
        "forethought.bundle.manifest._parse_manifest",
        lambda path: {"tool_rendering": "valued", "demonstrations": {"match_func": entry}},
    )
    (bundle / MANIFEST).write_text("{}")
    with ChatServer(Scripted()) as srv:
        args = _agent("tests.test_own_tools:Calendar", srv, tmp_path, f"backend.bundle={bundle}")
        assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    recording = tmp_path / "out" / "recording.jsonl"
    header = json.loads(recording.read_text().splitlines()[0])
    assert header["rendering"] == {"tool_rendering": "valued", "demonstrations": {"match_func": store.digest()}}
    replay = [a for a in args if a != "record=true" and not a.startswith("output_dir=")]
    replay += [f"replay={recording}", "replay_mode=strict"]
    set_tool_rendering("full")  # a fresh process
    set_stores([])
    # the stores are the bundle's: without it named (the default backend, no bundle there), refused before any turn
    other = [a for a in replay if not a.startswith(("backend.bundle=", "backend=", "backend.base_url="))]
    assert main([*other, f"output_dir={tmp_path / 'unrendered'}"]) == 2
    err = capsys.readouterr().err
    assert "showed demonstrations from a store the backend does not name" in err and "backend.bundle=" in err
    assert not (tmp_path / "unrendered").exists()
    assert main([*replay, f"output_dir={tmp_path / 'replayed'}"]) == 0, capsys.readouterr().err
    assert "turn 2: t1=executed" in capsys.readouterr().out
