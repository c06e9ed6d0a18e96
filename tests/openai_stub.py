"""A local OpenAI-compatible chat-completions server for the tests: a real HTTP server on 127.0.0.1 (a port the
OS picks) in a thread of the test process, so the client code under test runs its real requests offline.

Each request is kept as ``(path, body, Authorization header)`` in ``requests``; what the server answers is the
subclass's ``reply(body)``: an HTTP status and the payload (a status other than 200 sends the payload as is,
with no content type, as a crashed or overloaded server would).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(body: dict[str, Any], *choices: dict[str, Any]) -> bytes:
    """A chat-completions reply to ``body`` with these choices."""
    return json.dumps({"model": body["model"], "choices": list(choices)}).encode()


class StubServer:
    """Use as a context manager: the server runs inside the ``with`` block, at ``url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(self):
        self.requests: list[tuple[str, Any, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body, self.headers.get("Authorization")))
                status, payload = outer.reply(body)
                self.send_response(status)
                if status == 200:
                    self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def reply(self, body: dict[str, Any]) -> tuple[int, bytes]:
        raise NotImplementedError

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class ChatServer(StubServer):
    """Answers with a scripted model: its ``choice(body)`` (a whole choice) or else ``answer(body)`` (the message);
    ``mode="down"`` answers HTTP 503."""

    def __init__(self, model: Any, mode: str = "ok"):
        super().__init__()
        self.model, self.mode = model, mode

    def reply(self, body: dict[str, Any]) -> tuple[int, bytes]:
        if self.mode == "down":
            return 503, b"overloaded"
        choice = self.model.choice(body) if hasattr(self.model, "choice") else {"message": self.model.answer(body)}
        return 200, completion(body, choice)
