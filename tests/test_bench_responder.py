"""``forethought bench bfcl mode=responder|vanilla`` against a local OpenAI-compatible server (issue 18).

Offline: the server runs in the test process and answers *scripted*, as a model knowing BFCL's ground
truth would (every figure here is that script's, not a model's): the responder answers each rendered
kernel turn with the turn's ground-truth calls as OpenAI tool calls; vanilla answers each turn's first
step with them and the step after their results with no call. The kernel's primitives answer from a
recording made with the scripted backend of tests/test_bench_bfcl.py, replayed strictly by the command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")

from forethought.bench import bfcl_data, responder  # noqa: E402
from forethought.bench.bfcl_run import BenchConfig, run_bench  # noqa: E402
from forethought.cli import main  # noqa: E402
from forethought.kernel.backends.openai_backend import BackendError  # noqa: E402
from forethought.kernel.program import Kernel  # noqa: E402
from forethought.kernel.records import TurnResult  # noqa: E402
from forethought.kernel.registry import Registry, parse_call  # noqa: E402
from forethought.kernel.runner import oracle_factory, run_solution  # noqa: E402
from forethought.kernel.solution_file import load_solution  # noqa: E402
from tests.openai_stub import ChatServer  # noqa: E402
from tests.test_bench_bfcl import GroundTruthBackend, _entry  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
IDS = ["multi_turn_base_1", "multi_turn_base_2", "multi_turn_miss_func_0"]
KEY = "sk-responder-5d1e0b9a77c2"  # made up; no written file may contain it


def _tool_call(n: int, text: str, signatures) -> dict:
    call = parse_call(text, signatures)
    return {"id": f"call_{n}", "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.args)}}


class ScriptedModel:
    """The base model behind the endpoint, scripted from the ground truth (see the module's docstring)."""

    def __init__(self, entries):
        self.signatures = {t.name: t.param_names for tools in bfcl_data.class_tools().values() for t in tools}
        self.by_request: dict[str, list[list[str]]] = {}  # the kernel's request of a turn -> its ground truths
        self.by_turn: dict[tuple[str, int], list[str]] = {}  # (first user text, turn) -> its ground truth
        for entry in entries:
            pending = None
            for i, (text, calls) in enumerate(zip(entry.turns, entry.ground_truth, strict=True)):
                request = bfcl_data.request_text(pending, text)
                self.by_request.setdefault(request, []).append(calls)
                self.by_turn[(entry.turns[0], i)] = calls
                pending = request if not calls else None

    def answer(self, body: dict) -> dict:
        messages = body["messages"]
        if messages[0]["role"] == "system" and messages[0]["content"] == responder.SYSTEM_PROMPT:
            rendered = messages[1]["content"]
            request = re.search(r"## Request\n(.*?)\n\n## Tasks", rendered, re.S).group(1)  # type: ignore[union-attr]
            # A holdout turn repeats the pending request: answer the ground truth whose functions are offered.
            offered = {t["function"]["name"] for t in body["tools"]}
            calls = next(
                (
                    c
                    for c in self.by_request.get(request, [])
                    if c and all(parse_call(x, self.signatures).name in offered for x in c)
                ),
                [],
            )
            if not calls:
                return {"role": "assistant", "content": "No call: a function or a value is missing."}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [_tool_call(n, c, self.signatures) for n, c in enumerate(calls)],
            }
        if messages[-1]["role"] == "tool":  # vanilla, after the results: the turn is done
            return {"role": "assistant", "content": "Done."}
        users = [m for m in messages if m["role"] == "user"]
        calls = self.by_turn.get((users[0]["content"], len(users) - 1), [])
        if not calls:
            return {"role": "assistant", "content": "I cannot do that with these functions."}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [_tool_call(n, c, self.signatures) for n, c in enumerate(calls)],
        }


@pytest.fixture(scope="module")
def entries():
    return [_entry(i) for i in IDS]


@pytest.fixture(scope="module")
def recording(entries, tmp_path_factory):
    """The kernel's primitives in the kernel and responder modes, recorded from the scripted backend."""
    out = tmp_path_factory.mktemp("responder") / "record"
    with ChatServer(ScriptedModel(entries)) as srv:
        cfg = BenchConfig(
            mode=["kernel", "responder"],
            categories=["base", "miss_func"],
            ids=IDS,
            cvc="both",
            output_dir=str(out),
            record=True,
            responder={"base_url": srv.url},
        )
        run_bench(cfg, backend=GroundTruthBackend(entries))
    return out / "recording.jsonl"


