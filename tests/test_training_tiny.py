"""`forethought train` with the tiny profile, end to end on CPU (real trl SFTTrainer, real peft, real files).

The data is real: `forethought generate` on the fixture solutions (tests/conftest.py's
``generated_data``). Expensive runs are module-scoped and shared: run A (uninterrupted),
run B (same seed, another folder), run C (interrupted at step 3, then resumed).
"""

from __future__ import annotations

import json
import os
import shutil

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["WANDB_MODE"] = "offline"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from forethought.cli import main as forethought_main  # noqa: E402
from forethought.data_gen.unit import seal  # noqa: E402
from forethought.errors import UserError  # noqa: E402
from forethought.kernel.specs import SPECS  # noqa: E402
from forethought.training import artifacts  # noqa: E402
from forethought.training.config import PRIMITIVE_NAMES  # noqa: E402
from forethought.training.data import dataset_spec_hash  # noqa: E402
from forethought.training.train import config_from_overrides, run  # noqa: E402

STEPS = 4
PRIM = "match_fill"  # the primitive of the single-adapter runs: real match_fill prompts are short (~170 tokens), so steps are cheap


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _copy_data(src: Path, dst: Path, primitives=PRIMITIVE_NAMES) -> Path:
    dst.mkdir(parents=True)
    shutil.copy(src / "stats.json", dst / "stats.json")
    for primitive in primitives:
        shutil.copytree(src / primitive, dst / primitive)
    seal(dst)  # a copy of part of a dataset is a new unit (issue 13: train checks the manifest)
    return dst


@pytest.fixture(scope="module")
def data_dir(generated_data, tmp_path_factory) -> Path:
    """A copy of the generated datasets whose stats.json records the spec hashes (as `forethought generate` does)."""
    data = _copy_data(generated_data, tmp_path_factory.mktemp("data") / "d")
    stats = json.loads((data / "stats.json").read_text())
    stats.setdefault("spec_hashes", {p: SPECS[p].spec_hash for p in PRIMITIVE_NAMES})
    (data / "stats.json").write_text(json.dumps(stats))
    seal(data)
    rows = [json.loads(x) for x in (data / PRIM / "train.jsonl").read_text().splitlines()]
    assert len(rows) >= 16 and {r["solution_id"] for r in rows} and all(r["primitive"] == PRIM for r in rows)
    return data


def overrides(data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        f"primitive={PRIM}",
        "model=tiny",
        "model.pretrain=null",  # a random base: these tests are about the adapter run, not the base stage
        f"dataset_dir={data_dir}",
        f"output_dir={out}",
        "train=quick",
        f"train.max_steps={STEPS}",
        "train.save_steps=2",
        "train.logging_steps=1",
        "train.per_device_batch_size=4",
        "train.max_eval_examples=4",
        "logging=none",
        "logging.progress=false",
        "seed=7",
        *extra,
    ]


class SnapshotLora(TrainerCallback):
    """Records the LoRA weights as initialised (before the first optimizer step)."""

    def __init__(self) -> None:
        self.initial: dict[str, torch.Tensor] = {}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.initial = {n: p.detach().clone() for n, p in model.named_parameters() if ".lora_" in n}


