"""Strict JSON, one loader for every file the project reads (issue 25 part 5; forethought/bounded.py loads_json).

Python's json module reads NaN, Infinity and 1e999 (as infinity), and lets the last of two equal keys win silently.
Each reader refuses them with a located message (file, JSON path, line): solutions, registries, recordings, dataset
and bundle manifests, gates files, dataset rows. Registry imports also hold tool names to what providers accept,
a default to its own schema, and name the tool and path of a nesting that is too deep.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.bounded import JSONProblem, check_depth, loads_json
from forethought.cli import main
from forethought.kernel.registry import RegistryError, parse_registry
from forethought.kernel.registry.model import ToolSpec
from forethought.primitives import Recorder
from forethought.primitives.store import read_recording
from tests.disk import tree

FIG1 = Path(__file__).parent / "fixtures" / "solutions" / "paper_figure1.json"


# ---------------------------------------------------------------- the loader
@pytest.mark.parametrize(("text", "message"), [
    ('{"a": 1, "b": {"c": 2, "c": 3}}', "duplicate key 'c' (the first value would be silently replaced) at b.c (line 1, column 24)"),
    ('{"a": [1, NaN]}', "NaN is not a JSON number at a[1] (line 1, column 11)"),
    ('{"a": {"b": -Infinity}}', "-Infinity is not a JSON number at a.b (line 1, column 13)"),
    ('{"a":\n  [0, 1e999]}', "1e999 is not a finite number (it overflows to infinity) at a[1] (line 2, column 7)"),
    ('{"a": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64 levels at a[0][0][0][0][0][0][0] … 54 more levels … [0][0] (line 1, column 70)"),
    ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper than 64 levels at a[0][0][0][0][0][0][0] … 54 more levels … [0][0]"),
])  # fmt: skip
def test_refused_json_is_located(text, message):
    with pytest.raises(JSONProblem) as info:
        loads_json(text, "f.json")
    assert str(info.value).startswith(f"f.json: {message}")


def test_what_json_allows_is_read_as_it_is():
    text = '{"s": "NaN, Infinity and {\\"a\\": 1, \\"a\\": 2} in a string", "n": [1.5e300, -0.0, 10], "a": {"a": {}}}'
    assert loads_json(text, "f.json") == json.loads(text)


def test_decoded_data_is_held_to_the_same_rules():
    with pytest.raises(JSONProblem, match=r"inf is not a finite number .* at tools\[0\]\.x"):
        check_depth({"tools": [{"x": float("inf")}]}, "data")


# ------------------------------------------------------------- every reader
def _solution(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sol.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda t: t.replace('"id": "fs-paper-figure1",', '"id": "fs-paper-figure1", "id": "other",', 1), "duplicate key 'id'"),
    (lambda t: t.replace('"domains": ["file_system"],', '"domains": ["file_system"], "config": {"ratio": NaN},', 1),
     "NaN is not a JSON number at config.ratio"),
])  # fmt: skip
def test_a_solution(edit, needle, tmp_path, capsys):
    path = _solution(tmp_path, edit(FIG1.read_text()))
    assert main(["verify", str(path)]) == 2
    assert needle in capsys.readouterr().err


def test_a_yaml_solution_with_a_key_twice(tmp_path, capsys):
    path = tmp_path / "sol.yaml"
    path.write_text("id: x\ntitle: a\ntitle: b\ndomains: [file_system]\nturns: []\n")
    assert main(["verify", str(path)]) == 2
    assert "duplicate key 'title' (line 3)" in capsys.readouterr().err


def test_a_registry_file(tmp_path, capsys):
    path = tmp_path / "tools.json"
    path.write_text(
        '{"tools": [{"name": "ok", "inputSchema": {"type": "object"}},\n'
        ' {"name": "f", "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "maximum": Infinity}}}}]}'
    )
    assert main(["registry", "check", str(path)]) == 1
    assert "FAIL" in (err := capsys.readouterr().err)
    assert (
        f"{path}: line 2, column 100: tool #1 'f': inputSchema.properties.n.maximum: Infinity is not a JSON number"
        in err
    )


def _recording(tmp_path: Path) -> Path:
    from forethought.kernel.program import Kernel
    from forethought.kernel.runner import oracle_factory, run_solution
    from forethought.kernel.solution_file import load_solution

    sol = load_solution(FIG1).rendered()
    rec = Recorder("record")
    run_solution(sol, Kernel(), oracle_factory(sol), recorder=rec)
    path = tmp_path / "recording.jsonl"
    rec.save(path)
    return path


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda lines: [lines[0], '["a", "list", "not", "a", "reply"]', *lines[2:]], "line 2: expected a recorded reply"),
    (lambda lines: [lines[0], json.dumps({k: v for k, v in json.loads(lines[1]).items() if k != "text"}), *lines[2:]],
     "line 2: field 'text' is missing"),
    (lambda lines: [lines[0], lines[1].replace('"text": ', '"text": 5, "x": ', 1), *lines[2:]], "line 2: field 'text' must be a string"),
    (lambda lines: [lines[0], lines[1][:-1] + ', "key": "k"}', *lines[2:]], "line 2: duplicate key 'key'"),
    (lambda lines: [lines[0], lines[1], lines[1], *lines[2:]], "line 3: key "),
    (lambda lines: ['{"forethought_recording": 99}', *lines[1:]], "line 1: recording format 99 is newer than this forethought reads"),
    (lambda lines: ['{"forethought_recording": 1, "rendering": 5}', *lines[1:]], "line 1: rendering must be a JSON object"),
])  # fmt: skip
def test_a_recording(edit, needle, tmp_path, capsys):
    # Issue 25: a reply without usable text loaded, and the run then blamed a missing entry under another hash; a
    # recording of JSON lists failed without a line number.
    path = _recording(tmp_path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {"forethought_recording": 1}
    path.write_text("\n".join(edit(lines)) + "\n")
    out = tmp_path / "out"
    assert main(["run", str(FIG1), f"replay={path}", f"output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert f"error: replay ({path}): not a usable recording: {needle}" in err, err
    assert not out.exists()


def test_a_recording_header_that_says_no_rendering_it_can_is_a_located_error(tmp_path, capsys):
    path = _recording(tmp_path)
    lines = path.read_text().splitlines()
    for header, needle in [
        ({"demonstrations": [1]}, "rendering.demonstrations must map primitives to store digests"),
        ({"tool_rendering": "sideways"}, "tool_rendering 'sideways' is not one this forethought renders"),
    ]:
        path.write_text("\n".join([json.dumps({"forethought_recording": 1, "rendering": header}), *lines[1:]]) + "\n")
        out = tmp_path / "out"
        assert main(["run", str(FIG1), f"replay={path}", "replay_mode=strict", f"output_dir={out}"]) == 2
        assert f"error: replay: the recording's {needle}" in capsys.readouterr().err
        assert not out.exists()


def test_a_recording_written_before_versions_is_read_as_version_1(tmp_path):
    path = _recording(tmp_path)
    entries = read_recording(path)
    path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")  # no header line
    assert read_recording(path) == entries


def test_a_dataset_manifest_and_a_dataset_row(generated_data, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(generated_data, data)
    manifest = data / "dataset.json"
    manifest.write_text(manifest.read_text().replace('"format": 1,', '"format": 1, "format": 1,', 1))
    before = tree(tmp_path)
    assert (
        main(["train", "primitive=match_fill", "model=tiny", f"dataset_dir={data}", f"output_dir={tmp_path / 'train'}"])
        == 2
    )
    assert f"{manifest}: duplicate key 'format'" in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_a_bundle_manifest_and_its_gates(tiny_pipeline, tmp_path, capsys):
    from forethought.bundle.manifest import load_bundle
    from forethought.kernel.specs import spec_hashes

    bundle = tmp_path / "bundle"
    shutil.copytree(tiny_pipeline / "bundle", bundle)
    manifest = bundle / "manifest.json"
    good = manifest.read_text()
    manifest.write_text(good.replace('"smoke": true,', '"smoke": true, "smoke": false,', 1))
    with pytest.raises(
        JSONProblem, match=r"duplicate key 'smoke' \(the first value would be silently replaced\) at smoke"
    ):
        load_bundle(bundle, spec_hashes(), allow_smoke=True)
    validate = tmp_path / "validate"
    shutil.copytree(tiny_pipeline / "validate", validate)
    gates = validate / "gates.json"
    gates.write_text(gates.read_text().replace('"exact_match": ', '"exact_match": NaN, "x": ', 1))
    assert (
        main(
            [
                "package",
                f"train_dir={tiny_pipeline / 'train'}",
                f"validate_dir={validate}",
                f"dataset_dir={tiny_pipeline / 'data'}",
                f"output_dir={tmp_path / 'out'}",
                "allow_failed_gates=true",
            ]
        )
        == 2
    )
    assert f"{gates}: NaN is not a JSON number at primitives." in capsys.readouterr().err


# ------------------------------------------------------------- registry imports
def _err(tools, **kw) -> str:
    with pytest.raises(RegistryError) as info:
        parse_registry(json.dumps(tools) if not isinstance(tools, str) else tools, source="t.json", **kw)
    return str(info.value)


def _fn(name: str, properties: dict | None = None) -> dict:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": properties or {}}},
    }


@pytest.mark.parametrize(("name", "why"), [
    ("get weather", "is not a tool name providers accept: 1 to 64 ASCII letters, digits, '_' or '-'; it has ' '"),
    ("gеt_weather", "it has 'е' (U+0435)"),  # a Cyrillic look-alike
    ("math.mean", "it has '.'"),  # dots only where a format uses them (BFCL)
    ("class", "'class' is a Python keyword: the kernel's calls (name(arg=value)) cannot name it"),
    ("x" * 65, "it has 65 characters"),
])  # fmt: skip
def test_tool_names_providers_would_refuse(name, why):
    assert f"tool #0 {name!r}: name: " in (err := _err([_fn(name)])) and why in err


def test_dotted_names_only_from_bfcl_and_mapped_consistently():
    from forethought.bench.responder import openai_tools, parse_answer
    from forethought.kernel.registry import Registry

    docs = '{"name": "math.mean", "description": "Mean.", "parameters": {"type": "dict", "properties": {"xs": {"type": "array"}}}}'
    reg = Registry(parse_registry(docs, "bfcl"))
    assert reg.names == ["math.mean"]
    assert [t["function"]["name"] for t in openai_tools(reg)] == ["math_mean"]  # what a provider is offered
    reply = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "math_mean", "arguments": '{"xs": [1, 2]}'},
                        }
                    ],
                }
            }
        ]
    }
    assert parse_answer(reply, reg).calls == [("math.mean", {"xs": [1, 2]}, "c1")]  # and the reply mapped back
    twice = docs + "\n" + docs.replace("math.mean", "math_mean")
    assert "tool #1 'math_mean': name: offered to a provider as 'math_mean', as is tool #0" in _err(twice, fmt="bfcl")
    with pytest.raises(ValueError, match="'a.b' is not a tool name providers accept"):
        ToolSpec(name="a.b")  # a solution's registry.extra, an internal tool: no dots


def test_a_default_must_fit_its_own_schema():
    assert _err([_fn("f", {"n": {"type": "integer", "default": "5"}})]) == (
        "t.json: tool #0 'f': parameters.properties.n.default: '5' does not fit its own schema: '5' is not of type 'integer'"
    )
    nested = {"o": {"type": "object", "properties": {"unit": {"enum": ["c", "f"], "default": "k"}}}}
    assert "parameters.properties.o.properties.unit.default: 'k' does not fit" in _err([_fn("f", nested)])
    parse_registry(
        json.dumps(
            [_fn("f", {"n": {"type": ["integer", "null"], "default": None}, "u": {"enum": ["c"], "default": "c"}})]
        )
    )


def test_deep_nesting_names_the_tool_and_the_path(tmp_path, capsys):
    deep = {"type": "object", "properties": {"a": {}}}
    node = deep["properties"]["a"]
    for _ in range(40):
        node.update({"type": "object", "properties": {"a": {}}})
        node = node["properties"]["a"]
    text = json.dumps(
        {"tools": [{"name": "ok", "inputSchema": {"type": "object"}}, {"name": "deep_tool", "inputSchema": deep}]}
    )
    err = _err(text)
    assert (
        err.startswith("t.json: line 1, column ")
        and "tool #1 'deep_tool': inputSchema.properties.a.properties.a" in err
    )
    assert err.endswith("nested deeper than 64 levels")
    # far deeper than Python's own recursion limit: the same message
    text = '[{"name": "f", "parameters": {"type": "object", "properties": {"x": ' + "[" * 5000 + "]" * 5000 + "}}}]"
    assert "tool #0 'f': parameters.properties.x[0][0][0]" in _err(text, fmt="openai")


# ------------------------------------------------------------ the run's own files
@pytest.mark.parametrize(("relpath", "edit", "needle"), [
    (".stages/verify.json", lambda t: t.replace('"fingerprint":', '"fingerprint": "x", "fingerprint":', 1), "duplicate key 'fingerprint'"),
    (".stages/generate.json", lambda t: "[1]", "expected a JSON object, got list"),
    ("train/match_fill/run_state.json", lambda t: t[: len(t) // 2], "not valid JSON (truncated?)"),
    ("train/base.json", lambda t: "[]", "expected a JSON object, got list"),
    ("train/match_fill/config.yaml", lambda t: "- 1\n", "expected a mapping (the run's resolved config), got list"),
    ("train/match_fill/metrics.json", lambda t: t.replace("{", '{"nan": NaN, ', 1), "NaN is not a JSON number at nan"),
])  # fmt: skip
def test_a_pipeline_run_folder_file(relpath, edit, needle, tiny_pipeline, tmp_path, capsys):
    """The pipeline's stage records and the training stage's own files are read by the same strict loader: a
    hand-edited or torn one is refused, located, before anything is written."""
    from tests.conftest import tiny_pipeline_args

    run = tmp_path / "run"
    shutil.copytree(tiny_pipeline, run)
    for moved in [
        *(run / "train").rglob("*.json"),
        *(run / "train").rglob("config.yaml"),
    ]:  # the copy names its own base
        moved.write_text(moved.read_text().replace(str(tiny_pipeline), str(run)))
    target = run / relpath
    target.write_text(edit(target.read_text()))
    before = tree(run)
    if relpath.startswith(".stages"):
        assert main(tiny_pipeline_args(run)) == 2
    else:  # the train command on that folder, resuming (what the pipeline's train stage does)
        assert (
            main(
                [
                    "train",
                    "primitive=match_fill",
                    "model=tiny",
                    "train=quick",
                    "train.max_steps=2",
                    "model.tiny.vocab_size=1024",
                    "logging=none",
                    "model.pretrain.max_steps=2",
                    "model.pretrain.em_eval_steps=null",
                    "train.em_eval_steps=null",
                    "train.max_eval_examples=4",
                    "train.resume=true",
                    f"dataset_dir={run / 'data'}",
                    f"output_dir={run / 'train'}",
                ]
            )
            == 2
        )
    assert f"{target}: {needle}" in capsys.readouterr().err
    assert tree(run) == before


@pytest.mark.parametrize(("command", "content", "needle"), [
    ("registry", "{\"a\": " + "9" * 5000 + "}", "a number too long to read"),   # Python's int() digit limit
    ("verify", "{\"id\": " + "9" * 5000 + "}", "a number too long to read"),
    ("verify", b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
])  # fmt: skip
def test_files_python_cannot_read_are_located_refusals(command, content, needle, tmp_path, capsys):
    path = tmp_path / "f.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    # registry check reports each file and exits 1 when one fails (its checker's convention); verify refuses input: 2
    assert main(["registry", "check", str(path)] if command == "registry" else ["verify", str(path)]) == (
        1 if command == "registry" else 2
    )
    err = capsys.readouterr()
    assert needle in err.err + err.out and "Traceback" not in err.err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize("line", [["registry", "check", "/dev/zero"], ["verify", "/dev/zero"]])
def test_an_endless_file_is_read_no_further_than_the_size_bound(line, capsys):
    assert main(line) == (1 if line[0] == "registry" else 2)
    err = capsys.readouterr()
    assert "larger than 32 MiB" in err.err + err.out


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_recording_is_read_no_further_than_its_bound(monkeypatch):
    import forethought.primitives.store as store
    from forethought.errors import UserError

    monkeypatch.setattr(store, "MAX_RECORDING_BYTES", 1 << 20)  # the bound itself is 512 MiB: not worth reading here
    with pytest.raises(UserError, match="larger than 1 MiB"):
        read_recording("/dev/zero")


def test_what_the_project_writes_its_own_strict_readers_accept(tmp_path):
    """A diverged loss or a metric over no rows is a NaN float: it is written as null (strict JSON), not as the
    NaN token Python's json writes by default, which read_json_file / read_jsonl would then refuse."""
    from forethought.bounded import read_json_file
    from forethought.primitives.io import atomic_write_json, atomic_write_jsonl, read_jsonl

    obj = {"loss": float("nan"), "history": [{"eval_loss": float("inf")}, {"eval_loss": -float("inf")}], "n": 1.5}
    atomic_write_json(tmp_path / "m.json", obj)
    assert read_json_file(tmp_path / "m.json") == {"loss": None, "history": [{"eval_loss": None}] * 2, "n": 1.5}
    atomic_write_jsonl(tmp_path / "r.jsonl", [obj, {"ok": 1}])
    assert read_jsonl(tmp_path / "r.jsonl")[1] == {"ok": 1} and read_jsonl(tmp_path / "r.jsonl")[0]["loss"] is None


