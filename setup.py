"""Package layout only; everything else about the distribution is in pyproject.toml.

The repository keeps one folder per stage of the data flow at its top (``primitives/``, ``kernel/``,
``data_gen/``, ``training/``); the distribution installs them as subpackages of ``forethought`` so it
owns exactly one top-level import name. pyproject.toml's ``packages.find`` cannot add a prefix, hence
this file.
"""

from setuptools import find_packages, setup

SUBPACKAGES = ("primitives", "kernel", "data_gen", "training")

packages = [p for p in find_packages(include=["forethought", "forethought.*"])]
package_dir = {"forethought": "forethought"}
for top in SUBPACKAGES:
    for name in find_packages(include=[top, f"{top}.*"]):
        packages.append(f"forethought.{name}")
    package_dir[f"forethought.{top}"] = top
# The shipped configs install as forethought/conf/ (forethought.config.CONF_DIR finds them there); they, the worked
# solutions and the slot values are package data (pyproject.toml), found through the package at run time.
packages.append("forethought.conf")
package_dir["forethought.conf"] = "conf"

setup(packages=packages, package_dir=package_dir)
