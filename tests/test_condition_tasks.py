"""Conditional (``when``) and fan-out (``for_each``) tasks (issue 16 part 4; docs/kernel.md, "Conditional and fan-out tasks").

Program-level: a predicate true or false (or its key absent), a fan-out over 0, 1 and n elements, the bound exceeded
(reported, not dropped), a failing instance that leaves the others; the static bound; decompose's contract on the new
fields; verify's evidence for the new tags; and the generated decompose dataset teaching both."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forethought.data_gen.generate import DataConfig, generate
from forethought.data_gen.verify import Divergence, verify_solution
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.runner import oracle_factory, run_solution
from forethought.kernel.scenario import Solution
from forethought.kernel.solution_file import load_solution
from forethought.kernel.specs import DECOMPOSE

SOL = Path(__file__).resolve().parents[1] / "data_gen" / "solutions"
STRICT = KernelConfig(strict_invariants=True)


def _load(rel: str) -> Solution:
    return load_solution(SOL / rel)


def _run(sol: Solution, config: KernelConfig = STRICT):
    out = run_solution(sol.rendered(), Kernel(config), oracle_factory(sol.rendered()))
    assert all(not t.invariant_violations for t in out.turns)
    return out.turns[-1], out.final_state


def _edit(sol: Solution, fn) -> Solution:
    data = sol.model_dump(mode="json", exclude={"source_file"})
    fn(data)
    return Solution.model_validate(data)


# --------------------------------------------------------------- conditional
def test_a_true_predicate_runs_the_task_after_its_dependency():
    res, world = _run(_load("telecom/resume_if_suspended.json"))
    out = res.outcomes["t2"]
    assert out.status == "executed" and out.condition is True and out.condition_value == "suspended"
    assert [c.tool for c in res.committed_calls] == ["get_details_by_id", "resume_line"]
    assert world["telecom"]["lines"]["L-5150"]["status"] == "active"


def test_a_false_predicate_skips_the_task_and_is_not_a_failure():
    res, world = _run(_load("telecom/resume_if_suspended_line_active.json"))
    out = res.outcomes["t2"]
    assert out.status == "skipped_condition" and out.condition is False and out.condition_value == "active"
    assert "is false" in out.reason
    assert [c.tool for c in res.committed_calls] == ["get_details_by_id"]  # resume_line never called, not even rejected
    assert res.prerequisites["t2"] == [] and res.bindings["t2"] == {}


def test_a_predicate_on_an_absent_key_fails_closed():
    def absent(solution):
        solution["turns"][0]["tasks"][1]["when"]["key"] = "get_details_by_id.no_such_field"

    res, _ = _run(_edit(_load("telecom/resume_if_suspended.json"), absent))
    assert res.outcomes["t2"].status == "skipped_condition" and "S has no" in res.outcomes["t2"].reason
    assert [c.tool for c in res.committed_calls] == ["get_details_by_id"]


def test_a_conditional_task_whose_dependency_failed_is_skipped_for_the_dependency():
    def unknown_line(solution):  # the world has another line, so reading the requested one fails
        lines = solution["initial_state"]["telecom"]["lines"]
        lines["L-0000"] = lines.pop("${line}")

    res, _ = _run(_edit(_load("telecom/resume_if_suspended.json"), unknown_line))
    assert res.outcomes["t1"].status == "tool_failed"
    assert res.outcomes["t2"].status == "skipped" and res.outcomes["t2"].condition is None


# ------------------------------------------------------------------- fan-out
def _tmp_files(count: int):
    def edit(solution):
        children = solution["initial_state"]["file_system"]["root"]["children"]
        for name in [k for k in children if k.endswith(".tmp")]:
            del children[name]
        for i in range(count):
            children[f"junk_{i:02d}.tmp"] = {"type": "file", "content": str(i)}

    return edit


@pytest.mark.parametrize("count", [0, 1, 3])
def test_fan_out_runs_one_instance_per_element(count):
    res, world = _run(_edit(_load("file_system/delete_every_tmp_file.json"), _tmp_files(count)))
    out = res.outcomes["t2"]
    names = [f"junk_{i:02d}.tmp" for i in range(count)]
    assert out.elements == names and out.instances == [f"t2[{k}]" for k in range(count)] and out.beyond_bound == []
    assert out.status == ("executed" if count else "skipped_condition")
    rms = [c for c in res.committed_calls if c.tool == "rm"]
    assert [(c.task_id, c.arguments) for c in rms] == [(f"t2[{k}]", {"file_name": names[k]}) for k in range(count)]
    for k in range(count):  # each instance binds its element from tau (INV-L), and is recorded on its own
        assert res.bindings[f"t2[{k}]"]["file_name"].source == "request"
        assert res.outcomes[f"t2[{k}]"].status == "executed"
    assert not [k for k in world["file_system"]["root"]["children"] if k.endswith(".tmp")]
    assert [t.id for t in res.tasks] == ["t1", "t2"]  # instances are not decompose's tasks


def test_elements_beyond_max_fanout_are_reported_not_run():
    res, world = _run(
        _edit(_load("file_system/delete_every_tmp_file.json"), _tmp_files(5)),
        KernelConfig(strict_invariants=True, max_fanout=2),
    )
    out = res.outcomes["t2"]
    assert out.status == "partial"
    assert out.instances == ["t2[0]", "t2[1]"] and out.beyond_bound == ["junk_02.tmp", "junk_03.tmp", "junk_04.tmp"]
    assert "beyond max_fanout=2 not run" in out.reason and "junk_04.tmp" in out.reason
    assert len([c for c in res.committed_calls if c.tool == "rm"]) == 2
    assert sorted(k for k in world["file_system"]["root"]["children"] if k.endswith(".tmp")) == [
        "junk_02.tmp",
        "junk_03.tmp",
        "junk_04.tmp",
    ]


def test_a_failing_instance_abandons_only_itself():
    res, world = _run(_load("telecom/payment_request_each_overdue_bill.json"))
    assert res.outcomes["t2[0]"].status == "executed"
    assert res.outcomes["t2[1]"].status == "tool_failed" and "still open" in res.outcomes["t2[1]"].reason
    assert res.outcomes["t2"].status == "partial" and "1 executed, 1 tool_failed" in res.outcomes["t2"].reason
    assert world["telecom"]["bills"]["B-7102"]["status"] == "awaiting_payment"


def test_a_failing_first_instance_does_not_stop_the_next():
    def already_following_first(solution):  # the first commenter is followed already: following them again fails
        solution["initial_state"]["social"]["posting"]["following"]["${me}"].append("${c1}")

    res, world = _run(_edit(_load("social/follow_each_commenter.json"), already_following_first))
    assert [res.outcomes[f"t2[{k}]"].status for k in range(2)] == ["tool_failed", "executed"]
    assert [c.arguments for c in res.committed_calls if c.tool == "follow_user"] == [
        {"username_to_follow": "runner_max"}
    ]
    assert res.outcomes["t2"].status == "partial"
    assert world["social"]["posting"]["following"]["bookworm"] == ["nightowl", "chef_maria", "runner_max"]


def test_the_static_bound_counts_max_fanout():
    small, large = (Kernel(KernelConfig(max_fanout=n)).program.max_slm_calls for n in (2, 4))
    one = Kernel(KernelConfig(max_fanout=1)).program.max_slm_calls
    assert large - small == 2 * (small - one) > 0  # linear in max_fanout: each instance may make one task's calls


# ------------------------------------------------------------ decompose's contract
def _decompose_violations(edit) -> list[str]:
    from forethought.kernel.specs import spec_golden

    case = json.loads(json.dumps(spec_golden()["decompose"][2]))
    edit(case["target"]["tasks"])
    inp = DECOMPOSE.input_type.model_validate(case["input"])
    return [v["message"] for v in DECOMPOSE.check_output(inp, case["target"]).to_dict()["violations"]]


def test_decompose_contract_accepts_the_golden_conditional_and_fan_out():
    assert _decompose_violations(lambda ts: None) == []


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda ts: ts[3].update(depends_on=[]), "not in its depends_on"),
        (lambda ts: ts[3]["parameters"].update(id="B-1"), "must not state it"),
        (lambda ts: ts[3]["for_each"].update(param="bill"), "not a parameter"),
        (lambda ts: ts[1]["when"].update(value="closed"), "not grounded"),
        (lambda ts: ts[1]["when"].update(op="truthy"), "takes no value"),
    ],
)
def test_decompose_contract_rejects_malformed_conditions(edit, needle):
    assert any(needle in v for v in _decompose_violations(edit)), _decompose_violations(edit)


# --------------------------------------------------------------------- verify
def test_the_solutions_that_failed_before_verify_now():
    for rel in ("telecom/resume_if_suspended.json", "trading/watch_every_stock_in_range.json"):
        verify_solution(_load(rel))


def test_fan_out_tag_needs_instances_with_their_calls():
    def tag(solution):
        solution["tags"].append("fan_out")

    with pytest.raises(Divergence, match="tag 'fan_out' needs"):
        verify_solution(_edit(_load("telecom/payment_request_each_overdue_bill.json"), tag))


def test_a_wrong_predicate_annotation_is_a_divergence():
    def flip(solution):  # says the predicate held and the task executed, on a line that is active
        task = solution["turns"][0]["tasks"][1]
        task["when"]["value"] = "active"

    with pytest.raises(Divergence):
        verify_solution(_edit(_load("telecom/resume_if_suspended_line_active.json"), flip))


# ------------------------------------------------------------------- datasets
def test_generated_decompose_targets_teach_when_and_for_each(tmp_path):
    src = tmp_path / "solutions"
    src.mkdir()
    for rel in (
        "telecom/resume_if_suspended.json",
        "trading/watch_every_stock_in_range.json",
        "file_system/copy_if_todo_none.json",
    ):
        shutil.copy(SOL / rel, src / Path(rel).name)
    cfg = DataConfig.model_validate(
        dict(
            solutions=[str(src)],
            output_dir=str(tmp_path / "data"),
            seed=0,
            workers=1,
            max_rounds=30,
            sizes={"decompose": 12, "get_order": 0, "check_prerequisites": 0, "match_func": 0, "match_fill": 0},
            validation_fraction=0.2,
            allow_undersized=True,
        )
    )
    generate(cfg)
    rows = [
        x
        for split in ("train", "validation")
        for x in (tmp_path / "data" / "decompose" / f"{split}.jsonl").read_text().splitlines()
    ]
    targets = [json.loads(x)["target"] for x in rows if x.strip()]
    tasks = [t for target in targets for t in target["tasks"]]
    assert any(t["when"] is not None for t in tasks) and any(t["for_each"] is not None for t in tasks)
    fan = next(t for t in tasks if t["for_each"] is not None)
    assert fan["for_each"]["task"] in fan["depends_on"] and fan["for_each"]["param"] == "stock"


def test_the_html_trace_shows_the_condition_and_each_instance():
    from forethought.kernel.trace_html import render_turn

    res, _ = _run(_load("telecom/payment_request_each_overdue_bill.json"))
    html = render_turn(res, None)
    assert "for each bill_id in t1.bills" in html and "Task t2[0]" in html and "Task t2[1]" in html
    res, _ = _run(_load("telecom/resume_if_suspended_line_active.json"))
    assert "when get_details_by_id.line_status eq" in render_turn(res, None)