def test_a_checkpoint_whose_trainer_state_holds_a_nan_loss_is_still_resumed_from(tmp_path):
    """transformers writes trainer_state.json with Python's json (a NaN loss as NaN): read as its writer does."""
    from forethought.training.run_support import last_checkpoint

    for step, text in ((5, '{"global_step": 5, "log_history": [{"loss": NaN}]}'), (10, '{"global_step": 1')):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text(text)
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-5"  # the torn one (10) is passed over


def test_loss_points_skip_a_diverged_loss():
    from forethought.training.plots import loss_series

    train, evals = loss_series([{"step": 1, "loss": 2.0}, {"step": 2, "loss": float("nan")}, {"step": 3, "loss": None},
                                {"step": 3, "eval_loss": 1.0}])  # fmt: skip
    assert train == [(1, 2.0)] and evals == [(3, 1.0)]


def test_the_tokenizer_corpus_reader_locates_a_bad_line(tmp_path):
    from forethought.errors import UserError
    from forethought.training.tiny import corpus_texts

    path = tmp_path / "train.jsonl"
    path.write_text('{"prompt": [{"role": "user", "content": "hi"}]}\n{"prompt": NaN}\n')
    with pytest.raises(UserError) as err:
        list(corpus_texts([path]))
    assert str(path) in str(err.value) and "2" in str(err.value)
