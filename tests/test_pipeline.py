"""forethought pipeline: every stage runs, report.md is written, and unchanged stages are skipped."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from forethought.cli import main
from forethought.config import ConfigError, compose_and_validate
from forethought.pipeline import PipelineConfig, build, execute, write_report
from tests.conftest import tiny_pipeline_args


def test_report_has_every_section(tiny_pipeline):
    report = (tiny_pipeline / "report.md").read_text()
    for section in (
        "## Stages",
        "## Worked solutions",
        "## Datasets",
        "## Base stage",
        "## Training",
        "## Validation gates",
        "## Bundle",
        "## End-to-end evaluation",
        "Small-model results",
        "SIMULATION",
    ):
        assert section in report, section
    # the versions it was trained and decoded with: another install trains the same data to other figures
    from importlib.metadata import version

    assert f"transformers {version('transformers')}, trl {version('trl')}, peft {version('peft')}" in report
    for png in ("datasets.png", "base_loss.png", "loss_curves.png", "gates.png", "evaluation.png"):
        assert (tiny_pipeline / png).stat().st_size > 1000
    res = json.loads((tiny_pipeline / "evaluate" / "results.json").read_text())
    assert set(res["settings"]) == {"oracle", "bundle_cvc", "bundle_no_cvc", "noise_cvc", "noise_no_cvc"}
    assert len({r["turns"] for r in res["settings"].values()}) == 1  # all settings on the same held-out turns
    assert res["settings"]["oracle"]["turn_call_match"] == 1.0


def test_rerun_skips_unchanged_stages(tiny_pipeline, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in (tiny_pipeline / ".stages").iterdir()}
    assert main(tiny_pipeline_args(tiny_pipeline)) == 0
    err = capsys.readouterr().err
    for stage in ("verify", "generate", "base", "train", "validate", "package", "evaluate"):
        assert f"{stage:<9} skipped: inputs unchanged" in err
    after = {p.name: p.stat().st_mtime_ns for p in (tiny_pipeline / ".stages").iterdir()}
    assert before == after
    report = (tiny_pipeline / "report.md").read_text()
    for stage in ("verify", "generate", "train", "validate", "package", "evaluate"):  # the stored record, not 0.0 s
        rec = json.loads((tiny_pipeline / ".stages" / f"{stage}.json").read_text())
        assert f"| {stage} | skipped — unchanged since {rec['finished']}; ran in {rec['seconds']} s | — |" in report


def test_all_stage_configs_are_validated_up_front(tmp_path, capsys):
    rc = main(
        [
            "pipeline",
            f"run_dir={tmp_path}",
            'overrides.train=["model=tiny","train.lrr=1"]',
            'overrides.validate=["max_examples=zero"]',
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "train: train.lrr: unknown key" in err and "validate: max_examples" in err
    assert not (tmp_path / ".stages").exists()  # nothing ran


def test_paper_profile_without_a_local_model_fails_before_any_stage(tmp_path, capsys):
    rc = main(["pipeline", "profile=paper", f"run_dir={tmp_path / 'run'}"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "needs a local checkpoint folder" in err and "give it as model_path=" in err
    assert not (tmp_path / "run").exists()


def _stub_pipeline(run_dir: Path, stages: list[str]):
    cfg = compose_and_validate("pipeline", [f"run_dir={run_dir}", f"stages=[{','.join(stages)}]"], PipelineConfig)[1]
    return build(cfg)


def _fake_train(train: Path, runs: list[int]):
    def run():
        runs.append(1)
        train.mkdir(parents=True, exist_ok=True)
        (train / "base.json").write_text("{}")
        for primitive in ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill"):
            (train / primitive / "adapter").mkdir(parents=True, exist_ok=True)
            (train / primitive / "adapter" / "adapter_model.safetensors").write_bytes(
                b"weights of " + primitive.encode()
            )
            (train / primitive / "metrics.json").write_text(json.dumps({"completed": True}))
            (train / primitive / "run_state.json").write_text("{}")
        return {}

    return run


def test_train_stage_reruns_when_any_adapter_is_deleted_or_changed(tmp_path):
    """Stages run as stubs: only the pipeline's skip logic is under test here."""
    run_dir, runs = tmp_path / "run", []
    out = io.StringIO()
    console = Console(file=out, width=200)

    pr = _stub_pipeline(run_dir, ["train"])
    pr.stages["train"].run = _fake_train(run_dir / "train", runs)

    def once():
        execute(pr, console)
        return pr

    once()
    pr = once()
    assert len(runs) == 1 and pr.stages["train"].status == "skipped"
    rec = json.loads((run_dir / ".stages" / "train.json").read_text())
    report = write_report(pr, []).read_text()
    assert f"| train | skipped — unchanged since {rec['finished']}; ran in {rec['seconds']} s | — |" in report
    assert "| verify | not selected | 0.0 |" in report
    adapter = run_dir / "train" / "get_order" / "adapter" / "adapter_model.safetensors"
    adapter.unlink()
    assert once().stages["train"].status == "ran" and len(runs) == 2
    assert f"an output is missing: {adapter}" in out.getvalue()
    adapter.write_bytes(b"something else")
    assert once().stages["train"].status == "ran" and len(runs) == 3
    assert f"an output is changed: {adapter}" in out.getvalue()
    assert once().stages["train"].status == "skipped" and len(runs) == 3


