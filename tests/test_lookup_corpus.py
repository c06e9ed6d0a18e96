"""Made-up lookups before a primitive's rows (``train.per_primitive.<name>.lookup``, training/lookup_corpus.py): the
corpus asks only what one shown line answers, is drawn from train rows and the seed alone, and the real trl phase
trains every weight, resumes, and is refused up front where it cannot run."""

from __future__ import annotations

import json
import random

import pytest


def _overrides(data, out, *extra):
    return [
        "primitive=match_func",
        "model=tiny",
        "model.pretrain=null",
        f"dataset_dir={data}",
        f"output_dir={out}",
        "train=quick",
        "train.finetuning=full",
        "train.max_steps=2",
        "train.per_device_batch_size=2",
        "train.cpu_threads=1",
        "model.tiny.vocab_size=1024",
        "logging=none",
        "logging.progress=false",
        *extra,
    ]


def _cfg(data, out, *extra):
    from forethought.training.train import config_from_overrides

    return config_from_overrides(_overrides(data, out, *extra))


LOOKUP = "train.per_primitive.match_func.lookup={steps:3,per_device_batch_size:2,save_steps:2}"


def test_each_lookup_asks_only_what_one_shown_line_answers(generated_data):
    """Real tool lines with their names shuffled among them, then tasks that are 2-4 words only one shown
    description holds, each answered with the name written on that line; only the names are answers."""
    from forethought.data_gen.row import read_rows
    from forethought.training import lookup_corpus

    pool = lookup_corpus.tool_lines(row.prompt_messages() for row in read_rows(generated_data, "match_func", "train"))
    assert len(pool) >= 6 and len({name for name, _, _ in pool}) == len(pool)
    assert all("…" not in description for _, _, description in pool)
    rng = random.Random(0)
    asked = kept = 0
    for _ in range(20):
        parts, count = lookup_corpus.sequence(pool, rng, 6, 6)
        text = "".join(piece for piece, _ in parts)
        lines = [line for line in text.splitlines() if line.startswith("- ")]
        assert len(lines) == 6 and parts[0][0].startswith("Tools:\n") and not parts[0][1]
        answers = [piece.removesuffix('"}') for piece, is_answer in parts if is_answer]
        tasks = [line.removeprefix("Task: ") for line in text.splitlines() if line.startswith("Task: ")]
        assert len(answers) == len(tasks) == count <= 6
        for task, answer in zip(tasks, answers, strict=True):
            holding = [line[2:].split("(", 1)[0] for line in lines if task.lower() in line.split("): ", 1)[-1].lower()]
            assert holding == [answer] and 2 <= len(task.split()) <= 4
        shown = {line[2:].split("(", 1)[0]: line.split("): ", 1)[-1] for line in lines}
        kept += sum(dict((name, desc) for name, _, desc in pool).get(name) == desc for name, desc in shown.items())
        asked += count
    assert asked > 60 and kept < 60  # names moved: a name stays beside its own description only by chance


def test_a_share_of_lookups_asks_what_no_shown_line_holds_and_is_answered_null(generated_data):
    """none_share: that share of the lookups asks words of a tool not shown that no shown description holds, answered
    null, and the name's opening quote moves into the answer (a name or null is decided at its first token); at 0 the
    sequences are the very ones drawn before the option existed (no extra draw from the seed)."""
    from forethought.data_gen.row import read_rows
    from forethought.training import lookup_corpus

    pool = lookup_corpus.tool_lines(row.prompt_messages() for row in read_rows(generated_data, "match_func", "train"))
    plain, zero = random.Random(5), random.Random(5)
    for _ in range(10):
        assert lookup_corpus.sequence(pool, plain, 6, 6) == lookup_corpus.sequence(pool, zero, 6, 6, 0.0)
    rng = random.Random(0)
    nulls = named = 0
    for _ in range(40):
        parts, count = lookup_corpus.sequence(pool, rng, 6, 6, 0.3)
        text = "".join(piece for piece, _ in parts)
        lines = [line for line in text.splitlines() if line.startswith("- ")]
        answers = [piece for piece, is_answer in parts if is_answer]
        tasks = [line.removeprefix("Task: ") for line in text.splitlines() if line.startswith("Task: ")]
        assert len(answers) == len(tasks) == count
        assert all(piece.endswith('{"tool_name": ') for piece, is_answer in parts if piece.startswith("Task: "))
        for task, answer in zip(tasks, answers, strict=True):
            holding = [line[2:].split("(", 1)[0] for line in lines if task.lower() in line.split("): ", 1)[-1].lower()]
            if answer == "null}":
                nulls += 1
                assert holding == [] and 2 <= len(task.split()) <= 4
            else:
                named += 1
                assert answer.startswith('"') and holding == [answer.removeprefix('"').removesuffix('"}')]
    assert 0.15 < nulls / (nulls + named) < 0.45


