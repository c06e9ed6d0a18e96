"""The ``tiny`` profile: an offline tokenizer and a small random Gemma 3 text model.

Nothing is downloaded. The tokenizer is a byte-level BPE trained in-process on
the dataset corpus (the train splits of all five primitives, so every primitive
trained into the same output folder shares one base), wrapped as a
``PreTrainedTokenizerFast`` with Gemma's special tokens and trl's shipped Gemma 3
chat template. The model is ``Gemma3ForCausalLM`` built from a small
``Gemma3TextConfig``, initialised deterministically from the seed.

Both are saved together (``save_pretrained``) so ``AutoTokenizer`` and
``AutoModelForCausalLM`` reload them; a ``forethought_base.json`` beside them
records the fingerprint of what they were built from, so a stale base is never
silently reused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forethought.bounded import read_json_object
from forethought.bundle.models import gemma3_chat_template
from forethought.errors import UserError
from forethought.primitives.io import atomic_write_json

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

    from forethought.training.config import TinyShape

# Gemma's special tokens, in Gemma's order for the first four ids (pad 0, eos 1, bos 2, unk 3).
SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
BASE_MANIFEST = "forethought_base.json"
TINY_BUILD_VERSION = 1  # bump when the construction below changes


def _message_text(messages: Any) -> Iterator[str]:
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                yield message["content"]


def corpus_files(dataset_dir: str | Path) -> list[Path]:
    """The train splits the tokenizer is built from: every ``<dataset_dir>/*/train.jsonl``, sorted."""
    from forethought.training.config import PRIMITIVE_NAMES

    root = Path(dataset_dir)
    return [root / p / "train.jsonl" for p in PRIMITIVE_NAMES if (root / p / "train.jsonl").is_file()]


def corpus_texts(files: Iterable[Path]) -> Iterator[str]:
    from forethought.errors import UserError
    from forethought.primitives.io import read_jsonl

    for path in files:
        try:
            rows = read_jsonl(path)  # strict, each problem located by file and line
        except ValueError as exc:
            where, _, detail = str(exc).partition(": ")
            raise UserError(detail, where) from None
        for row in rows:
            if isinstance(row, dict):
                yield from _message_text(row.get("prompt"))
                yield from _message_text(row.get("completion"))


# ``structure`` pre-tokenization: split only at line starts, quotes, JSON/call punctuation and
# ", " / ": ", so merges may cross the spaces *inside* a description or a value. The prompts are
# mostly tool lists whose descriptions repeat across thousands of rows; letting BPE merge across
# words halves the prompt length (measured on the generated data: decompose median 694 -> 354
# tokens at 8k vocabulary), and prompt tokens are ~90 % of the training compute. A name or value
# is still delimited the same way in the prompt and in the JSON answer, so copying it stays a
# token-for-token copy. ``words`` is the usual GPT-2 byte-level split (no cross-word merges).
STRUCTURE_SPLIT = r'\n- |\n|, |: |["(),:{}\[\]]'

# ``pieces`` pre-tokenization: every space, underscore and punctuation mark is its own token, and a word is split at
# its case changes (``displayCarStatus`` -> display Car Status) and digit runs, so a word is *the same token* wherever
# it stands: in a request ("Check the tire pressure"), in a tool name (``check_tire_pressure``) and in a JSON value.
# The structure split makes each of those a different, opaque token (a whole phrase, a whole name), which a model
# trained from scratch can only memorise: it matches a tool name it has seen with a phrase it has seen, and a new
# wording of a task is a new token (docs/training.md, "The tokenizer"). Prompts are ~2-3x longer than with structure.
PIECES_SPLIT = r"\s|_|[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+|[^\sA-Za-z0-9_]"


def build_tokenizer(texts: Iterable[str], vocab_size: int, split: str = "words") -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it as a Gemma-like fast tokenizer.

    Like Gemma's tokenizer, encoding plain text adds ``<bos>``; ``apply_chat_template``
    tokenizes without special tokens, so the template's own ``<bos>`` is the only one.
    ``split`` is the pre-tokenization: ``words`` (GPT-2 style), ``structure`` (see STRUCTURE_SPLIT) or ``pieces``
    (see PIECES_SPLIT).
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    if split == "structure":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(STRUCTURE_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    elif split == "words":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    elif split == "pieces":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PIECES_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    else:
        raise ValueError(f"unknown pre-tokenization {split!r}")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    bos_id = tok.token_to_id("<bos>")
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        extra_special_tokens=["<start_of_turn>", "<end_of_turn>"],
        padding_side="right",
        model_max_length=1_000_000,
    )
    fast.chat_template = gemma3_chat_template()
    return fast


def tiny_text_config(shape: TinyShape, tokenizer: PreTrainedTokenizerFast):
    from transformers import Gemma3TextConfig

    n = shape.num_layers
    # Gemma 3 interleaves local (sliding-window) and global layers, five to one; keep at least one of each.
    layer_types = ["full_attention" if (i + 1) % 6 == 0 or i == n - 1 else "sliding_attention" for i in range(n)]
    return Gemma3TextConfig(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=n,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        query_pre_attn_scalar=shape.head_dim,
        max_position_embeddings=shape.max_position_embeddings,
        sliding_window=shape.sliding_window,
        layer_types=layer_types,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=True,
    )


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def base_fingerprint(dataset_dir: str | Path, shape: TinyShape, seed: int) -> dict[str, Any]:
    """What the tiny base depends on: corpus files (by content), shape, seed, library versions, build version."""
    import tokenizers
    import torch
    import transformers
    import trl

    files = corpus_files(dataset_dir)
    vectors = {}
    if shape.word_vectors:
        try:
            vectors = {"word_vectors_sha256": _file_digest(Path(shape.word_vectors))}
        except OSError as error:
            raise UserError(f"model.tiny.word_vectors: cannot read it ({error.strerror})", shape.word_vectors) from None
    return {
        **vectors,
        "build_version": TINY_BUILD_VERSION,
        "seed": seed,
        # The vectors count by content (above), not by where the file lies; a shape without them fingerprints as
        # before the option existed, so earlier bases stay reusable.
        "shape": shape.model_dump(exclude={"word_vectors"}),
        "corpus": {f.parent.name: _file_digest(f) for f in files},
        "chat_template_sha256": hashlib.sha256(gemma3_chat_template().encode()).hexdigest(),
        "versions": {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "torch": torch.__version__,
            "trl": trl.__version__,
        },
    }


def build_tiny_base(dataset_dir: str | Path, shape: TinyShape, seed: int, out_dir: str | Path) -> Path:
    """Build (or reuse) the tiny base model + tokenizer in ``out_dir``.

    An existing base with the same fingerprint is reused; one built from other data
    or settings is an error (never silently reused, never silently overwritten).
    The build goes to a temporary folder renamed into place, so parallel jobs that
    race to build the same base all end with one complete copy.
    """
    from transformers import Gemma3ForCausalLM

    out = Path(out_dir)
    files = corpus_files(dataset_dir)
    if not files:
        raise UserError(
            "no <primitive>/train.jsonl found: the tiny profile trains its tokenizer on the train splits",
            str(dataset_dir),
        )
    fp = base_fingerprint(dataset_dir, shape, seed)
    manifest = out / BASE_MANIFEST
    # The folder only ever appears complete (atomic rename), so an existing folder without
    # a manifest was made by something else.
    if out.exists():
        if manifest.is_file():
            old = read_json_object(manifest)
            if old.get("fingerprint") == fp:
                return out
            diff = sorted(k for k in fp if old.get("fingerprint", {}).get(k) != fp[k])
            raise UserError(
                f"an existing tiny base was built from different inputs (differs in: {', '.join(diff)}); "
                "use another output_dir or delete this base folder",
                str(out),
            )
        if any(out.iterdir()):
            raise UserError(
                "folder exists but holds no complete tiny base (no forethought_base.json); delete it or use another output_dir",
                str(out),
            )

    word_vectors = None
    if shape.word_vectors:
        from forethought.training.word_vectors import initialise_embeddings, load_word_vectors

        word_vectors = load_word_vectors(shape.word_vectors)  # checked before the tokenizer's minutes
    tokenizer = build_tokenizer(corpus_texts(files), shape.vocab_size, shape.pre_tokenizer)
    config = tiny_text_config(shape, tokenizer)
    # Deterministic initialisation: the model's weights depend only on the seed, the config and the vectors.
    vectors_manifest = {}
    with _fork_rng(seed):
        model = Gemma3ForCausalLM(config)
        if word_vectors is not None:
            vectors_manifest = {"word_vectors": initialise_embeddings(model, tokenizer, *word_vectors, seed=seed)}
    # Like Gemma 3's generation config: stop on <eos> and on <end_of_turn>.
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        n_params = sum(p.numel() for p in model.parameters())
        atomic_write_json(
            tmp / BASE_MANIFEST, {"profile": "tiny", "parameters": n_params, "fingerprint": fp, **vectors_manifest}
        )
        try:
            if out.exists():
                out.rmdir()  # empty folder left by someone else: replace it
            os.replace(tmp, out)
        except OSError:
            # Another process finished first; its base has the same fingerprint (checked by the caller on reuse).
            shutil.rmtree(tmp, ignore_errors=True)
            return build_tiny_base(dataset_dir, shape, seed, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


class _fork_rng:
    """Seed torch's CPU generator inside a block and restore the outer state after it."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self):
        import torch

        self._state = torch.random.get_rng_state()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc):
        import torch

        torch.random.set_rng_state(self._state)
        return False