def test_stage_fingerprints_cover_the_code_and_libraries_they_use(tmp_path):
    import peft
    import torch
    import transformers
    import trl

    from forethought.pipeline import input_manifest

    pr = _stub_pipeline(tmp_path, ["train"])
    ev = pr.stages["evaluate"]
    assert "forethought/bundle" in ev.code  # the hf backend loads the bundle, base and tokenizer through it
    versions = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "trl": trl.__version__,
    }
    train = input_manifest(pr.stages["train"].inputs, pr.stages["train"].code, pr.stages["train"].libs)
    assert {k: train[f"python-package:{k}"] for k in versions} == versions
    for name in ("validate", "package", "evaluate"):
        st = pr.stages[name]
        assert {"torch", "transformers", "peft"} <= set(st.libs), name
    assert {"forethought/bundle/manifest.py", "forethought/bundle/models.py"} <= set(input_manifest([], ev.code))
    for name in ("base", "train", "validate", "package"):  # training loads its base and adapters through it too
        assert "forethought/bundle/models.py" in input_manifest([], pr.stages[name].code), name
    outs = {str(o.relative_to(tmp_path)) for o in pr.stages["train"].outputs}
    assert {"train/base.json", "train/match_fill/adapter", "train/decompose/metrics.json"} <= outs


def test_pipeline_evaluate_and_backend_configs_are_typed():
    from pydantic import TypeAdapter

    from forethought.evaluation import SETTINGS, EvaluateConfig, SettingName
    from forethought.kernel.backends.factory import PrimitiveName
    from forethought.kernel.specs import PRIMITIVE_NAMES

    # Primitive names are checked against the registry (kernel/specs/), not a hand-written Literal.
    assert TypeAdapter(list[PrimitiveName]).validate_python(list(PRIMITIVE_NAMES)) == list(PRIMITIVE_NAMES)
    assert SettingName.__args__ == SETTINGS

    def errors(command, schema, *ov):
        with pytest.raises(ConfigError) as ei:
            compose_and_validate(command, list(ov), schema)
        return ei.value.errors

    def by_key(errs):
        return {e.split(": ", 1)[0]: e.split(": ", 1)[1] for e in errs}

    messages = by_key(errors("pipeline", PipelineConfig, "stages=[train,tran]", "+overrides.tarin=[]"))
    assert messages["stages.1"].startswith("Input should be 'verify'") and "(got 'tran')" in messages["stages.1"]
    assert messages["overrides.tarin.[key]"].startswith("Input should be 'verify'") and len(messages) == 2
    # +noise.rates.decompos=0.5 used to be accepted and meant 0 % for decompose
    messages = by_key(
        errors(
            "evaluate",
            EvaluateConfig,
            "+noise.rates.decompos=0.5",
            "noise.rates.match_fill=1.5",
            "noise.sweep=[0.1,-0.1]",
            "settings=[oracle,bundle]",
            "backend.device=gpu",
        )
    )
    assert messages["noise.rates.decompos.[key]"].startswith("Input should be 'decompose'")
    assert messages["noise.rates.match_fill"].startswith("Input should be less than or equal to 1")
    assert messages["noise.sweep.1"].startswith("Input should be greater than or equal to 0")
    assert messages["settings.1"].startswith("Input should be 'oracle'") and "(got 'bundle')" in messages["settings.1"]
    assert "cuda:N" in messages["backend.device"] and len(messages) == 5
    assert "listed more than once" in errors("evaluate", EvaluateConfig, "settings=[oracle,oracle]")[0]
    messages = by_key(
        errors(
            "evaluate",
            EvaluateConfig,
            "backend=openai",
            "+backend.models.matchfunc=lora1",
            "backend.base_url=localhost:8000",
        )
    )
    assert set(messages) == {"backend.base_url", "backend.models.matchfunc.[key]"}  # as written, no union tag
    ok = compose_and_validate("evaluate", ["backend.device=cuda:0", "noise.rates.decompose=0.5"], EvaluateConfig)[1]
    assert ok.backend.device == "cuda:0" and ok.noise.rates["decompose"] == 0.5
    assert re.fullmatch(r"cuda:\d", ok.backend.device)