class InterruptAt(TrainerCallback):
    """Simulates a crash after ``step`` optimizer steps."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            raise KeyboardInterrupt(f"simulated interruption at step {state.global_step}")


@pytest.fixture(scope="module")
def run_a(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run_a")
    snap = SnapshotLora()
    res = run(config_from_overrides(overrides(data_dir, out)), callbacks=[snap], keep_trainer=True)[PRIM]
    return out, res, snap


@pytest.fixture(scope="module")
def run_b(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("run_b")
    res = run(config_from_overrides(overrides(data_dir, out)))[PRIM]
    return out, res


@pytest.fixture(scope="module")
def run_c(data_dir, tmp_path_factory):
    """Interrupted after step 3 (last checkpoint: step 2), then resumed with train.resume=true."""
    out = tmp_path_factory.mktemp("run_c")
    with pytest.raises(KeyboardInterrupt):
        run(config_from_overrides(overrides(data_dir, out)), callbacks=[InterruptAt(3)])
    ckpts = sorted(p.name for p in (out / PRIM / "checkpoints").iterdir() if p.name.startswith("checkpoint-"))
    assert not (out / PRIM / "adapter").exists()
    res = run(config_from_overrides(overrides(data_dir, out, "train.resume=true")))[PRIM]
    return out, res, ckpts


def _adapter(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / PRIM / "adapter" / "adapter_model.safetensors"))


# ---------------------------------------------------------------- tokenizer and data


def test_tiny_base_reloads_with_auto_classes(run_a):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, _, _ = run_a
    base = out / "base"
    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert model.config.head_dim >= 32
    for token in ("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>", "<unk>"):
        assert tok.convert_tokens_to_ids(token) != tok.unk_token_id or token == "<unk>"
    assert tok.convert_tokens_to_ids("<end_of_turn>") in model.generation_config.eos_token_id
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert (
        text == "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n"
    )  # system folded into the user turn
    assert json.loads((out / "base.json").read_text())["profile"] == "tiny"


def test_collated_batch_masks_prompt_and_trains_end_of_turn(run_a):
    _, res, _ = run_a
    trainer = res.trainer
    tok = trainer.processing_class
    bos, eot = tok.bos_token_id, tok.convert_tokens_to_ids("<end_of_turn>")
    start = tok.encode("<start_of_turn>model\n", add_special_tokens=False)
    examples = [trainer.train_dataset[i] for i in range(3)]
    batch = trainer.data_collator(examples)
    ids, labels = batch["input_ids"], batch["labels"]
    for row in range(3):
        length = len(examples[row]["input_ids"])
        seq, lab = ids[row, :length].tolist(), labels[row, :length].tolist()
        assert seq[0] == bos and seq.count(bos) == 1, "exactly one <bos>, at the start"
        # the trained span starts right after the last '<start_of_turn>model\n'
        k = max(i for i in range(length - len(start)) if seq[i : i + len(start)] == start) + len(start)
        assert all(x == -100 for x in lab[:k]), "prompt tokens carry no loss"
        assert lab[k:] == seq[k:], "every completion token carries loss"
        trained = tok.decode(lab[k:])
        completion = trainer.train_dataset[row]  # prepared: only ids/labels are left, so compare with the raw data
        assert eot in lab[k:], "<end_of_turn> is trained"
        assert trained.endswith("<end_of_turn>\n")
        json.loads(trained[: -len("<end_of_turn>\n")])  # the completion JSON itself
        del completion
        assert (labels[row, length:] == -100).all(), "padding carries no loss"


# ---------------------------------------------------------------- training


def test_run_folder_contents(run_a):
    out, res, _ = run_a
    rd = out / PRIM
    for name in (
        "config.yaml",
        "metrics.json",
        "loss.png",
        "run_state.json",
        "adapter/adapter_model.safetensors",
        "adapter/adapter_config.json",
    ):
        assert (rd / name).is_file(), name
    assert (rd / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((rd / "metrics.json").read_text())
    assert metrics["completed"] and metrics["global_step"] == STEPS
    assert len(metrics["train_loss_history"]) == STEPS and all(e["loss"] > 0 for e in metrics["train_loss_history"])
    assert metrics["eval_loss"] is not None and metrics["eval_loss"] > 0
    assert metrics["tokens_seen"] > 0 and metrics["tokens_per_second"] > 0 and metrics["wall_time_s"] > 0
    assert metrics["adapter"]["lora_modules"] == 2 * 7
    import yaml

    cfg = yaml.safe_load((rd / "config.yaml").read_text())
    assert cfg["primitive"] == PRIM and cfg["train"]["max_steps"] == STEPS and cfg["seed"] == 7


def test_run_folder_records_the_datasets_spec_hash(run_a):
    out, res, _ = run_a
    want = SPECS[PRIM].spec_hash
    assert json.loads((out / PRIM / "run_state.json").read_text())["spec_hash"] == want
    assert json.loads((out / PRIM / "metrics.json").read_text())["spec_hash"] == want == res.metrics["spec_hash"]


def test_dataset_spec_hash_is_read_from_stats_json(tmp_path):
    assert dataset_spec_hash(tmp_path, "match_func") is None  # no stats.json
    (tmp_path / "stats.json").write_text(json.dumps({"primitives": {}}))
    seal(tmp_path)
    assert dataset_spec_hash(tmp_path, "match_func") is None  # stats.json without spec_hashes: recorded as null
    (tmp_path / "stats.json").write_text(json.dumps({"spec_hashes": {"match_func": "abc123"}}))
    seal(tmp_path)
    assert dataset_spec_hash(tmp_path, "match_func") == "abc123" and dataset_spec_hash(tmp_path, "decompose") is None


def test_training_on_data_rendered_by_another_spec_is_refused(data_dir, tmp_path):
    stale = _copy_data(data_dir, tmp_path / "stale", primitives=(PRIM,))
    (stale / "stats.json").write_text(json.dumps({"spec_hashes": {PRIM: "0" * 16}}))
    seal(stale)
    with pytest.raises(UserError, match=f"{PRIM}: data 0000000000000000, code {SPECS[PRIM].spec_hash}"):
        run(config_from_overrides(overrides(stale, tmp_path / "o")))
    assert not (tmp_path / "o").exists(), "refused before anything was built"


def test_all_lora_parameters_change_and_no_base_parameter_does(run_a):
    out, res, snap = run_a
    model = res.trainer.model
    assert snap.initial, "snapshot taken"
    now = {n: p.detach() for n, p in model.named_parameters()}
    unchanged = [n for n, init in snap.initial.items() if torch.equal(init, now[n])]
    assert not unchanged, f"LoRA parameters that did not change: {unchanged[:5]}"
    base_disk = load_file(str(out / "base" / "model.safetensors"))
    base_now = {
        n.replace("base_model.model.", "").replace(".base_layer", ""): p for n, p in now.items() if ".lora_" not in n
    }
    assert set(base_disk) <= set(base_now) | {"lm_head.weight"}
    changed = [k for k, v in base_disk.items() if k in base_now and not torch.equal(v, base_now[k])]
    assert not changed, f"base parameters changed: {changed[:5]}"
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n for n in trainable)


def test_adapter_reloads_with_identical_logits(run_a):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out, res, _ = run_a
    trained = res.trainer.model.eval()
    input_ids = torch.tensor([res.trainer.train_dataset[0]["input_ids"]])
    with torch.no_grad():
        want = trained(input_ids=input_ids).logits
        base = AutoModelForCausalLM.from_pretrained(out / "base")
        got = PeftModel.from_pretrained(base, out / PRIM / "adapter").eval()(input_ids=input_ids).logits
        plain = AutoModelForCausalLM.from_pretrained(out / "base").eval()(input_ids=input_ids).logits
    assert torch.equal(want, got)
    assert not torch.allclose(want, plain), "the adapter changes the output"


def test_same_seed_same_adapter(run_a, run_b):
    adapter_a, adapter_b = _adapter(run_a[0]), _adapter(run_b[0])
    assert adapter_a.keys() == adapter_b.keys()
    assert all(torch.equal(adapter_a[k], adapter_b[k]) for k in adapter_a), (
        "same seed + data on CPU must give bitwise-identical adapters"
    )
    assert (
        load_file(str(run_a[0] / "base" / "model.safetensors")).keys()
        == load_file(str(run_b[0] / "base" / "model.safetensors")).keys()
    )
    base_a = load_file(str(run_a[0] / "base" / "model.safetensors"))
    base_b = load_file(str(run_b[0] / "base" / "model.safetensors"))
    assert all(torch.equal(base_a[k], base_b[k]) for k in base_a), "the tiny base is deterministic from the seed"


def test_interrupted_run_resumes_to_the_same_adapter(run_a, run_c):
    out, res, ckpts = run_c
    assert ckpts == ["checkpoint-2"], "the interruption at step 3 left the step-2 checkpoint"
    metrics = res.metrics
    assert metrics["resumed_from"] == "checkpoint-2"
    assert metrics["global_step"] == STEPS and metrics["steps_this_session"] == STEPS - 2
    adapter_a, adapter_c = _adapter(run_a[0]), _adapter(out)
    assert all(torch.equal(adapter_a[k], adapter_c[k]) for k in adapter_a), (
        "resumed run must equal the uninterrupted one"
    )
    # the loss history is carried over from the checkpoint
    assert [e["step"] for e in metrics["train_loss_history"]] == list(range(1, STEPS + 1))


def test_rerun_without_resume_is_refused_and_resume_of_complete_run_is_a_no_op(data_dir, run_a):
    out, _, _ = run_a
    with pytest.raises(UserError, match="train.resume=true"):
        run(config_from_overrides(overrides(data_dir, out)))
    res = run(config_from_overrides(overrides(data_dir, out, "train.resume=true")))[PRIM]
    assert res.notes == ["already complete"]


def test_overwrite_replaces_a_finished_run(data_dir, tmp_path):
    out = tmp_path / "ow"
    run(config_from_overrides(overrides(data_dir, out, "train.max_steps=1")))
    (out / PRIM / "stray.txt").write_text("left by the first run")
    res = run(config_from_overrides(overrides(data_dir, out, "train.max_steps=2", "train.overwrite=true")))[PRIM]
    assert res.metrics["global_step"] == 2 and res.metrics["resumed_from"] is None
    assert not (out / PRIM / "stray.txt").exists()
    (out / "get_order").mkdir()
    (out / "get_order" / "precious.txt").write_text("not ours")
    with pytest.raises(UserError, match="not a forethought run folder"):
        run(config_from_overrides(overrides(data_dir, out, "primitive=get_order", "train.overwrite=true")))
    assert (out / "get_order" / "precious.txt").exists()


def test_resume_with_a_changed_config_is_refused(data_dir, run_c):
    out, _, _ = run_c
    with pytest.raises(UserError, match=r"train.learning_rate"):
        run(config_from_overrides(overrides(data_dir, out, "train.resume=true", "train.learning_rate=0.5")))


# ---------------------------------------------------------------- the command


def test_cli_all_trains_five_adapters_on_one_base(data_dir, tmp_path, capsys):
    out = tmp_path / "all"
    rc = forethought_main(
        [
            "train",
            "primitive=all",
            "model=tiny",
            "model.pretrain=null",
            f"dataset_dir={data_dir}",
            f"output_dir={out}",
            "train=quick",
            "train.max_steps=2",
            "train.per_device_batch_size=1",
            "train.max_eval_examples=1",
            "logging=none",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert artifacts.trained_primitives(out) == list(PRIMITIVE_NAMES)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*PRIMITIVE_NAMES, "base", "base.json", ".base.lock", *(f".{p}.lock" for p in PRIMITIVE_NAMES)]
    )
    model, tok = artifacts.load_adapters(out)
    assert set(model.peft_config) == set(PRIMITIVE_NAMES)
    inputs = tok.apply_chat_template(
        [{"role": "user", "content": "refuel 3 GB"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    outs = {}
    with torch.no_grad():
        for primitive in PRIMITIVE_NAMES:
            model.set_adapter(primitive)
            outs[primitive] = model(**inputs).logits
    assert all(not torch.equal(outs["decompose"], outs[p]) for p in PRIMITIVE_NAMES[1:]), "each adapter is its own"
    assert artifacts.stop_token_ids(tok) == [tok.convert_tokens_to_ids("<end_of_turn>"), tok.eos_token_id]


def test_cli_reports_unknown_key_and_bad_type_together(capsys):
    rc = forethought_main(["train", "train.lrr=1", "train.epochs=abc"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "2 errors" in err and "train.lrr: unknown key" in err and "train.epochs" in err and "'abc'" in err


def test_cli_missing_dataset_is_a_user_error(tmp_path, capsys):
    rc = forethought_main(
        [
            "train",
            "primitive=decompose",
            f"dataset_dir={tmp_path / 'nope'}",
            f"output_dir={tmp_path / 'o'}",
            "logging=none",
        ]
    )
    assert rc == 2 and "missing train split" in capsys.readouterr().err


def test_wandb_offline_writes_one_local_run_per_primitive(data_dir, tmp_path):
    out = tmp_path / "wb"
    for primitive in ("get_order", "match_fill"):  # two runs in one process, like primitive=all
        run(
            config_from_overrides(
                overrides(data_dir, out, f"primitive={primitive}", "logging=wandb_offline", "train.max_steps=1")
            )
        )
    for primitive in ("get_order", "match_fill"):
        run_id = (out / primitive / "wandb_run_id").read_text().strip()
        assert run_id.startswith(primitive)
        runs = list((out / primitive / "wandb").glob("offline-run-*"))
        assert len(runs) == 1 and runs[0].name.endswith(run_id), (
            f"{primitive}: its own offline run, synced later with `wandb sync`"
        )


def test_multirun_with_the_local_launcher(data_dir, tmp_path):
    out = tmp_path / "mr"
    rc = forethought_main(
        [
            "train",
            "-m",
            "primitive=get_order,match_fill",
            f"dataset_dir={data_dir}",
            f"output_dir={out}",
            "train=quick",
            "train.max_steps=1",
            "logging=none",
            "model.pretrain=null",
        ]
    )
    assert rc == 0
    assert artifacts.trained_primitives(out) == ["get_order", "match_fill"]
    sweeps = list((out / "multirun").iterdir())
    assert len(sweeps) == 1 and sorted(p.name for p in sweeps[0].iterdir() if not p.name.startswith(".")) >= [
        "0_get_order",
        "1_match_fill",
    ]


def test_multirun_checks_every_points_data_before_launching(data_dir, tmp_path, capsys):
    data = _copy_data(data_dir, tmp_path / "d", primitives=("match_fill",))  # no get_order data
    rc = forethought_main(
        [
            "train",
            "-m",
            "primitive=get_order,match_fill",
            f"dataset_dir={data}",
            f"output_dir={tmp_path / 'o'}",
            "train=quick",
            "train.max_steps=1",
            "logging=none",
            "model.pretrain=null",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "[primitive=get_order" in err and "missing train split" in err
    assert not (tmp_path / "o").exists(), "no job was launched"


def test_multirun_job_failure_is_a_clean_message_and_a_nonzero_exit(data_dir, tmp_path, capsys):
    blocked = tmp_path / "b"
    (blocked / "match_fill").mkdir(parents=True)
    (blocked / "match_fill" / "notes.txt").write_text("not a run folder")  # train.overwrite refuses to delete it
    rc = forethought_main(
        [
            "train",
            "-m",
            f"output_dir={tmp_path / 'a'},{blocked}",
            "primitive=match_fill",
            f"dataset_dir={data_dir}",
            "train=quick",
            "train.max_steps=1",
            "train.overwrite=true",
            "logging=none",
            "model.pretrain=null",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ]
    )
    err = capsys.readouterr().err
    assert rc != 0 and "not a forethought run folder" in err and "Traceback" not in err
    assert artifacts.trained_primitives(tmp_path / "a") == ["match_fill"], "the other job still ran"


def test_a_second_run_into_the_same_folder_is_refused_while_the_first_runs(data_dir, tmp_path):
    import fcntl

    out = tmp_path / "locked"
    out.mkdir()
    with open(out / f".{PRIM}.lock", "w") as held:  # what a running `forethought train` holds
        held.write("4242")
        held.flush()
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(UserError, match=r"another `forethought train` \(pid 4242\) is training") as exc:
            run(config_from_overrides(overrides(data_dir, out, "train.overwrite=true")))
        assert exc.value.where == str(out / PRIM)
    assert not (out / "base").exists(), "nothing was built or deleted while the folder was in use"


def test_bad_input_found_during_a_run_is_a_located_user_error(data_dir, tmp_path):
    # every prompt longer than max_length: nothing left to train on
    with pytest.raises(UserError, match="no train example is left") as exc:
        run(config_from_overrides(overrides(data_dir, tmp_path / "short", "train.max_length=16")))
    assert exc.value.where == "train.max_length"
    # an attention kernel that cannot run here is refused before the base is built
    with pytest.raises(UserError, match="needs a CUDA GPU") as exc:
        run(
            config_from_overrides(
                overrides(data_dir, tmp_path / "fa", "model.attn_implementation=flash_attention_2", "train.device=cpu")
            )
        )
    assert exc.value.where == "model.attn_implementation" and not (tmp_path / "fa").exists()
    # a dataset file that is not UTF-8
    data = _copy_data(data_dir, tmp_path / "d", primitives=(PRIM,))
    (data / PRIM / "train.jsonl").write_bytes(b'{"prompt": "\xff\xfe"}\n\xff\xfe\n')
    seal(data)
    with pytest.raises(UserError, match="not UTF-8") as exc:
        run(config_from_overrides(overrides(data, tmp_path / "u")))
    assert exc.value.where.endswith("train.jsonl")


def test_multirun_validates_every_sweep_point_up_front(capsys):
    rc = forethought_main(["train", "-m", "primitive=match_func,nope", "train.epochs=x"])
    err = capsys.readouterr().err
    assert rc == 2 and "nope" in err and "train.epochs" in err


def test_sdpa_keeps_packed_sequences_apart(run_a):
    """What train.packing relies on with sdpa: position_ids resets give a block-diagonal mask (no cache, as in training)."""
    from transformers import AutoModelForCausalLM

    out, _, _ = run_a
    model = AutoModelForCausalLM.from_pretrained(out / "base", attn_implementation="sdpa").eval()
    _, _, la, lb, packed = _packed_vs_alone(model, vocab=500)
    assert torch.allclose(packed[:, :37], la, atol=1e-5) and torch.allclose(packed[:, 37:], lb, atol=1e-5)


def _packed_vs_alone(model, vocab: int):
    """Two sequences (37 and 23 tokens) run alone and packed into one row with position_ids resets."""
    generator = torch.Generator().manual_seed(0)
    first, second = (
        torch.randint(10, vocab, (1, 37), generator=generator),
        torch.randint(10, vocab, (1, 23), generator=generator),
    )
    with torch.no_grad():
        la, lb = model(input_ids=first).logits, model(input_ids=second).logits
        pos = torch.cat([torch.arange(37), torch.arange(23)]).unsqueeze(0)
        packed = model(input_ids=torch.cat([first, second], 1), position_ids=pos, use_cache=False).logits
    return first, second, la, lb, packed


def test_sdpa_keeps_packed_sequences_apart_within_the_sliding_window():
    """Packing with Gemma 3's sliding-window layers (a known trap): sequences longer than the window,
    packed into one row, give the same logits as run alone."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
    )
    cfg._attn_implementation = "sdpa"
    model = Gemma3ForCausalLM(cfg).eval()
    first, second, la, lb, packed = _packed_vs_alone(model, vocab=290)
    assert torch.allclose(packed[:, :37], la, atol=1e-5) and torch.allclose(packed[:, 37:], lb, atol=1e-5)
    # without the position_ids reset the second sequence would see the first: the check can fail
    with torch.no_grad():
        contaminated = model(input_ids=torch.cat([first, second], 1), use_cache=False).logits
    assert not torch.allclose(contaminated[:, 37:], lb, atol=1e-3)