def test_task_sequences_ask_real_train_tasks_against_their_own_tool_list(generated_data):
    """task_share: real train tasks of one registry (train-only rows left out), the lines of the tools they want shown
    but for the ones left out (those tasks answered null), the rest drawn from the same list, one line per description,
    names shuffled among the lines: each answer is the name written on the wanted tool's line, or null when it is not
    shown."""
    from forethought.data_gen.row import read_rows
    from forethought.training import lookup_corpus

    rows = read_rows(generated_data, "match_func", "train")
    registries = lookup_corpus.registries(rows)
    asked_of = {row.input_value["task"]["text"] for row in rows if not row.train_only}
    assert registries and all(tasks for _, tasks in registries)
    assert {task for _, tasks in registries for task, _ in tasks} == asked_of
    rng = random.Random(0)
    nulls = named = 0
    for _ in range(60):
        registry = rng.choice(registries)
        lines, tasks = registry
        parts, count = lookup_corpus.task_sequence(registry, rng, 6, 6, 0.3)
        text = "".join(piece for piece, _ in parts)
        shown = [line for line in text.splitlines() if line.startswith("- ")]
        descriptions = [line.split("): ", 1)[-1] for line in shown]
        assert len(shown) <= 6 and len(set(descriptions)) == len(descriptions)
        original = {description: name for name, _, description in lines}  # the tool each shown line describes
        written = {original[line.split("): ", 1)[-1]]: line[2:].split("(", 1)[0] for line in shown}
        asked = [line.removeprefix("Task: ") for line in text.splitlines() if line.startswith("Task: ")]
        answers = [piece for piece, is_answer in parts if is_answer]
        assert len(asked) == len(answers) == count
        wanted = dict(tasks)
        for task, answer in zip(asked, answers, strict=True):
            assert task in wanted
            if wanted[task] in written:
                named += 1
                assert answer == f'"{written[wanted[task]]}"}}'
            else:
                nulls += 1
                assert answer == "null}"
    assert named > nulls > 0


def test_a_corpus_without_task_sequences_is_the_one_drawn_before_them(generated_data, tmp_path):
    """task_share 0 draws nothing more from the seed: the sequences measured before the option existed; above 0, that
    share of sequences asks real tasks (``Task: `` lines of train rows)."""
    from forethought.bundle.models import load_tokenizer
    from forethought.data_gen.row import read_rows
    from forethought.training import lookup_corpus
    from forethought.training.tiny import build_tiny_base

    cfg = _cfg(generated_data, tmp_path, LOOKUP)
    tokenizer = load_tokenizer(build_tiny_base(generated_data, cfg.model.tiny, 0, tmp_path / "init"))
    pool = lookup_corpus.pool_of(cfg, 6)
    registries = lookup_corpus.train_registries(cfg)
    plain = lookup_corpus.corpus(tokenizer, pool, 12, 6, 6, 0)
    assert plain == lookup_corpus.corpus(tokenizer, pool, 12, 6, 6, 0, 0.0, registries, 0.0)
    mixed = lookup_corpus.corpus(tokenizer, pool, 40, 6, 6, 0, 0.0, registries, 0.5)
    real = {row.input_value["task"]["text"] for row in read_rows(generated_data, "match_func", "train")}
    with_real = sum(
        any(line.removeprefix("Task: ") in real for line in tokenizer.decode(row["input_ids"]).splitlines())
        for row in mixed
    )
    assert 8 <= with_real <= 32