@pytest.mark.parametrize("profile", ["tiny", "small", "converge"])
def test_every_cpu_profile_composes_and_validates(profile, tmp_path):
    """Each profile's seven stage configs validate (litgpt-style: the registry of configs, one test over all)."""
    cfg = compose_and_validate("pipeline", [f"profile={profile}", f"run_dir={tmp_path}"], PipelineConfig)[1]
    pr = build(cfg)
    assert list(pr.stages) == ["verify", "generate", "base", "train", "validate", "package", "evaluate"]
    assert not (tmp_path / ".stages").exists()  # building validates; nothing runs
    if profile == "converge":
        train = pr.stages["train"].config.train
        # budgets in epochs per primitive, selection on a dev split carved from train solutions, each gate's decoding
        assert train.selection == "dev_exact_match" and 0 < train.dev_fraction < 1 and train.max_steps == -1
        assert pr.stages["generate"].config.data.tool_rendering == "valued"
        # the words tokenizer: every probe on run #7's dev rows rose with it (docs/training.md, "Probes after run #7")
        assert pr.stages["base"].config.model.tiny.pre_tokenizer == "words"
        assert pr.stages["train"].config.model.tiny.pre_tokenizer == "words"
        # match_func's lookups first: 85.0 and 80.0 % on validation against 69.4 and 66.9 on two bases; match_fill's
        # dev fell with them, so no other primitive has them (docs/training.md, "Probe of 2026-12-06: a made-up
        # lookup corpus")
        lookups = {
            name: train.for_primitive(name).lookup
            for name in ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill")
        }
        assert lookups.pop("match_func").steps == 2000 and set(lookups.values()) == {None}
        # no refit on the dev solutions: +5.0, +1.9 and -1.9 points on match_func, inside the adapter-seed spread
        # (docs/training.md, "Recorded run #11")
        assert not any(train.for_primitive(name).refit for name in [*lookups, "match_func"])
        assert train.finetuning == "full"
        # no retrieved demonstrations: trained with them, match_func falls from 73.8 to 41.2 % on prompts that show
        # none, as every prompt over a user's own tools does (docs/training.md, "Recorded run #9")
        assert pr.stages["generate"].config.data.demonstrations is None
        # the held-out solutions of every recorded run, a shipped file the generate stage's fingerprint covers
        held_out = Path(pr.stages["generate"].config.data.held_out)
        assert held_out.name == "held_out.json" and held_out.is_file() and held_out in pr.stages["generate"].inputs
        assert set(pr.stages["validate"].config.decoding.values()) <= {"constrained", "free"}
    if profile == "small":
        # the converge recipe cut to an hour: the same data, shape, tokenizer, weights, selection and decoding, each
        # budget at most converge's (conf/profile/small.yaml; README, "The small CPU profile")
        converge = build(
            compose_and_validate("pipeline", ["profile=converge", f"run_dir={tmp_path}"], PipelineConfig)[1]
        )
        assert pr.stages["generate"].config == converge.stages["generate"].config
        small_train, full_train = pr.stages["train"].config, converge.stages["train"].config
        assert small_train.model.tiny == full_train.model.tiny and small_train.model.tiny.pre_tokenizer == "words"
        assert small_train.train.finetuning == "full" and small_train.train.selection == "dev_exact_match"
        assert small_train.train.dev_fraction == full_train.train.dev_fraction
        assert 0 < small_train.model.pretrain.max_steps < full_train.model.pretrain.max_steps
        for name in ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill"):
            small_budget, full_budget = small_train.train.for_primitive(name), full_train.train.for_primitive(name)
            assert small_budget.epochs <= full_budget.epochs
            assert small_budget.learning_rate == full_budget.learning_rate
        assert 0 < small_train.train.for_primitive("match_func").lookup.steps < 2000
        assert pr.stages["validate"].config.decoding == converge.stages["validate"].config.decoding
        assert pr.stages["package"].config.allow_failed_gates  # a smoke bundle, as converge's, not an exit 2