def test_packing_run(data_dir, tmp_path):
    # real match_fill examples are ~150-180 tokens long
    cfg = config_from_overrides(
        overrides(data_dir, tmp_path / "pk", "train.packing=true", "train.max_length=512", "train.max_steps=2")
    )
    res = run(cfg, keep_trainer=True)[PRIM]
    metrics, ds = res.metrics, res.trainer.train_dataset
    assert metrics["global_step"] == 2 and metrics["tokens_seen"] > 0 and metrics["train_loss_history"][0]["loss"] > 0
    # BFD packing: rows of up to 512 tokens hold several examples (with their lengths for the attention mask)
    assert len(ds) < metrics["train_examples"] and "seq_lengths" in ds.column_names
    assert max(len(r) for r in ds["input_ids"]) <= 512 and any(len(s) > 1 for s in ds["seq_lengths"])


def test_cpu_threads_apply_during_training_only(data_dir, tmp_path):
    seen = []

    class Threads(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            seen.append(torch.get_num_threads())

    torch.set_num_threads(2)
    try:
        run(
            config_from_overrides(overrides(data_dir, tmp_path / "th", "train.max_steps=1", "train.cpu_threads=1")),
            callbacks=[Threads()],
        )
        assert seen == [1] and torch.get_num_threads() == 2, "set while training, restored after"
    finally:
        torch.set_num_threads(1)


def test_a_base_record_with_no_adapter_behind_it_does_not_refuse_the_next_run(data_dir, tmp_path):
    """A failed base load used to leave base.json behind, and the next, correct run was refused."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "base.json").write_text(
        json.dumps({"profile": "gemma3_12b", "path": "/models/wrong", "model_type": "gemma3"})
    )
    res = run(config_from_overrides(overrides(data_dir, out)))[PRIM]
    assert res.metrics["completed"]
    assert json.loads((out / "base.json").read_text())["profile"] == "tiny"
    # once an adapter belongs to it, the record binds: another base is refused
    (out / "base.json").write_text(
        json.dumps({"profile": "gemma3_12b", "path": "/models/other", "model_type": "gemma3"})
    )
    with pytest.raises(UserError, match="belong to another base"):
        run(config_from_overrides(overrides(data_dir, out, "train.resume=true")))
