"""forethought pipeline: every stage runs, report.md is written, and unchanged stages are skipped."""

from __future__ import annotations

import json

from forethought.cli import main
from tests.conftest import tiny_pipeline_args


def test_report_has_every_section(tiny_pipeline):
    report = (tiny_pipeline / "report.md").read_text()
    for section in ("## Stages", "## Worked solutions", "## Datasets", "## Training", "## Validation gates",
                    "## Bundle", "## End-to-end evaluation", "Smoke scale", "SIMULATION"):
        assert section in report, section
    for png in ("datasets.png", "loss_curves.png", "gates.png", "evaluation.png"):
        assert (tiny_pipeline / png).stat().st_size > 1000
    res = json.loads((tiny_pipeline / "evaluate" / "results.json").read_text())
    assert set(res["settings"]) == {"oracle", "bundle_cvc", "bundle_no_cvc", "noise_cvc", "noise_no_cvc"}
    assert len({r["turns"] for r in res["settings"].values()}) == 1  # all settings on the same held-out turns
    assert res["settings"]["oracle"]["turn_call_match"] == 1.0


def test_rerun_skips_unchanged_stages(tiny_pipeline, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in (tiny_pipeline / ".stages").iterdir()}
    assert main(tiny_pipeline_args(tiny_pipeline)) == 0
    err = capsys.readouterr().err
    for stage in ("verify", "generate", "train", "validate", "package", "evaluate"):
        assert f"{stage:<9} skipped: inputs unchanged" in err
    after = {p.name: p.stat().st_mtime_ns for p in (tiny_pipeline / ".stages").iterdir()}
    assert before == after
    assert "| train | skipped (inputs unchanged) |" in (tiny_pipeline / "report.md").read_text()


def test_all_stage_configs_are_validated_up_front(tmp_path, capsys):
    rc = main(["pipeline", f"run_dir={tmp_path}", 'overrides.train=["model=tiny","train.lrr=1"]', 'overrides.validate=["max_examples=zero"]'])
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