def test_a_killed_train_stage_resumes_instead_of_starting_over(tmp_path):
    """The pipeline records a stage's start; a rerun with the same inputs continues it (train.resume) instead of
    replacing it, and a rerun after its inputs changed starts it over."""
    from forethought.pipeline import STAGES, Stage, _resuming

    cfg = compose_and_validate("pipeline", ["profile=converge", f"run_dir={tmp_path}"], PipelineConfig)[1]
    train = build(cfg).stages["train"].config
    assert train.train.overwrite and not train.train.resume
    resumed = _resuming(train)
    assert resumed.train.resume and not resumed.train.overwrite and resumed.train.epochs == train.train.epochs

    calls = []
    data = tmp_path / "input.txt"
    data.write_text("v1")

    def killed():
        calls.append("run")
        raise KeyboardInterrupt("killed")

    def stages(run):
        out = {s: Stage(s, PipelineConfig(), [], [], [], lambda: None) for s in STAGES}
        out["train"] = Stage("train", PipelineConfig(), [data], [], [], run, resume=lambda: calls.append("resume"))
        return out

    pr = build(cfg)
    pr.cfg = cfg.model_copy(update={"stages": ["train"]})
    pr.stages = stages(killed)
    console = Console(file=io.StringIO())
    with pytest.raises(KeyboardInterrupt):
        execute(pr, console)
    pr.stages = stages(lambda: calls.append("run"))
    execute(pr, console)
    assert calls == ["run", "resume"]  # the same inputs: continued
    data.write_text("v2")
    pr.stages = stages(killed)
    with pytest.raises(KeyboardInterrupt):
        execute(pr, console)
    data.write_text("v3")  # changed inputs after the kill: the interrupted run is not continued
    pr.stages = stages(lambda: calls.append("run"))
    execute(pr, console)
    assert calls == ["run", "resume", "run", "run"]


