"""The package installs and runs as a wheel, outside the repository (issue 28, item 1).

The wheel is built from a copy of the sources (the checkout gets no build/ folder), installed with ``pip install
--no-deps --target`` (offline: the dependencies are this virtualenv's), and the commands run from an empty folder
with only that target on PYTHONPATH: the configs, the worked solutions and the slot values must come from the
installed package, and every path of the user's (data, runs) from the current directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    "setup.py",
    "pyproject.toml",
    "README.md",
    "forethought",
    "primitives",
    "kernel",
    "data_gen",
    "training",
    "conf",
)

# Run inside the installed package, from an empty folder: every module imported from the target, none from the
# repository; verify (the shipped corpus), generate (small), run of a scenario, --help of every command.
SCRIPT = r"""
import json, shutil, sys
from pathlib import Path

site = Path(sys.argv[1]).resolve()
import forethought
assert Path(forethought.__file__).resolve().is_relative_to(site), forethought.__file__
from forethought.cli import HELP_LINES, main
from forethought.config import CONF_DIR, shipped_path
assert CONF_DIR.is_relative_to(site) and shipped_path("data_gen/solutions").is_relative_to(site), CONF_DIR

results = {}
results["verify"] = main(["verify"])
sizes = "{decompose:8,get_order:8,check_prerequisites:8,match_func:8,match_fill:8}"
results["generate"] = main(["generate", "data.sizes=" + sizes, "data.workers=1"])
shutil.copy(shipped_path("data_gen/solutions/file_system/paper_figure1.json"), "scenario.json")
results["run"] = main(["run", "scenario.json"])
for line in HELP_LINES:
    results[" ".join(line) + " --help"] = main([*line, "--help"])
modules = {m.__name__: getattr(m, "__file__", None) for m in list(sys.modules.values())}
results["outside"] = sorted(
    n for n, f in modules.items() if n.startswith("forethought") and f and not Path(f).resolve().is_relative_to(site)
)
print("RESULTS " + json.dumps(results))
"""


@pytest.mark.slow
def test_the_wheel_installs_and_runs_outside_the_repository(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in SOURCES:
        path = ROOT / name
        (shutil.copytree(path, src / name, ignore=ignore) if path.is_dir() else shutil.copy(path, src / name))
    py = sys.executable
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [py, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), "."],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("forethought-*.whl")
    site = tmp_path / "site"
    install = subprocess.run(
        [py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    shipped = site / "forethought"
    assert (shipped / "conf" / "verify.yaml").is_file() and (shipped / "conf" / "profile" / "tiny.yaml").is_file()
    assert len(list((shipped / "data_gen" / "solutions").rglob("*.json"))) >= 445
    assert (shipped / "data_gen" / "slot_values" / "airline.json").is_file()
    assert (shipped / "kernel" / "spec_golden.json").is_file()
    assert len(list((shipped / "kernel" / "domains").glob("*/data.json"))) >= 9  # each domain's reference data

    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FORETHOUGHT_DOMAINS")}
    env.update(PYTHONPATH=str(site), OMP_NUM_THREADS="1")
    version = subprocess.run(
        [py, "-m", "forethought.cli", "--version"], cwd=empty, env=env, capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("forethought "), version.stderr
    proc = subprocess.run([py, "-c", SCRIPT, str(site)], cwd=empty, env=env, capture_output=True, text=True)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, proc.stderr[-5000:]
    results = json.loads(lines[-1].removeprefix("RESULTS "))
    assert results.pop("outside") == [], "modules imported from outside the installed package"
    assert results == dict.fromkeys(results, 0), (results, proc.stderr[-3000:])
    # the user's paths: under the current directory, in the layout every command shares
    assert (empty / "runs" / "pipeline" / "data" / "stats.json").is_file()
    assert (empty / "runs" / "run" / "fs-paper-figure1" / "trace.jsonl").is_file()
    assert not any(site.rglob("runs")), "nothing is written into the installed package"
