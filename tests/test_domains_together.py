"""Checks across the domains, parametrised over every folder under kernel/domains/ (a new domain is covered by
adding its folder): each is discovered and loads, no tool name is defined by two domains, all of them build one
environment, every prerequisite can be established by one of the domain's tools, and each has worked solutions
and a test file that replays them. A domain that fails to load fails these tests; none is skipped."""

from __future__ import annotations

import pytest

from forethought.kernel.domains import available, load_domain
from forethought.kernel.environment import Environment
from tests.domain_harness import ROOT, domain_folders, solution_paths

DOMAINS = domain_folders()


def test_every_domain_folder_is_discovered():
    assert len(DOMAINS) >= 9
    assert list(available()) == DOMAINS


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_loads(name):
    assert load_domain(name).name == name


@pytest.mark.parametrize("name", DOMAINS)
def test_tool_names_unique_across_domains(name):
    mine = set(load_domain(name).tools)
    for other in DOMAINS:
        if other != name:
            clash = mine & set(load_domain(other).tools)  # a domain that does not load raises here: a failure
            assert not clash, f"tools {sorted(clash)} are defined by both {name!r} and {other!r}"


@pytest.mark.parametrize("name", DOMAINS)
def test_every_prerequisite_can_be_established_by_a_tool_of_its_domain(name):
    specs = [t.spec for t in load_domain(name).tools.values()]
    written = {key for s in specs for key in s.writes}
    # check_prerequisites can only ever satisfy a prerequisite that some tool writes into the scratchpad
    unreachable = [(s.name, p.key) for s in specs for p in s.prerequisites if p.key not in written]
    assert not unreachable, unreachable


def test_all_domains_build_one_environment():
    env = Environment(DOMAINS)  # refuses a tool name that two domains define
    assert env.snapshot().keys() == set(DOMAINS)


@pytest.mark.parametrize("name", DOMAINS)
def test_domain_has_worked_solutions_and_a_test_file_that_replays_them(name):
    assert solution_paths(name, at_least=30)  # the per-domain minimum forethought verify asks of the corpus
    test_file = ROOT / "tests" / f"test_domain_{name}.py"
    assert test_file.is_file(), f"{test_file} is missing"
    text = test_file.read_text(encoding="utf-8")
    assert f'solution_paths("{name}"' in text and "assert_solution_verifies(" in text, (
        f"{test_file} does not replay data_gen/solutions/{name}/ (tests/domain_harness.py: solution_paths, "
        "assert_solution_verifies)"
    )
