"""The endpoint key as users expect it (issue 18 part 5): read from an environment variable (OPENAI_API_KEY
by default, its name configurable) or a key file, never needed on the command line, masked in ``--cfg``,
and never written into a run's files (resolved configs, traces, reports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forethought.cli import main
from forethought.config import MASK, mask_secrets
from forethought.errors import UserError
from forethought.kernel.backends.factory import OpenAIBackendConfig, make_model_backend
from forethought.kernel.backends.openai_backend import resolve_api_key
from forethought.kernel.program import Kernel
from forethought.kernel.runner import oracle_factory, run_solution
from forethought.kernel.solution_file import load_solution
from tests.test_backend_openai import FIG1, Server, _Recording

KEY = "sk-test-3f9c2a7d41e8b6"  # a made-up key; any file containing it is a leak


def _cfg(**kw) -> OpenAIBackendConfig:
    return OpenAIBackendConfig.model_validate(kw)


def test_key_from_the_default_variable_a_named_one_or_a_file(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert resolve_api_key(_cfg(), "backend") is None  # none needed for a local vLLM
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert resolve_api_key(_cfg(), "backend") == KEY
    monkeypatch.setenv("FT_OTHER_KEY", "sk-other")
    assert resolve_api_key(_cfg(api_key_env="FT_OTHER_KEY"), "backend") == "sk-other"
    key_file = tmp_path / "key"
    key_file.write_text(f"\n  {KEY}-file  \n# a comment line after the key is ignored\n")
    assert (
        resolve_api_key(_cfg(api_key_file=str(key_file)), "backend") == f"{KEY}-file"
    )  # the file wins over the variable
    assert make_model_backend(_cfg(api_key_file=str(key_file))).api_key == f"{KEY}-file"


def test_a_missing_or_empty_key_file_is_a_located_error(tmp_path):
    with pytest.raises(UserError) as exc:
        resolve_api_key(_cfg(api_key_file=str(tmp_path / "absent")), "responder")
    assert exc.value.where == "responder.api_key_file" and f"cannot read the key file {tmp_path / 'absent'}" in str(
        exc.value
    )
    (tmp_path / "empty").write_text("\n \n")
    with pytest.raises(UserError, match="the key file .* is empty"):
        resolve_api_key(_cfg(api_key_file=str(tmp_path / "empty")), "backend")


def test_a_key_pasted_as_the_key_files_name_or_one_a_header_cannot_carry_is_refused_unseen(tmp_path, monkeypatch):
    with pytest.raises(UserError) as exc:
        resolve_api_key(_cfg(api_key_file=KEY), "backend")  # the key itself where its file's name goes
    assert KEY not in str(exc.value) + exc.value.where and "the value is not shown" in str(exc.value)
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\nmore")  # a header cannot hold it: http.client would raise, echoing it
    with pytest.raises(UserError) as exc:
        resolve_api_key(_cfg(), "backend")
    assert KEY not in str(exc.value) and "a line break" in str(exc.value) and exc.value.where == "$OPENAI_API_KEY"
    (tmp_path / "k").write_text("sk-é\n", encoding="utf-8")
    with pytest.raises(UserError, match="U\\+00E9"):
        resolve_api_key(_cfg(api_key_file=str(tmp_path / "k")), "backend")


def test_the_key_never_shows_in_a_dump_of_the_config():
    cfg = _cfg(api_key=KEY)
    assert KEY not in repr(cfg) and KEY not in str(cfg.model_dump()) and KEY not in cfg.model_dump_json()
    assert cfg.model_dump(mode="json")["api_key"] == MASK
    assert mask_secrets({"backend": {"api_key": KEY, "api_key_env": "X"}, "o": [f"backend.api_key={KEY}", "a=b"]}) == {
        "backend": {"api_key": MASK, "api_key_env": "X"},
        "o": [f"backend.api_key={MASK}", "a=b"],
    }
    assert mask_secrets({"api_key": None}) == {"api_key": None}


@pytest.mark.parametrize("command", [["run", FIG1], ["bench", "bfcl"]])
def test_a_key_on_the_command_line_is_refused_even_with_cfg(command, capsys):
    # Issue 25: one rule for every command (tests/test_secrets.py runs it on each): never on the command line.
    assert main([*command, "backend=openai", f"backend.api_key={KEY}", "--cfg"]) == 2
    printed = capsys.readouterr()
    assert (
        KEY not in printed.out + printed.err
        and "backend.api_key: a key is not accepted on the command line" in printed.err
    )
    assert main([*command, "backend=openai", "--cfg"]) == 0
    assert "api_key: null" in capsys.readouterr().out


def _files_containing(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_run_over_http_sends_the_key_and_writes_it_nowhere(tmp_path, monkeypatch, capsys):
    """`forethought run` against a local OpenAI-compatible server (answering from a recording of the oracle):
    the key comes from a named variable, reaches the server as the bearer token, and no file of the run holds it."""
    sol = load_solution(FIG1).rendered()
    table: dict = {}
    factory = oracle_factory(sol)
    run_solution(sol, Kernel(), lambda i, t: _Recording(factory(i, t), table))
    monkeypatch.setenv("FT_ENDPOINT_KEY", KEY)
    with Server(table) as srv:
        out = tmp_path / "run"
        assert (
            main(
                [
                    "run",
                    FIG1,
                    "backend=openai",
                    f"backend.base_url={srv.url}",
                    "backend.api_key_env=FT_ENDPOINT_KEY",
                    f"output_dir={out}",
                    "record=true",
                ]
            )
            == 0
        )
    assert srv.requests and {auth for _, _, auth in srv.requests} == {f"Bearer {KEY}"}
    assert KEY not in capsys.readouterr().out
    assert list(out.rglob("*.json*")) and _files_containing(out, KEY) == []
