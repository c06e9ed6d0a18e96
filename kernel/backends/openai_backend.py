"""OpenAI-compatible chat-completions backend (e.g. a vLLM server serving one LoRA adapter per primitive).

Each primitive is served under its own model name (vLLM ``--lora-modules
decompose=... get_order=...``); requests to one primitive are sent
concurrently and the server batches them. Only the standard library is used.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from forethought.config import MASK
from forethought.errors import UserError
from forethought.primitives import BackendError as _DSLBackendError
from forethought.primitives import SLMReply, SLMRequest

MAX_REPLY_BYTES = 8 * 1024 * 1024  # a chat completion is kilobytes; more is a broken or hostile server


class BackendError(_DSLBackendError):
    """A located error from a model server (URL, model, status, what was wrong)."""


class PermanentBackendError(BackendError):
    """A reply that a retry would not change (HTTP 4xx other than 408/429)."""

    transient = False


def resolve_api_key(cfg: Any, where: str) -> str | None:
    """The endpoint's key, as users expect it: ``api_key`` when a (private) config file sets it, else the
    first line of ``api_key_file``, else the environment variable ``api_key_env`` (``OPENAI_API_KEY`` by
    default); None when there is none (a local vLLM needs none). The value is read here, when the client
    is built, and held only by the client: it is never written back into a config, a trace or a report,
    nor into an error about it. ``where`` names the config section for a located error (``backend``, ``responder``)."""
    secret = getattr(cfg, "api_key", None)
    if secret is not None:
        value = secret.get_secret_value() if hasattr(secret, "get_secret_value") else str(secret)
        if value.strip():
            return _header_safe(value.strip(), f"{where}.api_key")
    path = getattr(cfg, "api_key_file", None)
    if path:
        # a value with no path in it is more likely a key pasted where its file's name goes: never shown
        shown = (
            f" {path}"
            if any(c in str(path) for c in "/\\~.")
            else " (the value is not shown: it has no path in it; a key?)"
        )
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise UserError(f"cannot read the key file{shown}: {why}", f"{where}.api_key_file") from None
        lines = [x.strip() for x in text.splitlines() if x.strip()]
        if not lines:
            raise UserError(f"the key file{shown} is empty", f"{where}.api_key_file")
        return _header_safe(lines[0], f"{where}.api_key_file")
    env = getattr(cfg, "api_key_env", None) or "OPENAI_API_KEY"
    value = os.environ.get(env, "").strip()
    return _header_safe(value, f"${env}") if value else None


def _header_safe(key: str, where: str) -> str:
    """A key an HTTP header can carry (printable ASCII): anything else is refused here, located, without the key."""
    bad = next((c for c in key if not (32 <= ord(c) < 127)), None)
    if bad is not None:
        what = "a line break" if bad in "\r\n" else f"the character U+{ord(bad):04X}"
        raise UserError(f"the key holds {what}, which an HTTP header cannot carry (the key is not shown)", where)
    return key


class _Deadline:
    """Shuts the connection's socket down when the request's total time is up.

    ``timeout`` on a socket bounds each read; a server trickling one byte per
    second never trips it. Shutting the socket down from a timer wakes any
    blocked read, so ``timeout_s`` bounds the whole request.
    """

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self.conn, self.expired = conn, False
        self.timer = threading.Timer(seconds, self._expire)
        self.timer.daemon = True

    def _expire(self) -> None:
        self.expired = True
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> _Deadline:
        self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.timer.cancel()


def _chat_url(base_url: str) -> str:
    return base_url + "/chat/completions" if base_url.endswith("/v1") else base_url + "/v1/chat/completions"


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        models: dict[str, str] | None = None,
        max_tokens: int = 512,
        timeout_s: float = 120.0,
        concurrency: int = 8,
        json_schema: bool = False,
        extra_body: dict[str, Any] | None = None,
        urls: dict[str, str] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.url = _chat_url(self.base_url)
        # served model name -> its own server (full-weight bundles: one vLLM server per primitive)
        self.urls = {name: _chat_url(u.rstrip("/")) for name, u in (urls or {}).items()}
        self.api_key = api_key
        self.models = dict(models or {})  # primitive (adapter) name -> served model name
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.json_schema = json_schema
        self.extra_body = dict(extra_body or {})

    def model_for(self, req: SLMRequest) -> str:
        name = req.adapter or req.primitive
        return self.models.get(name, name)

    def _body(self, req: SLMRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_for(req),
            "messages": req.messages,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
        }
        if self.json_schema and req.json_schema is not None:
            # Structured outputs (vLLM guided decoding): the type contract holds by construction.
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": req.primitive, "schema": req.json_schema},
            }
        body.update(self.extra_body)
        return body

    def _send(self, data: bytes, headers: dict[str, str], where: str, url: str | None = None) -> bytes:
        """POST ``data``; the reply body, or a located :class:`BackendError`. ``timeout_s`` bounds it all."""
        parts = urllib.parse.urlsplit(url or self.url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname or "", parts.port, timeout=self.timeout_s)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        t0 = time.monotonic()
        with _Deadline(conn, self.timeout_s) as deadline:
            try:
                conn.request("POST", path, body=data, headers=headers)
                response = conn.getresponse()
                body = response.read(MAX_REPLY_BYTES + 1)
                if deadline.expired:  # the read returned what it had when the socket was shut down
                    raise TimeoutError
                if len(body) > MAX_REPLY_BYTES:  # stopped reading at the cap: the rest was never asked for
                    raise BackendError(
                        f"{where}: reply is larger than {MAX_REPLY_BYTES} bytes (the size cap of a reply); "
                        "a chat completion is kilobytes: a broken server, or max_tokens far too high"
                    )
                if response.length:  # bytes the server announced but never sent
                    raise http.client.IncompleteRead(body, response.length)
            except (OSError, http.client.HTTPException) as exc:
                if deadline.expired or isinstance(exc, TimeoutError):
                    raise BackendError(
                        f"{where}: no complete reply within timeout_s={self.timeout_s:g} "
                        f"(gave up after {time.monotonic() - t0:.1f} s)"
                    ) from None
                if isinstance(exc, http.client.HTTPException):
                    raise BackendError(f"{where}: protocol error: {type(exc).__name__}: {exc!r}") from None
                raise BackendError(f"{where}: cannot reach the server: {exc}") from None
            finally:
                conn.close()
        if response.status >= 400:
            detail = self._mask(body.decode(errors="replace"))[
                :300
            ]  # masked whole, then cut: no piece of the key shows
            cls_err = BackendError if response.status >= 500 or response.status in (408, 429) else PermanentBackendError
            raise cls_err(f"{where}: HTTP {response.status}: {detail}")
        return body

    def _mask(self, text: str) -> str:
        return text.replace(self.api_key, MASK) if self.api_key else text

    def _redacted(self, exc: BackendError) -> BackendError:
        """``exc`` with the key masked: a server may echo the Authorization header into its error body, and these
        messages go into turns.json, traces and reports (the key reaches no file: docs/guarantees.md)."""
        if not self.api_key or self.api_key not in exc.message:
            return exc
        return type(exc)(
            exc.message.replace(self.api_key, MASK), primitive=exc.primitive, path=exc.path, attempts=exc.attempts
        )

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one chat-completions ``body`` as it is; the reply as JSON, or a located :class:`BackendError`.
        The primitives' requests go through here, and so do the bench's responder and vanilla requests
        (with ``tools``), so that one client, one key and one deadline serve them all."""
        try:
            return self._chat(body)
        except BackendError as exc:
            raise self._redacted(exc) from None

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.urls.get(body.get("model"), self.url)
        where = f"{url} (model {body.get('model')!r})"
        raw = self._send(data, headers, where, url)
        try:
            # a server that echoes the key into a reply (an answer, a tool call) must not carry it into traces
            reply = json.loads(self._mask(raw.decode("utf-8")))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BackendError(
                f"{where}: reply is not JSON: {self._mask(raw.decode(errors='replace'))[:200]!r}"
            ) from None
        if not isinstance(reply, dict):
            raise BackendError(f"{where}: reply is {type(reply).__name__}, not a JSON object")
        return reply

    def _post(self, req: SLMRequest) -> SLMReply:
        try:
            return self._answer(req)
        except BackendError as exc:
            raise self._redacted(exc) from None

    def _answer(self, req: SLMRequest) -> SLMReply:
        body = self._body(req)
        where = f"{self.urls.get(body['model'], self.url)} (model {body['model']!r})"
        reply = self.chat(body)
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{where}: reply has no choices[0].message.content: {json.dumps(reply)[:200]}") from None
        if not isinstance(text, str):
            raise BackendError(f"{where}: choices[0].message.content is {type(text).__name__}, not text")
        model = reply.get("model", body["model"])
        return SLMReply(
            text,
            {
                "backend": "openai",
                "model": model,
                "adapter": req.adapter,
                "url": self.urls.get(body["model"], self.url),
            },
        )

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        if len(requests) <= 1 or self.concurrency <= 1:
            return [self._post(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._post, requests))
