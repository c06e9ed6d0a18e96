"""A base model outside the bundle is loaded from wherever it lies: it is held to the bundle's rule, no pickle
(issue 25: a bundle whose external base held pickle weights ended in torch's UnpicklingError traceback)."""

from __future__ import annotations

import datetime
import json
import pickle
import shutil

import pytest

from forethought.bundle.manifest import sha256_file
from forethought.cli import main

FIG1 = "tests/fixtures/solutions/paper_figure1.json"


@pytest.fixture
def external_base(tiny_pipeline, tmp_path):
    """A train folder whose base.json names a copy of the tiny base outside it."""
    base = tmp_path / "ext_base"
    shutil.copytree(tiny_pipeline / "train" / "base", base)
    train = tmp_path / "train"
    shutil.copytree(tiny_pipeline / "train", train)
    ref = json.loads((train / "base.json").read_text())
    (train / "base.json").write_text(json.dumps({**ref, "path": str(base)}))
    return base, train


def _package(tiny_pipeline, train, out) -> list[str]:
    return [
        "package",
        f"train_dir={train}",
        f"validate_dir={tiny_pipeline / 'validate'}",
        f"dataset_dir={tiny_pipeline / 'data'}",
        f"output_dir={out}",
        "allow_failed_gates=true",
        "copy_base=never",
    ]


def _as_pickle(base) -> None:
    """The weights replaced by a pickle (one torch's weights-only loader refuses, as it would a hostile one)."""
    (base / "model.safetensors").unlink()
    (base / "pytorch_model.bin").write_bytes(pickle.dumps({"w": datetime.datetime(2020, 1, 1)}))


def test_a_bundle_whose_external_base_holds_a_pickle_is_refused_before_loading(
    tiny_pipeline, external_base, tmp_path, capsys
):
    base, train = external_base
    bundle = tmp_path / "bundle"
    assert main(_package(tiny_pipeline, train, bundle)) == 0
    _as_pickle(base)
    manifest = json.loads((bundle / "manifest.json").read_text())  # the manifest pins the pickle: its digests all match
    files = {k: v for k, v in manifest["base"]["files"].items() if k != "model.safetensors"}
    manifest["base"]["files"] = {**files, "pytorch_model.bin": sha256_file(base / "pytorch_model.bin")}
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    rc = main(
        [
            "run",
            FIG1,
            "backend=hf",
            f"backend.bundle={bundle}",
            "backend.allow_smoke=true",
            f"output_dir={tmp_path / 'r'}",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert f"error: {base / 'pytorch_model.bin'}: a pickle among the model's files (loading one runs code)" in err


def test_package_refuses_an_external_base_that_holds_a_pickle(tiny_pipeline, external_base, tmp_path, capsys):
    base, train = external_base
    _as_pickle(base)
    assert main(_package(tiny_pipeline, train, tmp_path / "bundle")) == 2
    assert f"error: {base / 'pytorch_model.bin'}: a pickle among the model's files" in capsys.readouterr().err
    assert not (tmp_path / "bundle").exists()


def test_a_pickle_renamed_safetensors_in_an_external_base_is_refused_too(
    tiny_pipeline, external_base, tmp_path, capsys
):
    base, train = external_base
    (base / "model.safetensors").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    assert main(_package(tiny_pipeline, train, tmp_path / "bundle")) == 2
    assert (
        f"error: {base / 'model.safetensors'}: not a safetensors file (no valid header; a pickle renamed?)"
        in capsys.readouterr().err
    )