def test_the_corpus_is_drawn_from_the_seed_and_labels_only_the_names(generated_data, tmp_path):
    from forethought.bundle.models import load_tokenizer
    from forethought.training import lookup_corpus
    from forethought.training.tiny import build_tiny_base

    cfg = _cfg(generated_data, tmp_path, LOOKUP)
    tokenizer = load_tokenizer(build_tiny_base(generated_data, cfg.model.tiny, 0, tmp_path / "init"))
    pool = lookup_corpus.pool_of(cfg, 6)
    first, again = (lookup_corpus.corpus(tokenizer, pool, 8, 6, 6, 0) for _ in range(2))
    assert first == again and first != lookup_corpus.corpus(tokenizer, pool, 8, 6, 6, 1)
    for row in first:
        assert row["input_ids"][0] == tokenizer.bos_token_id and len(row["input_ids"]) == len(row["labels"])
        kept = [tid for tid, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
        text = tokenizer.decode(row["input_ids"])
        names = [line.split('"tool_name": "', 1)[1] for line in text.splitlines() if '"tool_name": "' in line]
        assert tokenizer.decode(kept).replace(" ", "") == "".join(names).replace(" ", "")


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


class _StopAtFirstStep:
    """Kills the primitive's own training at its first step: after the lookups ended, before any checkpoint of it."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def on_step_begin(self, *args, **kwargs):
        raise KeyboardInterrupt("killed")


def test_lookups_train_every_weight_before_the_rows_and_a_kill_after_them_resumes_to_the_same_model(
    generated_data, tmp_path, one_torch_thread
):
    """Three steps of lookups through the real trl trainer, then match_func's rows: every weight differs from the
    model trained on the rows alone, the metrics record the phase, its checkpoints go. Killed after the lookups and
    before the rows' first checkpoint, the resume takes the lookups' last weights (no step of them again) and ends
    on the same model, bit for bit."""
    import torch

    from forethought.training.train import run

    plain = run(_cfg(generated_data, tmp_path / "plain"))["match_func"]
    looked = run(_cfg(generated_data, tmp_path / "lookup", LOOKUP))["match_func"]
    assert plain.metrics["lookup"] is None
    record = looked.metrics["lookup"]
    assert record["global_step"] == 3 and record["sequences"] == 6 and record["train_loss_history"]
    assert json.loads((looked.run_dir / "lookup.json").read_text()) == record
    assert not (looked.run_dir / "lookup_checkpoints").exists()
    before, after = _weights(plain.run_dir / "adapter"), _weights(looked.run_dir / "adapter")
    assert before.keys() == after.keys()
    assert all(not torch.equal(before[name], after[name]) for name in before)

    killed = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        run(_cfg(generated_data, killed, LOOKUP), callbacks=[_StopAtFirstStep()])
    assert (killed / "match_func" / "lookup.json").is_file() and not (killed / "match_func" / "adapter").exists()
    resumed = run(_cfg(generated_data, killed, LOOKUP, "train.resume=true"))["match_func"]
    timing = {"wall_time_s", "train_seconds_this_session", "tokens_per_second"}
    same = [key for key in record if key not in timing]
    assert {key: resumed.metrics["lookup"][key] for key in same} == {key: record[key] for key in same}
    again = _weights(killed / "match_func" / "adapter")
    assert all(torch.equal(after[name], again[name]) for name in after)


def test_a_lookup_phase_is_refused_before_anything_is_written(generated_data, tmp_path):
    """Too few tools to draw from: a located refusal, nothing on disk. LoRA: the phase trains full weights."""
    from forethought.config import ConfigError
    from forethought.errors import UserError
    from forethought.training.train import run

    cfg = _cfg(generated_data, tmp_path / "out", "train.per_primitive.match_func.lookup={tools:100000}")
    with pytest.raises(UserError) as refused:
        run(cfg)
    assert "lookup.tools=100000" in str(refused.value) and "match_func" in str(refused.value)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="needs train.finetuning=full"):
        _cfg(generated_data, tmp_path / "out", "train.finetuning=lora", LOOKUP)
