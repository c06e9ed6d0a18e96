"""One rule for credentials, for every command (issue 25 part 1; docs/guarantees.md "Secrets"): a key is refused on
the command line before anything runs, and a key given the accepted way (an environment variable) reaches no file a
run writes, nor its output, even when the server echoes it back in an error.

Every command whose config holds a secret field is listed in SECRET_COMMANDS (a test checks the list is complete);
each is run for real against a local server that puts the bearer token it received into its error replies, and then
every file under the test's folder (the output folder and the working directory) is grepped for the key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from forethought.cli import CONFIGURED, SUBCOMMAND_CONFIGS, main
from forethought.config import (
    MASK,
    SECRET_KEYS,
    compose_config,
    mask_secrets,
    recorded_command,
    secrets_on_command_line,
)
from tests.disk import tree
from tests.openai_stub import StubServer, completion

KEY = "sk-planted-7c1f0e93d2a4b8"  # made up; any file or output holding it is a leak
FIXTURES = Path(__file__).parent / "fixtures" / "solutions"
FIG1 = str(FIXTURES / "paper_figure1.json")

# The commands whose config holds a secret field (the endpoint key of the kernel's backend, of the responder),
# as they run here against a local server; {url} is the server, {out} an output folder under the test's folder.
SECRET_COMMANDS: dict[str, list[str]] = {
    "run": [
        "run",
        FIG1,
        "backend=openai",
        "backend.base_url={url}",
        "backend.api_key_env=FT_KEY",
        "kernel.backend_retries=0",
        "backend_errors=count",
        "record=true",
        "output_dir={out}",
    ],
    "evaluate": [
        "evaluate",
        f"solutions=[{FIXTURES}]",
        "settings=[bundle_cvc]",
        "scenarios=[fs-paper-figure1]",
        "noise.sweep=[]",
        "backend=openai",
        "backend.base_url={url}",
        "backend.api_key_env=FT_KEY",
        "kernel.backend_retries=0",
        "backend_errors=count",
        "output_dir={out}",
    ],
    "bench bfcl": [
        "bench",
        "bfcl",
        "mode=[kernel,vanilla]",
        "ids=[multi_turn_base_0]",
        "backend=openai",
        "backend.base_url={url}",
        "backend.api_key_env=FT_KEY",
        "responder.api_key_env=FT_KEY",
        "responder.retries=0",
        "kernel.backend_retries=0",
        "backend_errors=count",
        "record=true",
        "output_dir={out}",
    ],
    "bench tau2": [
        "bench",
        "tau2",
        "mode=[kernel,vanilla]",
        "count=1",
        "seeds=[0]",
        "backend=openai",
        "backend.base_url={url}",
        "backend.api_key_env=FT_KEY",
        "responder.api_key_env=FT_KEY",
        "responder.retries=0",
        "kernel.backend_retries=0",
        "backend_errors=count",
        "record=true",
        "output_dir={out}",
    ],
    "bench serving": ["bench", "serving", "backend=openai", "backend.base_url={url}", "backend.api_key_env=FT_KEY"],
    "agent": [
        "agent",
        "tools=tests.test_own_tools:Calendar",
        f"conversation={FIXTURES.parent / 'conversations' / 'calendar.txt'}",
        "backend=openai",
        "backend.base_url={url}",
        "backend.api_key_env=FT_KEY",
        "kernel.backend_retries=0",
        "backend_errors=count",
        "record=true",
        "output_dir={out}",
    ],
}
# The pipeline holds no key of its own, but passes overrides to its stages: a key there is a key on its command line.
PIPELINE = ["pipeline", "run_dir={out}", "overrides.evaluate=[backend=openai,backend.api_key=" + KEY + "]"]


class EchoingServer(StubServer):
    """A misbehaving server: every request is refused with HTTP 401 and an error body quoting the Authorization header
    it received, as some proxies do. Whatever the client keeps of that error must not carry the key."""

    def reply(self, body):
        auth = self.requests[-1][2] if self.requests else None
        return 401, json.dumps(
            {"error": {"message": f"invalid credentials in header 'Authorization: {auth}'"}}
        ).encode()


def _leaks(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def _args(line: list[str], url: str, out: Path) -> list[str]:
    return [a.replace("{url}", url).replace("{out}", str(out)) for a in line]


# The commands each config serves (conf/bench.yaml serves bench bfcl and bench serving).
SERVED_BY = {
    **{c: [c] for c in CONFIGURED},
    "bench": ["bench bfcl", "bench serving"],
    **{conf: [f"{c} {sub}"] for (c, sub), conf in SUBCOMMAND_CONFIGS.items()},
}


def _holds_a_secret(node) -> bool:
    if isinstance(node, dict):
        return any(k in SECRET_KEYS or _holds_a_secret(v) for k, v in node.items())
    return isinstance(node, list) and any(_holds_a_secret(v) for v in node)


def test_every_command_with_a_secret_field_is_checked():
    import forethought.kernel.specs  # noqa: F401 - composing checks the per-primitive conf tables against the registry

    with_secret = set()
    for conf, commands in SERVED_BY.items():
        plain = compose_config(conf, [])
        cfg = (
            compose_config(conf, ["backend=openai"]) if "backend" in plain else plain
        )  # a backend group: its openai option
        if _holds_a_secret(OmegaConf.to_container(cfg)):
            with_secret.update(commands)
    assert with_secret == set(SECRET_COMMANDS)


# Each command with each secret field it has (only the bench commands have a responder), and the pipeline's overrides.
REFUSALS = [
    (name, field)
    for name in [*SECRET_COMMANDS, "pipeline"]
    for field in ["backend.api_key", *(["responder.api_key"] if name.startswith("bench") else [])]
]


@pytest.mark.parametrize(("name", "field"), REFUSALS)
def test_a_key_on_the_command_line_is_refused_and_changes_nothing(name, field, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    line = PIPELINE if name == "pipeline" else [*SECRET_COMMANDS[name], f"{field}={KEY}"]
    before = tree(tmp_path)
    assert main(_args(line, "http://127.0.0.1:9/v1", out)) == 2
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err
    assert (
        "not accepted on the command line" in printed.err
        and "$OPENAI_API_KEY" in printed.err
        and "api_key_file" in printed.err
    )
    assert tree(tmp_path) == before  # refused before anything was written


@pytest.mark.parametrize("name", SECRET_COMMANDS)
def test_a_key_from_the_environment_reaches_no_file_and_no_output(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a default output folder (runs/...) lands here too
    monkeypatch.setenv("FT_KEY", KEY)
    with EchoingServer() as srv:
        rc = main(_args(SECRET_COMMANDS[name], srv.url, tmp_path / "out"))
    printed = capsys.readouterr()
    assert rc in (0, 1), printed.err  # a run (failed or not), never bad input or an internal error
    assert "Traceback" not in printed.err
    assert srv.requests and {auth for _, _, auth in srv.requests} == {f"Bearer {KEY}"}  # the key was planted and sent
    assert KEY not in printed.out + printed.err
    assert _leaks(tmp_path) == []
    if name != "bench serving":
        assert [p for p in tmp_path.rglob("*") if p.is_file()], "the run wrote its files"


def test_recorded_command_lines_mask_a_secret():
    line = [
        "forethought",
        "bench",
        "bfcl",
        f"backend.api_key={KEY}",
        f"overrides.evaluate=[backend.api_key={KEY}]",
        "backend.api_key_env=X",
    ]
    assert recorded_command(line) == (
        f"forethought bench bfcl backend.api_key={MASK} overrides.evaluate=[backend.api_key={MASK}] "
        "backend.api_key_env=X"
    )
    assert (
        mask_secrets("backend={name: openai, api_key: " + KEY + "}") == "backend={name: openai, api_key: " + MASK + "}"
    )
    assert (
        secrets_on_command_line(["backend.api_key=null", "backend.api_key=", "backend.api_key_file=/k", "my_api_key=1"])
        == []
    )


def test_a_url_with_a_key_in_it_is_refused(tmp_path, capsys):
    assert (
        main(
            [
                "run",
                FIG1,
                "backend=openai",
                f"backend.base_url=http://user:{KEY}@127.0.0.1:9/v1",
                f"output_dir={tmp_path}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "backend.base_url" in err and "user:key@host" in err


def test_the_cli_never_runs_a_command_given_a_key(tmp_path, monkeypatch):
    """Not even --cfg, which would print the config (masked) but still take the key through the shell."""
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "bfcl", f"responder.api_key={KEY}", "--cfg"]) == 2
    assert main(["registry", "check", f"backend.api_key={KEY}"]) == 2
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("field", ["backend.api_key_env", "responder.api_key_env"])
def test_a_key_pasted_where_a_variable_name_goes_is_not_echoed(field, tmp_path, monkeypatch, capsys):
    """``api_key_env=sk-...`` (the key itself where its variable's name goes) is refused as a bad name, and the refusal
    does not print the value it refuses."""
    monkeypatch.chdir(tmp_path)
    line = [*SECRET_COMMANDS["bench bfcl"], f"{field}={KEY}"]
    assert main(_args(line, "http://127.0.0.1:9/v1", tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert f"{field}: String should match pattern" in err and "the value is not shown" in err
    assert KEY not in err
    assert os.listdir(tmp_path) == []


def test_a_per_primitive_url_with_a_key_in_it_is_refused_unseen(tmp_path, capsys):
    line = [
        "run",
        FIG1,
        "backend=openai",
        "+backend.urls={decompose: 'http://u:" + KEY + "@127.0.0.1:9/v1'}",
        f"output_dir={tmp_path / 'o'}",
    ]
    assert main(line) == 2
    err = capsys.readouterr().err
    assert "backend.urls.decompose" in err and "user:key@host" in err and KEY not in err
    assert not (tmp_path / "o").exists()


class CuttingServer(StubServer):
    """Echoes the bearer token where the client cuts an error body (300 bytes), or into a successful answer."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def reply(self, body):
        auth = self.requests[-1][2] or ""
        if self.mode == "error":
            return 401, (
                "x" * (300 - len("Bearer ") - len(KEY) + 1) + auth + " rejected"
            ).encode()  # cut at 300: all but 1
        return 200, completion(body, {"message": {"role": "assistant", "content": f"your key is {auth}"}})


@pytest.mark.parametrize("mode", ["error", "answer"])
def test_a_key_a_server_echoes_is_masked_whole_before_any_cut(mode, tmp_path, monkeypatch, capsys):
    """Masked before the error body is cut (a cut key is no longer the key a replace() finds), and in a successful
    reply too (an answer that quotes the key reaches the trace and the recording otherwise)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FT_KEY", KEY)
    with CuttingServer(mode) as srv:
        main(_args(SECRET_COMMANDS["run"], srv.url, tmp_path / "out"))
    printed = capsys.readouterr()
    assert srv.requests
    for leaked in (KEY, KEY[:-1], KEY[:12]):
        assert leaked not in printed.out + printed.err
        assert [str(p) for p in tmp_path.rglob("*") if p.is_file() and leaked.encode() in p.read_bytes()] == []


# ---------------------------------------------------------------- secret tool arguments
PASSWORD = "Hunter-7-planted"  # made up; a file or printout holding it is a leak


class Vault:
    """Python tools with a secret parameter (``@tool(secret=...)``)."""

    def __init__(self) -> None:
        self.sessions: list[str] = []

    from forethought.kernel.python_tools import tool as _tool

    @_tool(side_effect=True, secret=("password",), writes={"session": "result.token"})
    def login(self, user: str, password: str) -> dict:
        """Log in.

        Args:
            user: The user name.
            password: The user's password.
        """
        self.sessions.append(user)
        return {"token": f"tok-{user}", "password_ok": password == PASSWORD}


class _LoginScript:
    def answer(self, body):
        text = {
            "decompose": {"tasks": [{"id": "t1", "text": f"log in as ann with password {PASSWORD}",
                                     "tool_name": "login", "depends_on": [],
                                     "parameters": {"user": "ann", "password": PASSWORD}}]},
            "match_func": {"tool_name": "login"},
            "match_fill": {"values": {}},
            "get_order": {"ordered_task_ids": ["t1"]},
            "check_prerequisites": {"task": None},
        }[body["model"]]  # fmt: skip
        return {"role": "assistant", "content": json.dumps(text)}


def _files_holding(folder: Path, value: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


def test_a_secret_tool_argument_reaches_no_file_and_no_printout_of_agent(tmp_path, capsys):
    from tests.openai_stub import ChatServer

    conv = tmp_path / "conversation.txt"
    conv.write_text(f"log in as ann with password {PASSWORD}\n")
    out = tmp_path / "out"
    with ChatServer(_LoginScript()) as srv:
        rc = main(["agent", "tools=tests.test_secrets:Vault", f"conversation={conv}", "backend=openai",
                   f"backend.base_url={srv.url}", "kernel.backend_retries=0", f"output_dir={out}"])  # fmt: skip
    printed = capsys.readouterr()
    assert rc == 0, printed.err
    assert 'login(user="ann", password="***")' in printed.out
    assert PASSWORD not in printed.out + printed.err
    calls = [json.loads(line) for line in (out / "calls.jsonl").read_text().splitlines()]
    assert calls[0]["arguments"] == {"user": "ann", "password": "***"}
    assert calls[0]["result"]["password_ok"] is True  # the tool was called with the real value
    assert not _files_holding(out, PASSWORD)  # the conversation file, the user's own input, is the only one


def test_a_secret_tool_argument_reaches_no_file_and_no_printout_of_run(tmp_path, capsys):
    """A worked solution whose login takes a password (social's posting_login marks it secret), run with the oracle:
    the value is in the request, the prompts and the call, and in none of the files."""
    solution = (
        Path(__file__).parents[1] / "data_gen" / "solutions" / "social" / "login_follow_retweet_comment_stats.json"
    )
    password = json.loads(solution.read_text())["slots"]["pw"]["value"]
    assert main(["run", str(solution), "backend=oracle", f"output_dir={tmp_path / 'out'}"]) == 0
    printed = capsys.readouterr().out
    assert 'password="***"' in printed and password not in printed
    assert (tmp_path / "out").exists() and not _files_holding(tmp_path, password)
