"""The training benchmarks run (CPU smoke modes), multi-process training works, GPU-only checks skip cleanly."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["WANDB_MODE"] = "offline"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_gpu_lora_smoke_runs_on_cpu(tmp_path, capsys):
    bench = _script("bench_gpu_lora")
    out = tmp_path / "bench.json"
    assert bench.main(["--smoke", "--settings", "trl_defaults,ours", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = {r["setting"]: r for r in report["results"]}
    assert set(rows) == {"trl_defaults", "ours"}
    assert all(r["tokens_per_s"] and r["tokens_per_s"] > 0 for r in rows.values()), rows
    assert rows["trl_defaults"]["max_length"] == 1024 and rows["ours"]["max_length"] == 2048
    assert "tokens_per_s" in capsys.readouterr().out


def test_gpu_bench_device_script_records_environment_and_results(tmp_path):
    """The one-call device script (bare GPU machine) runs end to end; here in smoke mode on CPU."""
    import transformers

    wheels = tmp_path / "no-wheels"
    wheels.mkdir()
    env = dict(os.environ, OUT=str(tmp_path / "out"), PYTHON=sys.executable, WHEELS_DIR=str(wheels))
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_bench_on_device.sh"), "--smoke", "--settings", "ours"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    environment = (tmp_path / "out" / "environment.txt").read_text()
    assert f"transformers {transformers.__version__}" in environment and "trl " in environment
    report = json.loads((tmp_path / "out" / "bench_gpu_lora.json").read_text())
    assert [r["setting"] for r in report["results"]] == ["ours"] and report["results"][0]["tokens_per_s"] > 0
    assert "LoRA SFT" in (tmp_path / "out" / "bench_gpu_lora.log").read_text()


def test_gpu_wheel_fetch_script_parses():
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "fetch_gpu_wheels.sh")]).returncode == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_bench_gpu_lora_refuses_without_cuda(capsys):
    assert _script("bench_gpu_lora").main([]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_bench_gpu_lora_flop_model_matches_the_12b_arithmetic():
    bench = _script("bench_gpu_lora")
    flops = bench.flops_per_token(bench.GEMMA3_12B, mean_ctx=500, completion_fraction=0.1)
    # 4 x ~10.8 B decoder matmul parameters plus attention and a tenth of the LM head: 44-60 GFLOP/token
    assert 44e9 < flops < 60e9


def test_bench_gpu_lora_builds_the_12b_text_shape_on_meta():
    """The GPU shape itself (not only the smoke one) builds: Gemma-3-12B's language model has ~11.77 B parameters."""
    bench = _script("bench_gpu_lora")
    model = bench.build_model(bench.GEMMA3_12B, "meta", torch.bfloat16, "sdpa")
    param_count = sum(p.numel() for p in model.parameters())
    assert 11.7e9 < param_count < 11.8e9, param_count
    assert model.config.layer_types.count("full_attention") == 8 and model.config.sliding_window == 1024


