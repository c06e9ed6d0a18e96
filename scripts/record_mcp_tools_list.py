"""Record an MCP server's ``tools/list`` reply over stdio, for the registry import fixtures.

usage: python scripts/record_mcp_tools_list.py OUT.json -- COMMAND [ARG...]

Speaks newline-delimited JSON-RPC 2.0 on the server's stdin/stdout (the MCP
stdio transport): ``initialize`` asking for the newest protocol version we
know, ``notifications/initialized``, then ``tools/list`` page by page
(following ``nextCursor``). It writes the whole JSON-RPC response of the
first page, envelope included, as the server sent it, plus a sidecar
``OUT.meta.json`` with the protocol version and server info the server
answered with. Only the standard library is used, so it runs with any
Python next to the server (``npx``, ``uvx`` or a venv's entry point).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PROTOCOL = "2025-11-25"  # the newest MCP spec revision at the time of writing
TIMEOUT_S = 60


class Session:
    def __init__(self, command: list[str]):
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, text=True, bufsize=1
        )
        self.next_id = 1

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # skip notifications and log lines until our reply
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                print(f"(not JSON-RPC, skipped) {line[:200]}", file=sys.stderr)
                continue
            if msg.get("id") == rid and ("result" in msg or "error" in msg):
                return msg
        raise SystemExit(f"server closed its output before answering {method} (exit {self.proc.poll()})")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    session = Session(argv[2:])
    try:
        init = session.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "forethought-fixture-recorder", "version": "1"},
            },
        )
        if "error" in init:
            raise SystemExit(f"initialize failed: {init['error']}")
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        first = session.request("tools/list", {})
        pages = [first]
        while "result" in pages[-1] and pages[-1]["result"].get("nextCursor"):
            pages.append(session.request("tools/list", {"cursor": pages[-1]["result"]["nextCursor"]}))
    finally:
        session.close()
    if len(pages) > 1:
        print(f"note: {len(pages)} pages; only the first is written", file=sys.stderr)
    out.write_text(json.dumps(first, indent=2, ensure_ascii=False) + "\n")
    meta = {k: init["result"].get(k) for k in ("protocolVersion", "serverInfo", "capabilities")}
    meta["requestedProtocolVersion"] = PROTOCOL
    out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    tools = first.get("result", {}).get("tools", [])
    print(f"{out}: {len(tools)} tools, protocol {meta['protocolVersion']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