@pytest.fixture(scope="module")
def side_by_side(entries, recording, tmp_path_factory):
    """The command itself: the three modes, CVC on and off, in one report; the key from a named variable."""
    out = tmp_path_factory.mktemp("responder") / "side_by_side"
    mp = pytest.MonkeyPatch()
    mp.setenv("FT_RESPONDER_KEY", KEY)
    try:
        with ChatServer(ScriptedModel(entries)) as srv:
            code = main(
                [
                    "bench",
                    "bfcl",
                    "mode=[kernel,responder,vanilla]",
                    "categories=[base,miss_func]",
                    f"ids=[{','.join(IDS)}]",
                    "cvc=both",
                    f"replay={recording}",
                    "backend=hf",
                    "backend.bundle=/nonexistent",
                    f"responder.base_url={srv.url}",
                    "responder.model=base-12b",
                    "responder.api_key_env=FT_RESPONDER_KEY",
                    f"output_dir={out}",
                ]
            )
    finally:
        mp.undo()
    return code, out, srv.requests


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def test_the_three_modes_side_by_side_through_the_command(side_by_side):
    code, out, _ = side_by_side
    assert code == 0
    cats = _summary(out)["categories"]
    verdicts = {k: v["verdicts"] for k, v in cats["multi_turn_base"].items()}
    # base_2 halts in the kernel with CVC on (decompose's grounding refuses 'documents' for "document folder");
    # the responder, reading that trace, answers the calls and they pass the guards; vanilla has no kernel.
    assert verdicts == {
        "cvc_on": {"multi_turn_base_1": True, "multi_turn_base_2": False},
        "cvc_off": {"multi_turn_base_1": True, "multi_turn_base_2": True},
        "responder_cvc_on": {"multi_turn_base_1": True, "multi_turn_base_2": True},
        "responder_cvc_off": {"multi_turn_base_1": True, "multi_turn_base_2": True},
        "vanilla": {"multi_turn_base_1": True, "multi_turn_base_2": True},
    }
    assert cats["multi_turn_miss_func"]["responder_cvc_on"]["verdicts"] == {"multi_turn_miss_func_0": True}
    assert cats["multi_turn_miss_func"]["vanilla"]["verdicts"] == {"multi_turn_miss_func_0": True}
    report = (out / "report.md").read_text()
    assert (
        "| category | kernel, CVC on | kernel, CVC off | responder, CVC on | responder, CVC off | vanilla (no kernel) |"
        in report
    )
    assert (
        "| multi_turn_base | 1/2 (50.0 %) | 2/2 (100.0 %) | 2/2 (100.0 %) | 2/2 (100.0 %) | 2/2 (100.0 %) |" in report
    )
    assert "Base model (responder and vanilla): `base-12b` at http" in report
    for folder in ("cvc_on", "cvc_off", "responder_cvc_on", "responder_cvc_off", "vanilla"):
        assert (out / folder / "BFCL_v4_multi_turn_base_score.json").is_file(), folder


def test_departures_from_the_trace_are_recorded_per_turn(side_by_side):
    _, out, _ = side_by_side
    rows = [
        json.loads(x) for x in (out / "responder_cvc_on" / "multi_turn_base_answers.jsonl").read_text().splitlines()
    ]
    assert {r["render_version"] for r in rows} == {responder.RENDER_VERSION}
    base_1 = [r for r in rows if r["entry"] == "multi_turn_base_1"]
    assert base_1 and not any(r["departure"]["departs"] for r in base_1)  # the trace had the ground truth: kept
    assert all(r["answer_calls"] == r["trace_calls"] == r["committed"] for r in base_1)
    departing = [r for r in rows if r["departure"]["departs"]]
    assert departing and {r["entry"] for r in departing} == {"multi_turn_base_2"}
    for row in departing:  # the kernel halted: nothing in the trace, so every answered call is added
        assert row["trace_calls"] == [] and row["departure"]["added"] == row["answer_calls"] == row["committed"]
        assert "## Halted" in row["rendered"]
    model_summary = _summary(out)["categories"]["multi_turn_base"]["responder_cvc_on"]["model"]
    assert model_summary["departing_turns"] == len(departing) and model_summary["added"] == sum(
        len(r["answer_calls"]) for r in departing
    )
    assert (
        model_summary["dropped"]
        == model_summary["changed"]
        == model_summary["parse_errors"]
        == model_summary["blocked_calls"]
        == 0
    )
    report = (out / "report.md").read_text()
    assert f"| multi_turn_base | responder, on | {len(rows)} | {len(departing)} |" in report
    assert "- multi_turn_base multi_turn_base_2 turn " in report