def test_bench_cpu_settings_compares_with_trl_defaults(generated_data, tmp_path):
    bench = _script("bench_cpu_settings")
    out = tmp_path / "b.json"
    assert bench.main(["--data", str(generated_data), "--model", "tiny", "--steps", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [r["setting"] for r in rows] == list(bench.settings(1536))
    assert rows[0]["ratio_to_trl_defaults"] == 1.0 and all(r["tokens_per_second"] > 0 for r in rows)


def test_bench_train_runs(tmp_path):
    bench = _script("bench_train")
    out = tmp_path / "bench.json"
    assert (
        bench.main(["--n-train", "8", "--n-val", "2", "--steps", "2", "--out", str(tmp_path / "o"), "--json", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    assert report["runs"][0]["steps"] == 2 and report["runs"][0]["tokens_per_second"] > 0


def test_two_process_training_with_accelerate_on_cpu(tmp_path):
    """`accelerate launch --multi_gpu --num_processes 2` runs DDP on CPU; only rank 0 writes the run folder."""
    from forethought.training.synthetic import write_dataset

    data = write_dataset(tmp_path / "data", n_train=16, n_val=4, primitives=("match_func",))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "-m",
        "forethought.cli",
        "train",
        "primitive=match_func",
        f"dataset_dir={data}",
        f"output_dir={out}",
        "train=quick",
        "train.max_steps=2",
        "train.device=cpu",
        "logging=none",
        "logging.progress=false",
        "model.pretrain.max_steps=2",
        "model.pretrain.em_eval_steps=null",  # the base stage runs as DDP too
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "match_func" / "metrics.json").read_text())
    assert metrics["global_step"] == 2
    # two ranks x batch 4 x 2 steps: both processes fed the model
    assert metrics["tokens_seen"] > 0 and (out / "match_func" / "adapter" / "adapter_model.safetensors").is_file()
    assert proc.stderr.count("forethought train") <= 1, "the summary table is printed by rank 0 only"
    assert (
        json.loads((out / "base_run" / "metrics.json").read_text())["global_step"] == 2
        and (out / "base" / "model.safetensors").is_file()
    )


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tiny_profile_trains_in_bf16_on_gpu(tmp_path):
    from forethought.training.synthetic import write_dataset
    from forethought.training.train import config_from_overrides, run

    data = write_dataset(tmp_path / "data", n_train=16, n_val=4, primitives=("match_func",))
    cfg = config_from_overrides(
        [
            "primitive=match_func",
            "model.pretrain=null",
            f"dataset_dir={data}",
            f"output_dir={tmp_path / 'o'}",
            "train=quick",
            "train.max_steps=3",
            "train.device=cuda",
            "logging=none",
        ]
    )
    metrics = run(cfg)["match_func"].metrics
    assert metrics["device"] == "cuda" and metrics["dtype"] == "bfloat16" and metrics["global_step"] == 3
    assert all(e["loss"] == e["loss"] for e in metrics["train_loss_history"]), "no NaN loss in bf16"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_bench_gpu_lora_small_run_on_gpu(tmp_path):
    bench = _script("bench_gpu_lora")
    out = tmp_path / "b.json"
    assert (
        bench.main(["--settings", "ours", "--steps", "2", "--warmup", "1", "--examples", "32", "--json", str(out)]) == 0
    )
    row = json.loads(out.read_text())["results"][0]
    assert row["tokens_per_s"] and row["peak_mem_gib"] > 20, row


def test_probe_trainable_freezes_what_it_is_told(generated_data, tmp_path):
    """scripts/probe_trainable.py (docs/training.md's which-weights probes): linear layers only, one epoch."""
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "scripts/probe_trainable.py",
            "--dataset-dir",
            str(generated_data),
            "--output-dir",
            str(tmp_path),
            "--primitive",
            "match_func",
            "--trainable",
            "linear",
            "--epochs",
            "1",
            "--override",
            "model.tiny.vocab_size=1024",
            "--override",
            "model.pretrain.max_steps=2",
            "--override",
            "train.dev_fraction=0.3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    # 2 layers x 7 projections; embeddings and norms stay frozen
    assert "trainable: linear (" in text and "dev exact match" in text
    trained = int(text.split("trainable: linear (")[1].split(" of ")[0].replace(",", ""))
    total = int(text.split(" of ")[1].split(" parameters")[0].replace(",", ""))
    # tiny shape (hidden 128, MLP 512, 4 heads / 2 KV of 32): per layer q 128x128, k and v 128x64, o 128x128, and three 128x512
    assert trained == 2 * (128 * 128 * 2 + 128 * 64 * 2 + 3 * 128 * 512) < total


def test_probe_ranked_tools_reorders_match_funcs_lists_and_nothing_else(generated_data, tmp_path, capsys):
    """scripts/probe_ranked_tools.py (docs/training.md, "Probe of 2026-12-06"): the same rows and targets, each list
    most relevant to its task first, the prompt rendered again from the reordered input, every other file as it was,
    a dataset the trainer reads (its seal re-written); an existing destination is refused and left as it was."""
    from forethought.kernel.specs import SPECS
    from forethought.training.data import read_rows, train_and_dev_rows, use_dataset_rendering

    probe, baselines = _script("probe_ranked_tools"), _script("match_func_baselines")
    out = tmp_path / "ranked"
    assert probe.main([str(generated_data), str(out)]) == 0
    assert "match_func rows" in capsys.readouterr().out
    use_dataset_rendering(out)
    spec, reordered = SPECS["match_func"], 0
    for split in ("train", "validation"):
        before, after = read_rows(generated_data, "match_func", split), read_rows(out, "match_func", split)
        assert [(r.id, r.target) for r in after] == [(r.id, r.target) for r in before]
        for old, new in zip(before, after, strict=True):
            tools, task = new.input_value["tools"], baselines.words(new.input_value["task"]["text"])
            scores = [baselines.tool_relevance(task, tool) for tool in tools]
            assert scores == sorted(scores, reverse=True)
            assert sorted(t["name"] for t in tools) == sorted(t["name"] for t in old.input_value["tools"])
            rendered = spec.messages(spec.input_type.model_validate(new.input_value))
            assert [(m.role, m.content) for m in new.prompt] == [(m["role"], m["content"]) for m in rendered]
            reordered += tools != old.input_value["tools"]
    assert reordered  # the fixture's lists are not all in relevance order already
    for path in generated_data.rglob("*"):
        relative = path.relative_to(generated_data)
        if path.is_file() and relative.parts[0] != "match_func" and path.name != "dataset.json":
            assert (out / relative).read_bytes() == path.read_bytes(), relative
    assert train_and_dev_rows(out, "match_func", 0.25, seed=0)[1]  # sealed: the trainer reads it
    kept = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert probe.main([str(generated_data), str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == kept


def _assert_validation_and_dev_rows_unchanged(source: Path, rewritten: Path, dev_fraction: float) -> None:
    """A probe's dataset rewrite adds train rows only: validation and the dev rows selection reads stay as they were."""
    from forethought.training.data import read_rows, train_and_dev_rows

    assert read_rows(rewritten, "match_func", "validation") == read_rows(source, "match_func", "validation")
    assert (
        train_and_dev_rows(rewritten, "match_func", dev_fraction, seed=0)[1]
        == train_and_dev_rows(source, "match_func", dev_fraction, seed=0)[1]
    )


def test_probe_anonymous_tools_adds_renamed_copies_of_train_solution_rows_only(generated_data, tmp_path, capsys):
    """scripts/probe_anonymous_tools.py (docs/training.md, "Probe of 2026-12-06: anonymous tool names"): every original
    row as it was, then copies of some train-solution rows with each listed tool renamed to a code, the target naming
    the wanted tool's code (a contract-valid answer), never a copy of a dev solution's row or a validation row; the
    dev split is unchanged; an existing destination is refused and left as it was."""
    from forethought.data_gen.row import is_dev_solution
    from forethought.kernel.specs import SPECS
    from forethought.training.data import read_rows, use_dataset_rendering

    probe = _script("probe_anonymous_tools")
    out = tmp_path / "anonymous"
    assert probe.main([str(generated_data), str(out), "--fraction", "1", "--dev-fraction", "0.5"]) == 0
    assert "anonymous copies added" in capsys.readouterr().out
    use_dataset_rendering(out)
    spec = SPECS["match_func"]
    before, after = read_rows(generated_data, "match_func", "train"), read_rows(out, "match_func", "train")
    assert [r.model_dump() for r in after[: len(before)]] == [r.model_dump() for r in before]
    copies, originals = after[len(before) :], {r.id: r for r in before}
    wanted = [r for r in before if not is_dev_solution(r.solution_id, 0.5, 0)]
    assert len(wanted) < len(before)  # some rows are a dev solution's: the copies must leave them out
    assert len(copies) == len(wanted) > 0  # --fraction 1: every train-solution row, no dev solution's
    for copy in copies:
        old = originals[copy.id.removesuffix("-anonymous")]
        tools, old_tools = copy.input_value["tools"], old.input_value["tools"]
        assert [t["description"] for t in tools] == [t["description"] for t in old_tools]
        assert not {t["name"] for t in tools} & {t["name"] for t in old_tools}
        names = dict(zip((t["name"] for t in old_tools), (t["name"] for t in tools), strict=True))
        old_name = (old.target or {}).get("tool_name")
        assert (copy.target or {}).get("tool_name") == (names[old_name] if old_name else None)
        assert copy.train_only and spec.check_output(copy.input_value, copy.target or {"tool_name": None}).ok
        rendered = spec.messages(spec.input_type.model_validate(copy.input_value))
        assert [(m.role, m.content) for m in copy.prompt] == [(m["role"], m["content"]) for m in rendered]
    _assert_validation_and_dev_rows_unchanged(generated_data, out, dev_fraction=0.5)
    kept = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert probe.main([str(generated_data), str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == kept


def test_probe_task_paraphrases_adds_reworded_copies_of_train_solution_rows_only(generated_data, tmp_path, capsys):
    """scripts/probe_task_paraphrases.py (docs/training.md, "Probe of 2026-12-07, thirteenth session: match_func's tasks
    in other words"): every original row as it was, then one copy per paraphrase (at most --copies) of each
    train-solution row whose task text has paraphrases, the task and its rendered prompt reworded, the target the
    original's; never a dev solution's row or a validation row; a bad paraphrase file is refused before any write."""
    from forethought.data_gen.row import is_dev_solution
    from forethought.kernel.specs import SPECS
    from forethought.training.data import read_rows, use_dataset_rendering

    probe = _script("probe_task_paraphrases")
    before = read_rows(generated_data, "match_func", "train")
    texts = sorted({r.input_value["task"]["text"] for r in before})
    paraphrases = tmp_path / "paraphrases.json"
    paraphrases.write_text(json.dumps({text: [f"Please {text}", f"{text}, now", "third"] for text in texts[::2]}))
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"a task": "not a list"}))
    out = tmp_path / "reworded"
    assert probe.main([str(generated_data), str(out), str(broken)]) == 2
    assert "not a JSON object of task text" in capsys.readouterr().err and not out.exists()
    assert probe.main([str(generated_data), str(out), str(paraphrases), "--copies", "2", "--dev-fraction", "0.5"]) == 0
    assert "paraphrased copies added" in capsys.readouterr().out
    use_dataset_rendering(out)
    spec = SPECS["match_func"]
    after = read_rows(out, "match_func", "train")
    assert [r.model_dump() for r in after[: len(before)]] == [r.model_dump() for r in before]
    copies, originals = after[len(before) :], {r.id: r for r in before}
    listed = set(texts[::2])
    assert any(is_dev_solution(r.solution_id, 0.5, 0) and r.input_value["task"]["text"] in listed for r in before)
    wanted = [
        r for r in before if not is_dev_solution(r.solution_id, 0.5, 0) and r.input_value["task"]["text"] in listed
    ]
    assert len(copies) == 2 * len(wanted) > 0  # two of the three paraphrases, every listed train-solution row
    for copy in copies:
        old = originals[copy.id.rsplit("-paraphrase", 1)[0]]
        assert not is_dev_solution(copy.solution_id, 0.5, 0) and copy.train_only
        text = old.input_value["task"]["text"]
        assert copy.input_value["task"]["text"] in {f"Please {text}", f"{text}, now"}
        assert {**copy.input_value, "task": old.input_value["task"]} == old.input_value
        assert copy.target == old.target
        rendered = spec.messages(spec.input_type.model_validate(copy.input_value))
        assert [(m.role, m.content) for m in copy.prompt] == [(m["role"], m["content"]) for m in rendered]
    _assert_validation_and_dev_rows_unchanged(generated_data, out, dev_fraction=0.5)


def test_probe_fresh_codes_adds_slots_read_with_a_new_renaming_each_time(generated_data, monkeypatch):
    """scripts/probe_fresh_codes.py (docs/training.md, "Probe of 2026-12-06: tool names drawn afresh at every read"):
    the patched ``load_splits`` returns the real train rows as they were, then ``--variants`` renamed renderings of
    each chosen train row (never a dev row: the dev split is the unpatched one); each read of a slot returns the next
    rendering, and a trainer that dropped a row is refused rather than read out of line."""
    import trl

    from forethought.kernel.specs import SPECS
    from forethought.training import data

    probe = _script("probe_fresh_codes")
    monkeypatch.setattr(data, "load_splits", data.load_splits)  # restored after the test: install() patches both
    monkeypatch.setattr(trl, "SFTTrainer", trl.SFTTrainer)
    state = probe.install(fraction=1.0, variants=3)
    train_ds, _, dev = data.load_splits(generated_data, "match_func", dev_fraction=0.25, seed=0)
    train, dev_rows = data.train_and_dev_rows(generated_data, "match_func", 0.25, 0)
    assert dev == dev_rows and dev and state == {"real": len(train), "slots": len(train), "variants": 3}
    rows = train_ds.to_list()
    assert len(rows) == 4 * len(train) and rows[: len(train)] == data.trainer_rows(train)
    spec = SPECS["match_func"]
    for slot, row in enumerate(train):
        variants = rows[len(train) + 3 * slot : len(train) + 3 * slot + 3]
        prompts = [v["prompt"][-1]["content"] for v in variants]
        assert len(set(prompts)) == 3  # a new renaming each time
        for variant, prompt in zip(variants, prompts, strict=True):
            wanted = spec.parse(variant["completion"][0]["content"])["tool_name"]
            if row.target is None or row.target.get("tool_name") is None:
                assert wanted is None
            else:
                assert f"- {wanted}(" in prompt and f"- {row.target['tool_name']}(" not in prompt

    epoch = probe.FreshReads(list(range(2 + 2 * 3)), real=2, slots=2, variants=3)
    assert len(epoch) == 4
    assert [epoch[index] for index in (0, 1, 2, 2, 2, 2, 3)] == [0, 1, 2, 3, 4, 2, 5]
    slots_only = probe.FreshReads(list(range(2 + 2 * 3)), real=2, slots=2, variants=3, codes_only=True)
    assert len(slots_only) == 2 and [slots_only[index] for index in (0, 0, 1)] == [2, 3, 5]
    with pytest.raises(ValueError, match="dropped"):
        probe.FreshReads(list(range(7)), real=2, slots=2, variants=3)
    renamed = probe.renamed_dev(dev, seed=0)
    assert [r.solution_id for r in renamed] == [r.solution_id for r in dev]
    for row, old in zip(renamed, dev, strict=True):
        assert spec.check_output(row.input_value, row.target or {"tool_name": None}).ok
        assert {t["name"] for t in row.input_value["tools"]}.isdisjoint(t["name"] for t in old.input_value["tools"])


def test_probe_fresh_codes_lexical_tasks_are_spans_only_the_wanted_tool_shows(generated_data):
    """``--lexical``: each rendering's task is 2-4 consecutive words of the wanted tool's description as the prompt
    shows it, words no other listed tool's shown description contains, so the row is answered by matching words
    and copying the code on that line; rows with no tool to find (null) or no such span get no slot."""
    from forethought.kernel.specs import SPECS
    from forethought.training import data

    probe = _script("probe_fresh_codes")
    data.use_dataset_rendering(generated_data)
    train, dev = data.train_and_dev_rows(generated_data, "match_func", 0.25, 0)
    rows, slots = probe.variant_rows(train, 1.0, 2, 0, lexical=True)
    findable = [row for row in train if probe.unique_spans(row.input_value, row.target)]
    assert 0 < slots == len(findable) <= len(train) and len(rows) == 2 * slots
    assert all(not probe.unique_spans(r.input_value, r.target) for r in train if not (r.target or {}).get("tool_name"))
    spec = SPECS["match_func"]
    for row in rows:
        prompt = row["prompt"][-1]["content"]
        task = prompt.splitlines()[0].removeprefix("Task: ")
        wanted = spec.parse(row["completion"][0]["content"])["tool_name"]
        lines = [line for line in prompt.splitlines() if line.startswith("- ")]
        holding = [line.split("(", 1)[0][2:] for line in lines if task.lower() in line.split("): ", 1)[-1].lower()]
        assert holding == [wanted] and 2 <= len(task.split()) <= 4 and wanted.startswith("fn_")
    renamed = probe.renamed_dev(dev, seed=0, lexical=True)
    assert 0 < len(renamed) <= len(dev) and all(row.target["tool_name"].startswith("fn_") for row in renamed)
    moved = probe.task_last(rows[0]["prompt"])
    before, after = rows[0]["prompt"][-1]["content"].splitlines(), moved[-1]["content"].splitlines()
    assert after[-1] == before[0] and after[:-1] == before[1:] and moved[:-1] == rows[0]["prompt"][:-1]
    last_rows, last_slots = probe.variant_rows(train, 1.0, 1, 0, lexical=True, last=True)
    assert last_slots == slots and all(
        r["prompt"][-1]["content"].splitlines()[-1].startswith("Task: ") for r in last_rows
    )


def test_probe_fresh_codes_shuffled_slots_keep_names_and_draw_the_order_anew(generated_data, capsys):
    """``--shuffled`` (docs/training.md, "Probe of 2026-12-07: the tool list's order"): each rendering shows the
    row's own tool lines and answer, the list in a new order; it refuses the renaming flags it cannot go with."""
    from forethought.kernel.specs import SPECS
    from forethought.training import data

    probe = _script("probe_fresh_codes")
    data.use_dataset_rendering(generated_data)
    train, _ = data.train_and_dev_rows(generated_data, "match_func", 0.25, 0)
    rows, slots = probe.variant_rows(train, 1.0, 4, 0, shuffled=True)
    assert slots == len(train) and len(rows) == 4 * slots
    spec = SPECS["match_func"]
    reordered = 0
    for slot, row in enumerate(train):
        listed = spec.messages(spec.input_type.model_validate(row.input_value))[-1]["content"].splitlines()
        for variant in rows[4 * slot : 4 * slot + 4]:
            shown = variant["prompt"][-1]["content"].splitlines()
            assert shown[0] == listed[0] and sorted(shown) == sorted(listed)
            assert variant["completion"][0]["content"] == spec.target_text(row.target or {"tool_name": None})
            reordered += shown != listed
    assert reordered > 2 * len(rows) // 3  # lists of two or three tools may draw their own order again
    assert probe.main(["--shuffled", "--codes-only", "--", "train"]) == 2
    assert "not with --codes-only" in capsys.readouterr().err


def test_probe_tool_order_decodes_each_order_and_votes(tiny_pipeline, capsys):
    """scripts/probe_tool_order.py (docs/training.md, "Probe of 2026-12-07: the tool list's order"): the listed
    order first, then drawn orders of the same lines; a vote's tie goes to the earliest order; bad input exits 2."""
    from forethought.kernel.specs import SPECS
    from forethought.training.data import read_rows

    probe = _script("probe_tool_order")
    spec = SPECS["match_func"]
    rows = read_rows(tiny_pipeline / "data", "match_func", "validation")
    inputs = [spec.input_type.model_validate(row.input_value) for row in rows]
    shown = probe.orders_of(inputs, 3, seed=0)
    assert shown[0] == inputs and len(shown) == 3
    for drawn in shown[1:]:
        for inp, original in zip(drawn, inputs, strict=True):
            assert inp.task == original.task and sorted(t.name for t in inp.tools) == sorted(
                t.name for t in original.tools
            )
    assert any(
        [t.name for t in drawn.tools] != [t.name for t in original.tools]
        for drawn, original in zip(shown[1], inputs, strict=True)
    )
    assert probe.vote([{"tool_name": "a"}, {"tool_name": "b"}, {"tool_name": "b"}]) == {"tool_name": "b"}
    assert probe.vote([{"tool_name": "a"}, {"tool_name": None}, {"tool_name": "c"}]) == {"tool_name": "a"}

    args = ["--train-dir", str(tiny_pipeline / "train"), "--dataset-dir", str(tiny_pipeline / "data")]
    assert probe.main([*args, "--orders", "3", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "order 0 (as listed): " in out and "order 2 (drawn): " in out and "vote of 3 orders: " in out
    assert probe.main(["--train-dir", str(tiny_pipeline), "--dataset-dir", str(tiny_pipeline / "data")]) == 2
    assert "no trained match_func" in capsys.readouterr().err


def test_probe_prose_base_keeps_docstring_prose_and_adds_it_to_the_base_rows_only(tmp_path, capsys):
    """scripts/probe_prose_base.py (docs/training.md, "Probe of 2026-12-07, fourteenth session: a base that also reads
    English prose"): only the prose paragraphs of docstrings reach the corpus (no doctest or code lines, no tests
    folder, no repeats), in chunks; the patched base rows are every request row the stage reads plus the asked number
    of prose chunks as user turns; an existing output or a missing root is refused before any write."""
    probe = _script("probe_prose_base")
    package = tmp_path / "pkg"
    (package / "tests").mkdir(parents=True)
    (package / "tools.py").write_text(
        '"""Copy the lines of a file into another file, keeping their order.\n\n>>> copy("notes.txt", "backup.txt", keep_order=True)  # every line is copied\n"""\n\n'
        "def sort_lines(path):\n"
        '    """Return the lines of the file sorted alphabetically, one per line.\n\n    table = [[1, 2], [3, 4], [5, 6]]  # the rows it returns\n    """\n\n'
        "def again():\n"
        '    """Return the lines of the file sorted alphabetically, one per line."""\n'
    )
    (package / "tests" / "test_tools.py").write_text('"""A test module that only checks how the tools behave."""\n')
    prose = list(probe.prose_paragraphs((package / "tools.py").read_text()))
    assert prose == [
        "Copy the lines of a file into another file, keeping their order.",
        "Return the lines of the file sorted alphabetically, one per line.",
        "Return the lines of the file sorted alphabetically, one per line.",
    ]
    out = tmp_path / "corpus.jsonl"
    assert probe.main(["corpus", str(out), "--root", str(tmp_path / "absent")]) == 2
    assert "not a folder" in capsys.readouterr().err and not out.exists()
    chunks, paragraphs = probe.build_corpus([package], words_per_chunk=10)
    assert paragraphs == 2 and chunks == prose[:2]  # the tests folder skipped, the repeat dropped, ~10 words a chunk
    out.write_text("kept\n")
    assert probe.main(["corpus", str(out), "--root", str(package)]) == 2
    assert out.read_text() == "kept\n"

    requests = [{"messages": [{"role": "user", "content": f"request {index}"}]} for index in range(20)]
    mixed = probe.with_prose(lambda cfg: list(requests), [f"prose {index}" for index in range(10)], count=4, seed=1)
    rows = mixed(None)
    added = [row for row in rows if row["messages"][0]["content"].startswith("prose")]
    assert len(rows) == 24 and sorted(map(str, rows)) == sorted(map(str, requests + added))
    assert len(added) == 4 and all(
        row["messages"] == [{"role": "user", "content": row["messages"][0]["content"]}] for row in added
    )
    assert rows != requests + added  # shuffled among the requests, not appended
    assert mixed(None) == rows  # the seed fixes which chunks and where
