"""The kernel over the reference filesystem MCP server (@modelcontextprotocol/server-filesystem, Node.js), a server
this project did not write: its tools/list (annotations -> side effects), S across turns, a prerequisite from an
annotations file blocking a write until the file was read, the write changing the file on disk, and a path outside the allowed folder answered
with isError, a failed call with nothing committed.

Where Node.js is absent, or npm cannot fetch the server (no registry), the test is skipped, saying why. The server is
installed once with npm into pytest's cache folder (.pytest_cache, or a temporary folder without the cache plugin)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from forethought.kernel.mcp_tools import McpTools  # noqa: E402
from forethought.kernel.session import Session  # noqa: E402
from tests.oracle_turns import send, task, turn  # noqa: E402

PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
ANNOTATIONS = """\
format_version: 1
tools:
  read_text_file: {writes: {file_read: "const:true"}}
  write_file: {prerequisites: [file_read]}
"""


@pytest.fixture(scope="module")
def server_command(request, tmp_path_factory) -> list[str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js (node and npm) is not installed: the reference filesystem MCP server needs it")
    cache = getattr(request.config, "cache", None)
    prefix = Path(cache.mkdir("npm-server-filesystem")) if cache is not None else tmp_path_factory.mktemp("npm")
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
    if not entry.is_file():
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--fetch-retries=0",
                 "--fetch-timeout=30000", PACKAGE],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {PACKAGE} did not finish (no package registry?)")
        if done.returncode != 0 or not entry.is_file():
            pytest.skip(f"npm could not install {PACKAGE} (no package registry?): {done.stderr.strip()[-300:]}")
    return [node, str(entry)]


def test_the_kernel_over_the_reference_filesystem_server(server_command, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    notes = root / "notes.txt"
    notes.write_text("buy milk\n")
    ann = tmp_path / "fs.annotations.yaml"
    ann.write_text(ANNOTATIONS)
    with McpTools([*server_command, str(root)], annotations=ann, timeout_s=60) as fs:
        reg = fs.registry()
        assert not reg.get("read_text_file").side_effect and reg.get("write_file").side_effect  # readOnlyHint
        assert [p.key for p in reg.get("write_file").prerequisites] == ["file_read"]
        session = Session(fs, backend=None)
        write = {"path": str(notes), "content": "buy oat milk"}
        request = f"write buy oat milk to {notes}"  # the values a task binds are in the request
        blocked = send(session, turn(request, [task("t1", "write_file", write, prerequisites=[
            {"key": "file_read", "outcome": "absent", "retrieval": None, "recheck": "not_met"}])]))  # fmt: skip
        assert blocked.outcomes["t1"].status == "blocked" and blocked.calls == []
        assert notes.read_text() == "buy milk\n"  # the server was not called
        read = send(session, turn(f"read {notes}", [task("t1", "read_text_file", {"path": str(notes)})]))
        assert read.outcomes["t1"].status == "executed" and read.committed_calls[0].result == {"content": "buy milk\n"}
        assert session.scratchpad.get("file_read") is True  # the next turn sees it
        done = send(session, turn(request, [task("t1", "write_file", write, prerequisites=[
            {"key": "file_read", "outcome": "met"}])]))  # fmt: skip
        assert done.outcomes["t1"].status == "executed" and notes.read_text() == "buy oat milk"
        outside = send(session, turn("read /etc/hostname", [task("t1", "read_text_file", {"path": "/etc/hostname"})]))
        assert outside.outcomes["t1"].status == "tool_failed" and "outside allowed directories" in (
            outside.outcomes["t1"].reason or ""
        )
        assert outside.committed_calls == [] and outside.backend_error is None
