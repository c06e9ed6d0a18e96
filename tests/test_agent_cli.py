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
