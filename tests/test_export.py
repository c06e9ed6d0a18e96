"""``forethought export``: the bundle's adapters in a hub-layout folder with model cards, and ``--merge`` models that
give the logits of base + adapter (issue 28 item 6). Local folders only: nothing touches the network."""

from __future__ import annotations

import json

import pytest

from forethought.cli import main

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _probe(tok):
    return tok.apply_chat_template(
        [{"role": "user", "content": "list the files"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )


@pytest.fixture(scope="module")
def served(tiny_pipeline):
    from forethought.bundle.manifest import bundle_tool_rendering, load_bundle
    from forethought.kernel.specs import set_tool_rendering, spec_hashes

    set_tool_rendering(bundle_tool_rendering(tiny_pipeline / "bundle"))
    return load_bundle(tiny_pipeline / "bundle", spec_hashes(), allow_smoke=True).load_model()


def test_export_writes_a_hub_layout_folder_with_cards(tiny_pipeline, served, tmp_path, capsys):
    from peft import PeftModel

    from forethought.bundle.models import load_model, load_tokenizer

    out = tmp_path / "hub"
    args = ["export", f"bundle={tiny_pipeline / 'bundle'}", f"output_dir={out}", "allow_smoke=true", "repo_id=me/prims"]
    assert main(args) == 0
    assert "hf upload" in capsys.readouterr().out
    top = (out / "README.md").read_text()
    assert top.startswith("---\nbase_model:") and "SMOKE EXPORT" in top and "[`match_func`](match_func/)" in top
    model, tok = served
    for name in model.peft_config:
        folder = out / name
        assert {"adapter_config.json", "adapter_model.safetensors", "README.md", "tokenizer.json"} <= {
            f.name for f in folder.iterdir()
        }
        card = (folder / "README.md").read_text()
        assert "library_name: peft" in card and f'subfolder="{name}"' in card and "me/prims" in card
    # one primitive, loaded the way a hub user would (base + subfolder), answers as the bundle does
    base_dir = json.loads((tiny_pipeline / "bundle" / "manifest.json").read_text())["base"]["path"]
    base = load_model(tiny_pipeline / "bundle" / base_dir, dtype=torch.float32, attn_implementation="sdpa")
    user = PeftModel.from_pretrained(base, str(out / "match_func")).eval()
    inputs = _probe(load_tokenizer(out / "match_func"))
    model.set_adapter("match_func")
    with torch.no_grad():
        assert torch.allclose(user(**inputs).logits, model(**inputs).logits)
    # an export is replaced by the next one; a folder of yours is not
    assert main(args) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    assert main([*args[:2], f"output_dir={mine}", "allow_smoke=true"]) == 2
    assert "not an earlier export" in capsys.readouterr().err and (mine / "notes.txt").exists()


def test_export_merge_gives_the_logits_of_base_plus_adapter(tiny_pipeline, served, tmp_path):
    from forethought.bundle.models import load_model, load_tokenizer

    out = tmp_path / "merged"
    assert (
        main(["export", "--merge", f"bundle={tiny_pipeline / 'bundle'}", f"output_dir={out}", "allow_smoke=true"]) == 0
    )
    model, _ = served
    for name in ("match_func", "get_order"):
        folder = out / name
        assert (folder / "model.safetensors").is_file() and not (folder / "adapter_config.json").exists()
        assert "base_model_relation: merge" in (folder / "README.md").read_text()
        merged = load_model(folder, dtype=torch.float32, attn_implementation="sdpa").eval()  # no LoRA key left over
        assert not any("lora_" in n for n, _ in merged.named_parameters())
        inputs = _probe(load_tokenizer(folder))
        model.set_adapter(name)
        with torch.no_grad():
            want = model(**inputs).logits
            with model.disable_adapter():
                base = model(**inputs).logits
            got = merged(**inputs).logits
        assert torch.allclose(got, want, atol=1e-5) and not torch.allclose(base, want, atol=1e-5)


def test_export_refuses_a_smoke_bundle_unless_asked(tiny_pipeline, tmp_path, capsys):
    rc = main(["export", f"bundle={tiny_pipeline / 'bundle'}", f"output_dir={tmp_path / 'o'}"])
    err = capsys.readouterr().err
    assert rc == 2 and "smoke" in err and "Traceback" not in err and not (tmp_path / "o").exists()