def test_the_protocol_the_endpoint_sees(side_by_side, entries):
    _, out, requests = side_by_side
    assert requests and {p for p, _, _ in requests} == {"/v1/chat/completions"}
    assert {a for _, _, a in requests} == {f"Bearer {KEY}"}  # the key from responder.api_key_env
    assert {b["model"] for _, b, _ in requests} == {"base-12b"}
    responder_bodies = [b for _, b, _ in requests if b["messages"][0].get("content") == responder.SYSTEM_PROMPT]
    vanilla_bodies = [b for _, b, _ in requests if b not in responder_bodies]
    assert responder_bodies and vanilla_bodies
    for body in responder_bodies:
        assert len(body["messages"]) == 2 and body["messages"][1]["content"].startswith(
            f"FORETHOUGHT TRACE v{responder.RENDER_VERSION}\n"
        )
        assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in body["tools"])
    # vanilla: bfcl's conversation, growing turn by turn, with each tool result answering its call by id
    last = max(vanilla_bodies, key=lambda b: len(b["messages"]))
    ids = [tc["id"] for m in last["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"]
    assert ids and answered == ids
    assert last["messages"][0] == entries[0].raw["question"][0][0] or last["messages"][0]["role"] == "user"
    # the miss_func holdout turn: bfcl's own prompt, and the withheld function only from then on
    miss = [b for b in vanilla_bodies if b["messages"][0]["content"] == entries[2].turns[0]]
    names = [{t["function"]["name"] for t in b["tools"]} for b in miss]
    assert any("sort" not in n for n in names) and any("sort" in n for n in names)
    assert any(
        m["content"] == bfcl_data.request_text(None, "") for b in miss for m in b["messages"] if m["role"] == "user"
    )
    rows = [json.loads(x) for x in (out / "vanilla" / "multi_turn_base_answers.jsonl").read_text().splitlines()]
    assert all(r["steps"] and not r["step_limit"] for r in rows)


def test_no_written_file_holds_the_key(side_by_side, capsys):
    _, out, _ = side_by_side
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10 and [str(p) for p in files if KEY.encode() in p.read_bytes()] == []
    assert (
        main(["bench", "bfcl", "mode=responder", f"responder.api_key={KEY}", "--cfg"]) == 2
    )  # never on the command line
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err and "responder.api_key_env=NAME" in printed.err


def test_a_responder_that_does_not_answer_is_never_scored(entries, recording, tmp_path, capsys):
    with ChatServer(ScriptedModel(entries), mode="down") as srv:
        code = main(
            [
                "bench",
                "bfcl",
                "mode=responder",
                f"ids=[{IDS[0]}]",
                f"replay={recording}",
                f"responder.base_url={srv.url}",
                "responder.retries=1",
                "responder.retry_wait_s=0",
                f"output_dir={tmp_path / 'o'}",
            ]
        )
    assert code == 1
    assert len(srv.requests) == 2  # the request and its one retry
    err = capsys.readouterr().err
    assert (
        "1 entry got no answer from the backend and were not scored (first: multi_turn_base_1 turn 0:" in err
        and "HTTP 503" in err
    )
    stats = _summary(tmp_path / "o")["categories"]["multi_turn_base"]["responder_cvc_on"]
    assert stats["scored"] == 0 and stats["verdicts"] == {"multi_turn_base_1": None}


# -- the answer's parsing, and departures -------------------------------------------------


def _registry() -> Registry:
    return bfcl_data.entry_registry(_entry("multi_turn_base_0"))


def _reply(message):
    return {"choices": [{"message": message}]}


def test_tool_calls_and_call_strings_are_read_and_failures_located():
    reg = _registry()
    answer = responder.parse_answer(
        _reply(
            {
                "tool_calls": [
                    {"id": "a", "function": {"name": "cd", "arguments": '{"folder": "document"}'}},
                    {"id": "b", "function": {"name": "mkdir", "arguments": '{"dir_name": '}},
                    {"id": "c", "function": {"name": "ls", "arguments": ""}},
                    {"id": "d", "function": {"name": "rm -rf", "arguments": "{}"}},
                    {"id": "e", "function": {"name": "mv", "arguments": "[1]"}},
                ]
            }
        ),
        reg,
    )
    assert answer.calls == [("cd", {"folder": "document"}, "a"), ("ls", {}, "c")]
    assert answer.errors[0].startswith("tool_calls[1].function.arguments: not JSON (Expecting value at column 14) in ")
    assert answer.errors[1] == "tool_calls[3].function.name: 'rm -rf' is not a function name"
    assert answer.errors[2] == "tool_calls[4].function.arguments: expected an object, got list"
    text = responder.parse_answer(
        _reply({"content": "Sure.\n```python\n[cd(folder='document'), mkdir(dir_name='temp')]\n```"}), reg
    )
    assert [(n, x) for n, x, _ in text.calls] == [
        ("cd", {"folder": "document"}),
        ("mkdir", {"dir_name": "temp"}),
    ] and not text.errors
    assert responder.parse_answer(_reply({"content": "[cd('document')]"}), reg).calls == [
        ("cd", {"folder": "document"}, None)
    ]
    broken = responder.parse_answer(_reply({"content": "[cd(folder='document'), mkdir(dir_name=]"}), reg)
    assert broken.calls == [] and broken.errors[0].startswith("content: ")
    prose = responder.parse_answer(_reply({"content": "No call is needed: the file is missing."}), reg)
    assert prose.calls == [] and prose.errors == []
    with pytest.raises(BackendError, match="reply has no choices"):
        responder.parse_answer({"choices": []}, reg)


def test_answered_calls_run_through_the_guards(entries):
    from forethought.bench.bfcl_env import BfclEnvironment
    from forethought.bench.bfcl_modes import execute_answer
    from forethought.kernel.records import KernelConfig, TurnState
    from forethought.kernel.scratchpad import Scratchpad

    entry = _entry("multi_turn_base_0")
    answer = responder.Answer(
        calls=[
            ("cd", {"folder": "document"}, None),
            ("launch", {}, None),
            ("mkdir", {"dir_name": 7}, None),
            ("mkdir", {"dir_name": "temp"}, None),
        ]
    )
    for cvc, expect in ((True, ["pre"]), (False, [])):
        env = BfclEnvironment(entry)
        turn = TurnState(
            config=KernelConfig(cvc=cvc),
            env=env,
            scratchpad=Scratchpad(),
            registry=bfcl_data.entry_registry(entry),  # type: ignore[arg-type]
            tool_briefs=[],
            user="",
            turn_context={},
        )
        committed, blocked = execute_answer(answer, turn, "r0")
        assert blocked[0] == {
            "call": "launch()",
            "stage": "unregistered",
            "reasons": ["'launch' is not in the registry"],
        }
        assert [
            b["stage"] for b in blocked[1:]
        ] == expect  # CVC on: ToolGate's precondition refuses a number for a string
        assert committed[0] == "cd(folder='document')" and committed[-1] == "mkdir(dir_name='temp')"
        assert "temp" in env.instances["GorillaFileSystem"].ls()["current_directory_content"]


def test_departures_pair_a_changed_call_by_function():
    departures = responder.departures(
        ["cd(folder='a')", "mkdir(dir_name='x')", "ls()"], ["cd(folder='b')", "ls()", "pwd()"]
    )
    assert departures == {
        "kept": 1,
        "added": ["pwd()"],
        "dropped": ["mkdir(dir_name='x')"],
        "changed": [{"trace": "cd(folder='a')", "answer": "cd(folder='b')"}],
        "departs": True,
    }
    assert responder.departures(["ls()", "ls()"], ["ls()"])["dropped"] == ["ls()"]
    assert responder.departures(["ls()"], ["ls()"]) == {
        "kept": 1,
        "added": [],
        "dropped": [],
        "changed": [],
        "departs": False,
    }


# -- what the rendering holds: the paper's Figure 1, and blocked / missing turns --------------------


def _rendered(path: str) -> list[str]:
    sol = load_solution(path).rendered()
    res = run_solution(sol, Kernel(), oracle_factory(sol))
    return [responder.render_turn(t.user, t, tr) for t, tr in zip(res.turns, res.traces, strict=True)]


def test_the_rendering_of_figure_1_holds_what_the_responder_needs():
    first, second = _rendered("data_gen/solutions/file_system/paper_figure1.json")
    assert first.startswith(
        f"FORETHOUGHT TRACE v{responder.RENDER_VERSION}\n\n## Request\nMove report.txt into a new folder called archive.\n"
    )
    for needed in (
        '- t1: Create the directory archive; values {"dir_name": "archive"}',
        "- t2: Move report.txt into archive; after t1",
        "## Order (get_order)\nt1, t2",
        '### t1: Create the directory archive\nfunction (match_func): mkdir\nparameter dir_name = "archive" (from request)\noutcome: executed (mkdir)',
        '1. [t1, task] mkdir(dir_name=\'archive\') -> committed; result {"created": "archive"}',
        "2. [t2, task] mv(source='report.txt', destination='archive') -> committed; result",
        "- decompose: 1 attempt(s); violations: none",
        '- destination = "archive"',
    ):
        assert needed in first, needed
    assert 'parameter folder = "archive" (from scratchpad)' in second  # the second turn binds from what the first wrote
    assert (
        "grep(file_name='report.txt', pattern='revenue') -> committed; result {\"matching_lines\": [\"Q1 revenue grew 4%\""
        in second
    )


@pytest.mark.parametrize(("path", "needed"), [
    ("data_gen/solutions/telecom/roaming_blocked_then_resume.json",
     ["outcome: blocked (enable_roaming): prerequisite 'line_status[L-2048]' not met", "blocked on: line_status[L-2048]",
      "remediation: resume_line(customer_id='C2003', line_id='L-2048')",
      "prerequisite line_status[L-2048]: absent; remediation resume_line(customer_id='C2003', line_id='L-2048'); "
      "retrieval get_details_by_id(id='L-2048'); rechecked: not_met"]),
    ("data_gen/solutions/telecom/suspend_reason_missing_then_given.json",
     ["parameter reason = MISSING (from missing)", "outcome: missing_param (suspend_line): no value for ['reason']",
      "missing parameters: reason"]),
    ("data_gen/solutions/telecom/speed_test_and_network_reset.json",
     ["function (match_func): none", "outcome: missing_function: no registry tool matches this task"]),
])  # fmt: skip
def test_the_rendering_holds_blocked_tasks_and_missing_functions_and_parameters(path, needed):
    first = _rendered(path)[0]
    for line in needed:
        assert line in first, line


def test_the_format_document_names_every_section_the_rendering_writes():
    doc = (ROOT / "docs" / "responder.md").read_text()
    assert (
        f"FORETHOUGHT TRACE v{responder.RENDER_VERSION}" in doc
        and f'RENDER_VERSION = "{responder.RENDER_VERSION}"' in doc
    )
    texts = _rendered("data_gen/solutions/telecom/roaming_blocked_then_resume.json")
    texts.append(responder.render_turn("x", TurnResult(index=0, user="x", halted={"reason": "a cycle"})))
    sections = {ln for t in texts for ln in t.splitlines() if ln.startswith("## ")}
    assert len(sections) == 8, sections
    for section in sections:
        assert f"`{section}`" in doc, section


# -- forethought bench serving: does each served adapter apply? ---------------------------------


class Deployment:
    """A served base and five adapters (scripted): get_order's adapter is silently the base, as vLLM serves
    it when the adapter's keys do not match the model; the others change the first token's log-probability."""

    def choice(self, body):
        same = body["model"] in ("base-12b", "get_order")
        shift = 0.0 if same else 0.25
        tokens = [{"token": "{", "logprob": -0.1 - shift}, {"token": "}", "logprob": -0.2}]
        text = '{"tasks": []}' if same else '{"tasks": [{"id": "t1"}]}'
        return {
            "message": {"role": "assistant", "content": text if body["model"] != "match_fill" else '{"tasks": []}'},
            "logprobs": {"content": tokens},
        }


def test_serving_check_finds_an_adapter_served_as_the_base(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ChatServer(Deployment()) as srv:  # type: ignore[arg-type]
        code = main(
            [
                "bench",
                "serving",
                "backend=openai",
                f"backend.base_url={srv.url}",
                "responder.model=base-12b",
                "+backend.models.decompose=ft-decompose",
            ]
        )
    out = capsys.readouterr().out
    assert code == 1
    assert "get_order            model 'get_order': SAME AS THE BASE (adapter not applied?)" in out
    assert "error: get_order: the served adapter answers the probe exactly as the base model does" in out
    # match_fill's text equals the base's, but its log-probabilities do not: it applies
    assert "match_fill           model 'match_fill': applies; text differs: False; max |Δlogprob| 0.25" in out
    assert "model 'ft-decompose': applies" in out
    models = [b["model"] for _, b, _ in srv.requests]
    assert models[0] == "base-12b" and sorted(models[1:]) == sorted(
        ["ft-decompose", "get_order", "check_prerequisites", "match_func", "match_fill"]
    )
    assert all(b["logprobs"] is True and b["temperature"] == 0.0 for _, b, _ in srv.requests)
    assert {a for _, _, a in srv.requests} == {f"Bearer {KEY}"}
    assert main(["bench", "serving"]) == 2  # the hf backend is no deployment
    assert "error: backend: bench serving checks a served deployment" in capsys.readouterr().err
