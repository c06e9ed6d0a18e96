"""forethought verify: broken solutions are rejected with a message naming file, turn and step."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from forethought.cli import main
from forethought.data_gen.verify import (
    VerifyConfig,
    coverage_minimums,
    request_over_scratchpad_conflicts,
    verify_paths,
    verify_solution,
)
from forethought.kernel.runner import build_environment, build_registry
from forethought.kernel.scenario import json_schema
from forethought.kernel.solution_file import load_solution

FIG1 = Path("data_gen/solutions/file_system/paper_figure1.json")


def _write(tmp_path: Path, data: dict, name: str = "broken.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _fig1() -> dict:
    return json.loads(FIG1.read_text())


def _verify_one(path: Path) -> str:
    (res,) = verify_paths([path])
    assert not res.ok
    return res.error


def test_the_corpus_verifies_with_coverage_minimums(capsys):
    rc = main(["verify"])  # the default corpus: 30 per domain and 10 per pattern apply by default
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "solutions verified" in out and "cyclic_dependency" in out and "coverage below" not in out


def test_coverage_minimums_default_to_the_requirement_for_the_default_corpus_only(tmp_path, monkeypatch, capsys):
    cfg = VerifyConfig()
    assert coverage_minimums(cfg, cfg.paths) == (30, 10)
    assert coverage_minimums(VerifyConfig(min_per_domain=2), cfg.paths) == (2, 10)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _write(corpus, _fig1(), "fig1.json")
    assert coverage_minimums(cfg, [str(corpus)]) == (0, 0)  # explicit paths: report only
    assert main(["verify", str(corpus)]) == 0
    assert main(["verify", str(corpus), "min_per_tag=1"]) == 1  # ... unless set explicitly
    assert "coverage below the configured minimum: pattern prereq_absent_retrieve: 0 < 1" in capsys.readouterr().err
    monkeypatch.setattr(
        "forethought.data_gen.verify.DEFAULT_SOLUTIONS", corpus
    )  # a plain `forethought verify` of the default corpus
    assert main(["verify", f"paths=[{corpus}]"]) == 1
    assert "domain file_system: 1 < 30" in capsys.readouterr().err


def test_every_paraphrase_is_replayed(tmp_path):
    solution = _fig1()
    solution["turns"][0]["paraphrases"][1] = "Tell me a joke."
    msg = _verify_one(_write(tmp_path, solution))
    assert msg.startswith("turn 0, paraphrases[1]: 'Tell me a joke.': kernel/decompose: "), msg
    assert "values_grounded" in msg and "dir_name='archive'" in msg


def test_a_paraphrase_must_carry_the_requests_slots(tmp_path):
    solution = _fig1()
    solution["turns"][1]["paraphrases"][0] = (
        "Look through the report I just moved for lines mentioning revenue."  # literal, not ${word}
    )
    msg = _verify_one(_write(tmp_path, solution))
    assert msg.startswith("turn 1, paraphrases[0]: ") and "lacks ${word}" in msg, msg


def test_request_over_scratchpad_needs_the_request_overriding_a_different_value_in_the_scratchpad(tmp_path):
    solution = _fig1()  # tau and S are both used, but never for the same key
    solution["tags"].append("request_over_scratchpad")
    assert (
        "tag 'request_over_scratchpad' needs a parameter bound from the request while the scratchpad already holds that key"
        in _verify_one(_write(tmp_path, solution))
    )
    sol = load_solution("data_gen/solutions/file_system/cd_request_over_scratchpad.json")
    rendered = sol.rendered()
    conflicts = request_over_scratchpad_conflicts(
        rendered, verify_solution(sol), build_registry(rendered, build_environment(rendered))
    )
    assert conflicts and all(tau != s for _, _, _, tau, s in conflicts)


NO_SIDE = Path("data_gen/solutions/file_system/find_before_delete.json")


@pytest.mark.parametrize(
    "turn,names,needle",
    [
        (0, None, "tag 'no_side_effect' is not backed"),
        (0, ["find"], "turn 0, must_not_call: 'find' has no side effects"),
        (0, ["shred"], "turn 0, must_not_call: 'shred' is not in the registry"),
        (1, ["rm"], "turn 1, must_not_call: rm was called"),
    ],
)
def test_no_side_effect_names_a_tempting_side_effecting_tool_that_is_not_called(tmp_path, turn, names, needle):
    solution = json.loads(NO_SIDE.read_text())
    assert solution["turns"][0]["must_not_call"] == ["rm"] and "no_side_effect" in solution["tags"]
    del solution["turns"][0]["must_not_call"]
    if names is not None:
        solution["turns"][turn]["must_not_call"] = names
    assert needle in _verify_one(_write(tmp_path, solution))


def test_no_side_effect_needs_a_read_only_turn(tmp_path):
    solution = json.loads(NO_SIDE.read_text())
    del solution["turns"][0]["must_not_call"]
    solution["turns"][1]["must_not_call"] = ["mv"]  # not called, but the turn commits rm: not a read-only turn
    assert "tag 'no_side_effect' needs a turn whose committed calls are all read-only" in _verify_one(
        _write(tmp_path, solution)
    )


@pytest.mark.parametrize(
    "schema,needle",
    [
        (
            {"type": "object", "properties": {"a": {"type": "strng"}}},
            "registry.extra.0 ('upload').parameters.properties.a.type: unknown type 'strng' (did you mean 'string'?)",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "requried": ["a"]},
            "registry.extra.0 ('upload').parameters.requried: unknown JSON Schema keyword 'requried'",
        ),
    ],
)
def test_extra_tool_schemas_are_validated(tmp_path, schema, needle):
    solution = _fig1()
    solution["registry"] = {"extra": [{"name": "upload", "description": "Upload a file.", "parameters": schema}]}
    msg = _verify_one(_write(tmp_path, solution))
    assert needle in msg, msg


def test_shipped_schema_is_current_and_describes_every_field():
    shipped = json.loads(Path("data_gen/solutions/schema.json").read_text())
    assert shipped == json_schema(), "stale: run python -m forethought.kernel.scenario > data_gen/solutions/schema.json"
    ours = {
        "Solution",
        "Turn",
        "TaskAnn",
        "PrereqAnn",
        "ProposedTaskAnn",
        "BindingAnn",
        "StateAssertion",
        "RefCall",
        "SlotDef",
        "RegistryRef",
    }
    defs = {k: v for k, v in shipped["$defs"].items() if k in ours} | {"Solution": shipped}
    assert set(defs) == ours
    undocumented = [
        f"{m}.{f}" for m, d in defs.items() for f, prop in d["properties"].items() if not prop.get("description")
    ]
    assert not undocumented


def test_wrong_order(tmp_path):
    solution = _fig1()
    solution["turns"][0]["order"] = ["t2", "t1"]
    assert _verify_one(_write(tmp_path, solution)) == "turn 0, get_order: expected order ['t2', 't1'], got ['t1', 't2']"


def test_unbound_parameter(tmp_path):
    solution = _fig1()
    del solution["turns"][1]["tasks"][1]["parameters"]["pattern"]  # the search pattern is no longer grounded anywhere
    msg = _verify_one(_write(tmp_path, solution))
    assert msg.startswith("turn 1, ") and "pattern" in msg


def test_wrong_source(tmp_path):
    solution = _fig1()
    solution["turns"][1]["tasks"][0]["bindings"]["folder"]["source"] = "request"
    msg = _verify_one(_write(tmp_path, solution))
    assert msg == "turn 1, task t1/parameter folder: expected source request, got scratchpad (value 'archive')"


def test_wrong_call(tmp_path):
    solution = _fig1()
    solution["turns"][1]["calls"][1] = "grep(file_name='${file}', pattern='profit')"
    msg = _verify_one(_write(tmp_path, solution))
    assert (
        msg
        == "turn 1, call 2: expected grep(file_name='report.txt', pattern='profit'), got grep(file_name='report.txt', pattern='revenue')"
    )


def test_annotation_that_violates_a_contract(tmp_path):
    solution = _fig1()
    solution["turns"][0]["tasks"][0]["parameters"]["dir_name"] = (
        "attic"  # not in the request: decompose's grounding contract
    )
    solution["turns"][0]["tasks"][0]["bindings"]["dir_name"]["value"] = "attic"
    msg = _verify_one(_write(tmp_path, solution))
    assert "turn 0" in msg and "decompose" in msg and "values_grounded" in msg and "attic" in msg


def test_unbacked_tag(tmp_path):
    solution = _fig1()
    solution["tags"].append("prereq_not_met_blocked")
    assert "tag 'prereq_not_met_blocked' is not backed" in _verify_one(_write(tmp_path, solution))


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d.pop("turns"), "turns: Field required"),
        (lambda d: d["turns"][0]["tasks"][0].update(tool_name="mkdir"), "turns.0.tasks.0.tool_name: unknown field"),
        (lambda d: d["turns"][0].update(user="Move ${nope} now"), "undefined slot ${nope}"),
        (
            lambda d: d["turns"][0]["tasks"][0]["bindings"]["dir_name"].update(source="cache"),
            "turns.0.tasks.0.bindings.dir_name.source",
        ),
        (
            lambda d: d["turns"][0]["calls"].__setitem__(0, "ls(a=__import__(1))"),
            "turns.0: Value error, calls[0] 'ls(a=__import__(1))' is not a call",
        ),
        (lambda d: d["turns"][0]["order"].append("t99"), "order names unknown task ids ['t99']"),
        # decompose's ids_consistent check, the one implementation of the task-graph rules (kernel/specs/)
        (
            lambda d: d["turns"][0]["tasks"][1]["depends_on"].append("t7"),
            "turns.0: Value error, task t2 depends on unknown ids ['t7']",
        ),
        (
            lambda d: d["turns"][0]["tasks"][1]["depends_on"].append("t2"),
            "turns.0: Value error, task t2 depends on itself",
        ),
        (lambda d: d["turns"][0]["tasks"][1].update(id="t1"), "turns.0: Value error, task ids are not unique"),
    ],
)
def test_malformed_files_name_the_field(tmp_path, mutate, needle):
    solution = copy.deepcopy(_fig1())
    mutate(solution)
    path = _write(tmp_path, solution)
    msg = _verify_one(path)
    assert needle in msg, msg


def test_not_json_names_line_and_column(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text('{"id": "x",\n  "domains": [file_system]}')
    rc = main(["verify", str(path)])
    out = capsys.readouterr().err
    assert rc == 2  # bad input (issue 13: one exit-code convention, messages on stderr)
    assert f"FAIL {path}: not valid JSON" in out.replace("\n", "") and "line 2" in out


def test_missing_path_is_a_located_error(capsys):
    rc = main(["verify", "does/not/exist"])
    assert rc == 2
    assert "does/not/exist: no such file or directory" in capsys.readouterr().err


def test_fixture_solutions_are_current_copies_of_the_corpus():
    # The fast pipeline fixtures are copies of corpus files; a corpus fix must reach them too.
    root = Path(__file__).resolve().parents[1]
    stale = []
    for fixture_file in sorted((root / "tests" / "fixtures" / "solutions").glob("*.json")):
        src = list((root / "data_gen" / "solutions").rglob(fixture_file.name))
        if src and src[0].read_bytes() != fixture_file.read_bytes():
            stale.append(f"{fixture_file.name} differs from {src[0].relative_to(root)}")
    assert stale == []


def test_no_two_solutions_are_the_same_template_with_other_values():
    # A solution that only changes slot values adds nothing entity substitution does not already do,
    # and could put the same scenario on both sides of the split.
    root = Path(__file__).resolve().parents[1] / "data_gen" / "solutions"
    seen: dict[tuple, str] = {}
    twins = []
    for solution_file in sorted(root.rglob("*.json")):
        if solution_file.name == "schema.json":
            continue
        solution = json.loads(solution_file.read_text())
        key = tuple(t["user"] for t in solution["turns"])
        if key in seen:
            twins.append(f"{solution_file.relative_to(root)} repeats {seen[key]}")
        seen.setdefault(key, str(solution_file.relative_to(root)))
    assert twins == []


def test_failure_messages_keep_bracketed_check_names(tmp_path, capsys):
    # Finding 8: rich markup swallowed "[values_grounded]" in verify's messages.
    from forethought.data_gen.verify import VerifyResult, print_report

    print_report([VerifyResult("x.json", None, False, "turn 1: [value] values_grounded: [values_grounded] bad")], 0.0)
    assert "[value] values_grounded: [values_grounded] bad" in capsys.readouterr().err


def test_a_yaml_alias_bomb_in_a_solution_is_refused_cheaply(tmp_path):
    # Finding 6: an alias bomb inside a solution's config: grew memory at ~60 MB/s until killed.
    bomb = "id: x\nconfig:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"  {chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb)
    # Refused at the first alias it meets (line 4), so nothing was expanded: a fact, not a time (issue 25).
    msg = _verify_one(path)
    assert "YAML aliases (*a) are not accepted (line 4)" in msg


def test_json_nested_too_deep_is_a_located_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"id": "x", "config": ' + "[" * 5000 + "]" * 5000 + "}")
    assert "nested deeper than 64 levels" in _verify_one(path)


# ------------------------------------------------ issue 16 part 5: warnings and messages that catch silent mistakes
SOL = Path("data_gen/solutions")


def _load(rel: str) -> dict:
    return json.loads((SOL / rel).read_text())


def test_prerequisite_divergence_shows_the_value_in_s_and_the_call_that_wrote_it(tmp_path):
    solution = _load("ticket/close_then_comment_blocked.json")
    prerequisite = solution["turns"][1]["tasks"][0]["prerequisites"][1]
    prerequisite["outcome"] = "met"  # wrong: the close in turn 0 wrote ticket_status[57]=Closed (per ticket)
    del prerequisite["remediation"]
    solution["tags"] = [t for t in solution["tags"] if t != "prereq_not_met_blocked"]
    msg = _verify_one(_write(tmp_path, solution))
    assert msg == (
        "turn 1, task t1/check_prerequisites/ticket_status[57]: outcome: expected met, got not_met "
        "(S['ticket_status[57]'] = 'Closed', written by turn 0 call close_ticket(ticket_id=57))"
    ), msg


def test_parallel_tasks_counts_independent_tasks_below_a_shared_dependency(tmp_path):
    # Two touches that both follow the same mkdir+cd are ordered by get_order; the old check counted only tasks
    # that depend on nothing and refused the tag.
    solution = {
        "id": "fs-two-touches-after-cd",
        "title": "t",
        "description": "d",
        "domains": ["file_system"],
        "tags": ["parallel_tasks", "dependency_chain"],
        "slots": {
            "dir": {"type": "dir_name", "value": "handoff"},
            "a": {"type": "file_name", "value": "report.txt"},
            "b": {"type": "file_name", "value": "budget.csv"},
        },
        "initial_state": {"file_system": {"root": {"children": {}}}},
        "turns": [
            {
                "user": "Make a folder ${dir}, go into it and create ${a} and ${b} there.",
                "tasks": [
                    {
                        "id": "t1",
                        "text": "Create ${dir}",
                        "tool": "mkdir",
                        "parameters": {"dir_name": "${dir}"},
                        "bindings": {"dir_name": {"source": "request", "value": "${dir}"}},
                    },
                    {
                        "id": "t2",
                        "text": "Go into ${dir}",
                        "tool": "cd",
                        "depends_on": ["t1"],
                        "parameters": {"folder": "${dir}"},
                        "bindings": {"folder": {"source": "request", "value": "${dir}"}},
                    },
                    {
                        "id": "t3",
                        "text": "Create ${a}",
                        "tool": "touch",
                        "depends_on": ["t2"],
                        "parameters": {"file_name": "${a}"},
                        "bindings": {"file_name": {"source": "request", "value": "${a}"}},
                    },
                    {
                        "id": "t4",
                        "text": "Create ${b}",
                        "tool": "touch",
                        "depends_on": ["t2"],
                        "parameters": {"file_name": "${b}"},
                        "bindings": {"file_name": {"source": "request", "value": "${b}"}},
                    },
                ],
                "order": ["t1", "t2", "t3", "t4"],
                "calls": [
                    "mkdir(dir_name='${dir}')",
                    "cd(folder='${dir}')",
                    "touch(file_name='${a}')",
                    "touch(file_name='${b}')",
                ],
                "state": [{"path": "file_system/cwd", "equals": ["${dir}"]}],
            }
        ],
    }
    (res,) = verify_paths([_write(tmp_path, solution)], warnings=False)
    assert res.ok, res.error
    solution["turns"][0]["tasks"][3]["depends_on"] = ["t3"]  # now a chain: no layer of two tasks, so no evidence
    assert "tag 'parallel_tasks' is not backed" in _verify_one(_write(tmp_path, solution))


def test_verify_warns_about_a_literal_in_a_slot_pool(tmp_path):
    solution = _fig1()
    # a second file whose name is in the file_name pool: a copy that draws it for ${file} has two files of one name
    solution["initial_state"]["file_system"]["root"]["children"]["budget.csv"] = {"type": "file", "content": "x"}
    (res,) = verify_paths([_write(tmp_path, solution)])
    assert res.ok, res.error
    assert any(
        "initial_state.file_system.root.children.budget.csv" in w
        and "'budget.csv' is also in the value pool of file_name" in w
        for w in res.warnings
    ), res.warnings
    (clean,) = verify_paths([FIG1])
    assert clean.ok and clean.warnings == []


def test_verify_warns_about_an_asserted_number_derived_from_a_slot(tmp_path, capsys):
    solution = _load("telecom/paper_e4_refuel_data.json")
    solution["turns"][0]["state"][0]["equals"] = 3  # the refuelled amount written out instead of ${gb}
    path = _write(tmp_path, solution)
    (res,) = verify_paths([path])
    assert res.ok, res.error  # right for its own values ...
    (warning,) = [w for w in res.warnings if "derived" in w]  # ... but not for the others generate draws
    assert (
        warning.startswith("an asserted number looks derived from a slot")
        and "${gb}=" in warning
        and "turn 0, state: telecom/lines/" in warning
    ), warning
    assert main(["verify", str(path)]) == 0  # a warning, not a failure
    err = capsys.readouterr().err
    assert "WARN" in err and "derived from a slot" in err
