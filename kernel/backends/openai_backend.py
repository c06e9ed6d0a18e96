"""OpenAI-compatible chat-completions backend (e.g. a vLLM server serving one LoRA adapter per primitive).

Each primitive is served under its own model name (vLLM ``--lora-modules
decompose=... get_order=...``); requests to one primitive are sent
concurrently and the server batches them. Only the standard library is used.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from primitives import SLMReply, SLMRequest


class BackendError(RuntimeError):
    """A located error from a model server (URL, model, status, what was wrong)."""


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
    ):
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions" if self.base_url.endswith("/v1") else self.base_url + "/v1/chat/completions"
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
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": req.primitive, "schema": req.json_schema}}
        body.update(self.extra_body)
        return body

    def _post(self, req: SLMRequest) -> SLMReply:
        body = self._body(req)
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        where = f"{self.url} (model {body['model']!r})"
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url, data=data, headers=headers), timeout=self.timeout_s) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            raise BackendError(f"{where}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise BackendError(f"{where}: cannot reach the server: {getattr(exc, 'reason', exc)}") from None
        try:
            reply = json.loads(raw)
        except json.JSONDecodeError:
            raise BackendError(f"{where}: reply is not JSON: {raw[:200]!r}") from None
        try:
            text = reply["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{where}: reply has no choices[0].message.content: {json.dumps(reply)[:200]}") from None
        if not isinstance(text, str):
            raise BackendError(f"{where}: choices[0].message.content is {type(text).__name__}, not text")
        return SLMReply(text, {"backend": "openai", "model": reply.get("model", body["model"]), "adapter": req.adapter, "url": self.base_url})

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        if len(requests) <= 1 or self.concurrency <= 1:
            return [self._post(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._post, requests))
