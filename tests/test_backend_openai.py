"""The openai backend against a real local HTTP server (OpenAI chat-completions protocol).

The server plays a vLLM instance serving one adapter per primitive: it
answers each request by looking up the exact messages it was sent, from a
recording of the oracle's answers. The kernel run through HTTP must then
make exactly the calls of the oracle run.
"""

from __future__ import annotations

import json

import pytest

from forethought.kernel.backends.openai_backend import BackendError, OpenAIBackend
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.runner import oracle_factory, run_solution
from forethought.kernel.solution_file import load_solution
from forethought.primitives import SLMRequest
from tests.openai_stub import StubServer, completion

FIG1 = "data_gen/solutions/file_system/paper_figure1.json"


class _Recording:
    def __init__(self, inner, table):
        self.inner, self.table, self.name = inner, table, "rec"

    def complete(self, reqs):
        out = self.inner.complete(reqs)
        for request, rep in zip(reqs, out, strict=False):
            self.table[json.dumps(request.messages, sort_keys=True)] = (request.adapter, rep.text)
        return out


class Server(StubServer):
    """Answers each request with the recorded text for its exact messages; ``mode`` breaks it instead
    (``500``: HTTP 500, ``garbage``: not JSON, ``no_choices``: an empty ``choices``)."""

    def __init__(self, table, mode="ok"):
        super().__init__()
        self.table, self.mode = table, mode

    def reply(self, body):
        if self.mode == "500":
            return 500, b"model crashed"
        if self.mode == "garbage":
            return 200, b"<html>not json</html>"
        if self.mode == "no_choices":
            return 200, completion(body)
        adapter, text = self.table.get(json.dumps(body["messages"], sort_keys=True), (None, "{}"))
        assert adapter is None or adapter == body["model"], (adapter, body["model"])
        return 200, completion(body, {"message": {"role": "assistant", "content": text}})


@pytest.fixture(scope="module")
def recorded():
    sol = load_solution(FIG1).rendered()
    table: dict = {}
    factory = oracle_factory(sol)
    res = run_solution(sol, Kernel(), lambda i, t: _Recording(factory(i, t), table))
    return sol, table, res


def _calls(res):
    return [[(c.tool, c.arguments) for c in t.committed_calls] for t in res.turns]


def test_kernel_over_http_makes_the_oracle_calls(recorded):
    sol, table, oracle_res = recorded
    with Server(table) as srv:
        backend = OpenAIBackend(srv.url, api_key="sk-test", concurrency=4)
        res = run_solution(sol, Kernel(), lambda i, t: backend)
    assert _calls(res) == _calls(oracle_res)
    paths = {p for p, _, _ in srv.requests}
    assert paths == {"/v1/chat/completions"}
    models = {b["model"] for _, b, _ in srv.requests}
    assert models == {"decompose", "match_func"}  # one served model (LoRA adapter) per primitive
    assert all(b["temperature"] == 0.0 for _, b, _ in srv.requests)
    assert all(a == "Bearer sk-test" for _, _, a in srv.requests)
    rec = res.traces[0].by_primitive("decompose")[0]
    assert rec.model["backend"] == "openai" and rec.model["adapter"] == "decompose"


def test_model_names_map_and_structured_outputs(recorded):
    sol, table, _ = recorded
    with Server(table) as srv:
        backend = OpenAIBackend(
            srv.url, models={"decompose": "ft-decompose"}, json_schema=True, extra_body={"stop_token_ids": [106]}
        )
        req = SLMRequest(
            "decompose", None, [{"role": "user", "content": "x"}], json_schema={"type": "object"}, adapter="decompose"
        )  # type: ignore[arg-type]
        backend.complete([req])
    body = srv.requests[0][1]
    assert body["model"] == "ft-decompose"
    assert body["response_format"]["type"] == "json_schema" and body["stop_token_ids"] == [106]


def test_the_server_gets_the_same_contract_compiled_schema_the_hf_backend_decodes_with(recorded):
    """Through the kernel, each request carries its primitive's per-request schema (kernel/decoding.py), with the
    trained JSON format as x-guidance, so a vLLM server (guidance backend) constrains exactly as the hf backend."""
    import re

    from forethought.kernel.decoding import JSON_FORMAT

    sol, table, _ = recorded
    with Server(table) as srv:
        backend = OpenAIBackend(srv.url, json_schema=True)
        run_solution(sol, Kernel(), lambda i, t: backend)
    sent = [(body["model"], body["response_format"]["json_schema"], body["messages"]) for _, body, _ in srv.requests]
    assert sent and all(
        schema["name"] == model and schema["schema"]["x-guidance"] == JSON_FORMAT for model, schema, _ in sent
    )
    model, schema, messages = next(x for x in sent if x[0] == "decompose")
    offered = [v["properties"]["tool_name"]["const"] for v in schema["schema"]["properties"]["tasks"]["items"]["anyOf"]]
    listed = re.findall(r"^- (\w+)\(", messages[-1]["content"], re.M)
    assert offered == [*listed, None]  # the tools of this very request, and "no listed tool"


def test_each_primitive_may_have_its_own_server(recorded):
    """A full-weight bundle is served one model per server: backend.urls routes a served name to its URL."""
    sol, table, oracle_res = recorded
    with Server(table) as main, Server(table) as own:
        backend = OpenAIBackend(main.url, urls={"match_func": own.url})
        res = run_solution(sol, Kernel(), lambda i, t: backend)
    assert _calls(res) == _calls(oracle_res)
    assert {body["model"] for _, body, _ in own.requests} == {"match_func"}
    assert "match_func" not in {body["model"] for _, body, _ in main.requests} and main.requests
    assert res.traces[0].by_primitive("match_func")[0].model["url"].startswith(own.url)


@pytest.mark.parametrize(
    "mode,needle",
    [
        ("500", "HTTP 500: model crashed"),
        ("garbage", "reply is not JSON"),
        ("no_choices", "no choices[0].message.content"),
    ],
)
def test_bad_server_replies_give_located_errors(recorded, mode, needle):
    sol, table, _ = recorded
    with Server(table, mode) as srv:
        backend = OpenAIBackend(srv.url)
        req = SLMRequest("match_func", None, [{"role": "user", "content": "x"}], adapter="match_func")  # type: ignore[arg-type]
        with pytest.raises(BackendError) as ei:
            backend.complete([req])
        assert srv.url in str(ei.value) and "'match_func'" in str(ei.value) and needle in str(ei.value)
        # Inside the kernel the failure is a backend error of that turn: never a contract
        # violation (a model answer), a crash or an execution.
        res = run_solution(
            sol, Kernel(KernelConfig(retries=1, backend_retries=1, backend_retry_wait_s=0)), lambda i, t: backend
        )
    assert all(t.backend_error is not None and t.halted is None and t.calls == [] for t in res.turns)
    assert needle in res.turns[0].backend_error["message"] and res.turns[0].backend_error["attempts"] == 2
    assert all(r.action == "backend_error" for tr in res.traces for r in tr if r.kind == "slm")


def test_unreachable_server():
    backend = OpenAIBackend("http://127.0.0.1:9/v1", timeout_s=2)
    with pytest.raises(BackendError, match="cannot reach the server"):
        backend.complete([SLMRequest("get_order", None, [], adapter="get_order")])  # type: ignore[arg-type]