# ------------------------------------------------------------ report verdict and plots (issue 28 item 7)
def _pngs_of(report: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", report)


def test_report_leads_with_the_verdict(tiny_pipeline):
    report = (tiny_pipeline / "report.md").read_text()
    head = report[: report.index("## Stages")]
    assert (
        report.split("\n")[2] == "## Verdict"
    )  # right under the title, before the command, the machine and the stages
    gates = json.loads((tiny_pipeline / "validate" / "gates.json").read_text())["primitives"]
    passed = [p for p, r in gates.items() if r["passed"]]
    assert f"- **Gates**: {len(passed)} of {len(gates)} passed" in head
    for primitive, gate in gates.items():  # every primitive, with its own verdict and figures
        assert (
            f"{primitive} {'pass' if gate['passed'] else 'FAIL'} ({100 * gate['exact_match']:.1f} % vs {100 * gate['threshold']:.1f} %)"
            in head
        )
    smoke = json.loads((tiny_pipeline / "bundle" / "manifest.json").read_text())["smoke"]
    assert ("- **Bundle**: **SMOKE**" in head) == smoke and ("all gates passed" in head) == (not smoke)
    res = json.loads((tiny_pipeline / "evaluate" / "results.json").read_text())["settings"]
    on, off = res["bundle_cvc"], res["bundle_no_cvc"]
    # named as the evaluation's tables and plot name them
    assert (
        f"trained primitives, with CVC {100 * on['turn_call_match']:.1f} % / {100 * on['scenario_call_match']:.1f} %"
        in head
    )
    assert f"trained primitives, without CVC {100 * off['turn_call_match']:.1f} %" in head
    assert "bundle_cvc" not in head


def test_every_plot_in_the_report_has_data_in_every_panel_and_the_axes_it_claims(tiny_pipeline):
    """Each PNG carries what each of its panels holds (primitives/io.py figure_panels, a PNG text chunk): read back
    from the file, no panel is empty, every axis is named, and the names match the tables'."""
    from forethought.pipeline import LOSS_TOKENS
    from forethought.primitives.io import png_panels

    report = (tiny_pipeline / "report.md").read_text()
    pngs = _pngs_of(report)
    assert {"datasets.png", "base_loss.png", "loss_curves.png", "gates.png", "evaluation.png"} <= set(pngs)
    panels = {}
    for png in pngs:
        panels[png] = png_panels(tiny_pipeline / png)
        assert panels[png], f"{png}: no panel record"
        for ax in panels[png]:
            assert ax["points"] > 0 and ax["series"], f"{png}: empty panel {ax['title']!r}"
            assert ax["ylabel"] and (ax["xlabel"] or ax["xticklabels"]), f"{png}: unnamed axis in {ax['title']!r}"
    base = json.loads((tiny_pipeline / "train" / "base_run" / "metrics.json").read_text())
    assert panels["base_loss.png"][0]["ylabel"] == f"train loss ({LOSS_TOKENS[base['loss']]})"
    # the evaluation plot names its settings as the table does (a label wrapped over lines, never the setting's key)
    labels = [
        r["label"] for r in json.loads((tiny_pipeline / "evaluate" / "results.json").read_text())["settings"].values()
    ]
    assert [t.replace("\n", " ") for t in panels["evaluation.png"][0]["xticklabels"]] == labels
    for label in labels:
        assert f"| {label} |" in report
    gates = json.loads((tiny_pipeline / "validate" / "gates.json").read_text())["primitives"]
    assert panels["gates.png"][0]["xticklabels"] == list(gates)


def _metrics(folder: Path, **metrics) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(metrics))


@pytest.mark.parametrize("base_em", [False, True])
def test_exact_match_curves_draw_only_panels_that_have_a_curve(base_em, tmp_path):
    # The demo's base stage ran without em_eval_steps: its panel was drawn empty beside the adapters'.
    from forethought.pipeline import _learning_curve_png
    from forethought.primitives.io import png_panels

    hist = [{"step": 1, "em/decompose": 0.1}, {"step": 2, "em/decompose": 0.5}]
    _metrics(tmp_path / "base_run", exact_match_history=hist if base_em else [])
    _metrics(tmp_path / "decompose", exact_match_history=hist)
    assert _learning_curve_png(tmp_path, tmp_path / "em.png")
    panels = png_panels(tmp_path / "em.png")
    assert [p["title"] for p in panels] == (["base stage (no adapter)"] if base_em else []) + [
        "adapters (each on its own primitive)"
    ]
    assert all(p["points"] == 2 for p in panels)


@pytest.mark.parametrize("kind", ["prompt", "full", "completion"])
def test_the_base_loss_axis_names_the_tokens_the_loss_is_on(kind, tmp_path):
    # base_loss.png said "completion tokens" for the tiny profile's prompt loss.
    from forethought.pipeline import _base_loss_png
    from forethought.primitives.io import png_panels

    hist = [{"step": s, "loss": 5.0 / s} for s in (1, 2, 3)]
    assert _base_loss_png({"loss": kind, "train_loss_history": hist}, tmp_path / "b.png")
    (panel,) = png_panels(tmp_path / "b.png")
    want = {"prompt": "prompt tokens", "full": "all tokens", "completion": "completion tokens"}[kind]
    assert panel["ylabel"] == f"train loss ({want})" and panel["points"] == 3
