"""Kernel semantics on a small purpose-built domain, driven by the oracle backend."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.domains.base import Domain, ToolError
from forethought.kernel.environment import Environment
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.registry.model import Prerequisite, Sat
from forethought.kernel.scenario import Turn
from forethought.kernel.scratchpad import Scratchpad


class WeatherState(BaseModel):
    log: list[str] = Field(default_factory=list)
    outage: bool = True  # the primary service returns an incomplete result
    saved: dict[str, Any] = Field(default_factory=dict)


def _humidity_present(args, result, state):
    return None if "humidity" in result else "result lacks humidity"


DOM = Domain("weather_test", WeatherState)


@DOM.tool(post=[_humidity_present], alternatives=["weather_backup"], writes={"forecast": "result"})
def weather_primary(state: WeatherState, city: str) -> dict:
    """Current weather for a city (primary service).

    Args:
        city: City name.
    """
    state.log.append(f"primary:{city}")
    if state.outage:
        return {"temperature": 21, "condition": "sunny"}
    return {"temperature": 21, "condition": "sunny", "humidity": 40}


@DOM.tool(post=[_humidity_present], writes={"forecast": "result"})
def weather_backup(state: WeatherState, city: str) -> dict:
    """Current weather for a city (backup service).

    Args:
        city: City name.
    """
    state.log.append(f"backup:{city}")
    return {"temperature": 20, "condition": "sunny", "humidity": 45, "wind": 3}


@DOM.tool(post=[_humidity_present], writes={"forecast": "result"})
def weather_solo(state: WeatherState, city: str) -> dict:
    """Current weather from the only service, which is having an outage.

    Args:
        city: City name.
    """
    state.log.append(f"solo:{city}")
    return {"temperature": 21}


@DOM.tool(side_effect=True, writes={"session": "result.token"})
def wx_login(state: WeatherState, user: str) -> dict:
    """Log in to the weather service.

    Args:
        user: User name.
    """
    return {"token": f"tok-{user}"}


@DOM.tool(side_effect=True, prerequisites=[Prerequisite(key="session", sat=Sat(op="not_null"))])
def save_report(state: WeatherState, city: str, note: str) -> dict:
    """Save a weather report (needs a session).

    Args:
        city: City name.
        note: Note to save.
    """
    if not note:
        raise ToolError("empty note")
    state.saved[city] = note
    return {"saved": city}


@DOM.tool(side_effect=True, prerequisites=[Prerequisite(key="premium", sat=Sat(op="eq", value=True))])
def premium_alert(state: WeatherState, city: str) -> dict:
    """Set a premium weather alert (premium accounts only).

    Args:
        city: City name.
    """
    state.log.append(f"alert:{city}")
    return {"alert": city}


@DOM.tool(side_effect=True, writes={"premium": "const:true"})
def upgrade_plan(state: WeatherState, plan: str) -> dict:
    """Upgrade the account plan.

    Args:
        plan: Plan name.
    """
    return {"plan": plan}


def run(
    turn: dict[str, Any],
    *,
    cvc: bool = True,
    config: dict[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    scratchpad: Scratchpad | None = None,
):
    env = Environment([DOM], {"weather_test": state or {}})
    scratchpad = scratchpad if scratchpad is not None else Scratchpad(config or {})
    annotated = Turn.model_validate(turn)
    kernel = Kernel(KernelConfig(cvc=cvc, strict_invariants=True))
    res, trace = kernel.run_turn(
        user=annotated.user,
        env=env,
        scratchpad=scratchpad,
        registry=env.registry(),
        backend=OracleBackend(annotated, "test"),
        turn_context=annotated.context,
    )
    return res, trace, env, scratchpad


def task(tid: str, tool: str | None, text: str = "do it", **kw: Any) -> dict[str, Any]:
    return {"id": tid, "text": text, "tool": tool, **kw}


def turn(user: str, tasks: list[dict], order: list[str], **kw: Any) -> dict[str, Any]:
    return {"user": user, "tasks": tasks, "order": order, "calls": [], **kw}


def committed(res) -> list[str]:
    return [f"{c.tool}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in res.committed_calls]


def test_postcondition_failure_leaves_state_unchanged_and_tries_the_alternative():
    res, trace, env, scratchpad = run(
        turn("weather in Paris", [task("t1", "weather_primary", parameters={"city": "Paris"})], ["t1"])
    )
    assert [(c.tool, c.committed) for c in res.calls] == [("weather_primary", False), ("weather_backup", True)]
    assert res.calls[0].rejected == ["post: result lacks humidity"]
    # the rejected call's staged state was discarded: only the backup's log entry is in the world
    assert env.states["weather_test"].log == ["backup:Paris"]
    assert scratchpad.get("forecast")["humidity"] == 45
    assert res.outcomes["t1"].status == "executed" and res.outcomes["t1"].tool == "weather_backup"
    # the trace shows the rejection: the guard step that tried weather_primary names the failed postcondition
    guards = [r for r in trace if r.primitive == "guard_execute"]
    assert [g.output["toolgate"] for g in guards] == [["weather_primary: post: result lacks humidity"], []]
    assert [g.output["status"] for g in guards] == ["trying", "executed"]


def test_postcondition_failure_without_alternative_is_tool_failed_and_nothing_committed():
    res, _, env, scratchpad = run(
        turn("weather in Rome", [task("t1", "weather_solo", parameters={"city": "Rome"})], ["t1"])
    )
    assert res.outcomes["t1"].status == "tool_failed"
    assert "humidity" in res.outcomes["t1"].reason
    assert res.committed_calls == [] and env.states["weather_test"].log == []
    assert (
        "forecast" not in scratchpad and "city" not in scratchpad
    )  # nothing from a rejected result reaches the scratchpad


def test_absent_prerequisite_triggers_one_retrieval_then_executes():
    annotated = turn(
        "save a note for Oslo: cold, as ann",
        [
            task(
                "t1",
                "save_report",
                "save note cold for Oslo as ann",
                parameters={"city": "Oslo", "note": "cold"},
                prerequisites=[
                    {
                        "key": "session",
                        "outcome": "absent",
                        "retrieval": {"tool_name": "wx_login", "parameters": {"user": "ann"}},
                        "recheck": "met",
                    }
                ],
                bindings={
                    "city": {"source": "request", "value": "Oslo"},
                    "note": {"source": "request", "value": "cold"},
                },
            )
        ],
        ["t1"],
    )
    res, _, env, scratchpad = run(annotated)
    assert committed(res) == ["wx_login(user='ann')", "save_report(city='Oslo', note='cold')"]
    assert [c.purpose for c in res.calls] == ["retrieval", "task"]
    assert res.prerequisites["t1"][0].outcome == "absent" and res.prerequisites["t1"][0].recheck == "met"
    assert scratchpad.get("session") == "tok-ann"


def test_failed_retrieval_writes_the_key_once_and_blocks():
    annotated = turn(
        "save a note for Oslo: cold",
        [
            task(
                "t1",
                "save_report",
                parameters={"city": "Oslo", "note": "cold"},
                prerequisites=[{"key": "session", "outcome": "absent", "retrieval": None, "recheck": "not_met"}],
            )
        ],
        ["t1"],
    )
    res, _, env, scratchpad = run(annotated)
    assert "session" in scratchpad and scratchpad.get("session") is None  # Absent fires once: the key is now present
    assert res.outcomes["t1"].status == "blocked"
    assert res.calls == []


def test_not_met_prerequisite_blocks_with_remediation_and_only_that_task():
    annotated = turn(
        "set an alert for Lima and save a note for Lima: warm",
        [
            task(
                "t1",
                "premium_alert",
                "set a premium alert for Lima",
                parameters={"city": "Lima"},
                prerequisites=[
                    {
                        "key": "premium",
                        "outcome": "not_met",
                        "remediation": {"tool_name": "upgrade_plan", "parameters": {"plan": "premium"}},
                    }
                ],
            ),
            task(
                "t2",
                "save_report",
                parameters={"city": "Lima", "note": "warm"},
                prerequisites=[{"key": "session", "outcome": "met"}],
                bindings={
                    "city": {"source": "request", "value": "Lima"},
                    "note": {"source": "request", "value": "warm"},
                },
            ),
        ],
        ["t1", "t2"],
    )
    res, _, env, scratchpad = run(annotated, config={"premium": False, "session": "tok"})
    assert res.outcomes["t1"].status == "blocked"
    assert res.outcomes["t1"].remediation.tool_name == "upgrade_plan"
    assert res.outcomes["t2"].status == "executed"  # INV-R: only t1 was abandoned
    assert committed(res) == ["save_report(city='Lima', note='warm')"]
    assert env.states["weather_test"].log == []


def test_cycle_halts_the_turn_and_executes_nothing():
    annotated = turn(
        "a then b then a",
        [
            task("t1", "weather_backup", depends_on=["t2"], parameters={"city": "A"}),
            task("t2", "weather_backup", depends_on=["t1"], parameters={"city": "A"}),
        ],
        ["t1", "t2"],
    )
    res, trace, env, scratchpad = run(annotated)
    assert res.halted is not None and "cycle" in res.halted["reason"]
    assert res.halted["step"].endswith("build_dep_graph")
    assert res.calls == [] and env.states["weather_test"].log == []


def test_more_tasks_than_the_declared_fan_out_halt_the_turn_instead_of_dropping_any():
    # t1 depends on the 13th task: truncating to max_tasks=12 would run t1 without its dependency.
    tasks = [task("t1", "weather_backup", depends_on=["t13"], parameters={"city": "A"})]
    tasks += [task(f"t{i}", "weather_backup", parameters={"city": "A"}) for i in range(2, 14)]
    for cvc in (True, False):
        res, _, env, _ = run(turn("weather in A, thirteen times", tasks, [f"t{i}" for i in range(13, 0, -1)]), cvc=cvc)
        assert res.halted is not None and "max_tasks=12" in res.halted["reason"]
        assert res.calls == [] and env.states["weather_test"].log == []


def test_missing_function_and_missing_param_abandon_only_their_task():
    annotated = turn(
        "translate the forecast, save a note, and get weather for Kyiv",
        [
            task("t1", None, "translate the forecast"),
            task(
                "t2",
                "save_report",
                "save a note",
                parameters={"city": "Kyiv"},
                prerequisites=[{"key": "session", "outcome": "met"}],
                bindings={"city": {"source": "request", "value": "Kyiv"}, "note": {"source": "missing"}},
            ),
            task("t3", "weather_backup", "weather for Kyiv", parameters={"city": "Kyiv"}),
        ],
        ["t1", "t2", "t3"],
    )
    res, _, env, scratchpad = run(annotated, config={"session": "tok"})
    assert [res.outcomes[t].status for t in ("t1", "t2", "t3")] == ["missing_function", "missing_param", "executed"]
    assert res.outcomes["t2"].missing == ["note"]
    assert committed(res) == ["weather_backup(city='Kyiv')"]
    assert "note" in scratchpad and scratchpad.get("note") is None  # written even if unbound (INV-S)


def test_tau_is_consulted_before_the_scratchpad():
    scratchpad = Scratchpad({"city": "Old Town"})
    annotated = turn("weather for New Town", [task("t1", "weather_backup", parameters={"city": "New Town"})], ["t1"])
    res, *_ = run(annotated, scratchpad=scratchpad)
    binding = res.bindings["t1"]["city"]
    assert (binding.source, binding.value, binding.consulted) == ("request", "New Town", ["request"])
    annotated = turn("weather there again", [task("t1", "weather_backup")], ["t1"])
    res, *_ = run(annotated, scratchpad=scratchpad)
    binding = res.bindings["t1"]["city"]
    assert (binding.source, binding.value, binding.consulted) == ("scratchpad", "New Town", ["request", "scratchpad"])


def test_fill_reads_the_scratchpad_and_its_contract_rejects_hallucinated_values():
    scratchpad = Scratchpad({"home_city": "Quito", "session": "tok"})
    good = turn(
        "save note 'rain' for my home city",
        [
            task(
                "t1",
                "save_report",
                "save note rain for home city",
                parameters={"note": "rain"},
                prerequisites=[{"key": "session", "outcome": "met"}],
                bindings={
                    "note": {"source": "request", "value": "rain"},
                    "city": {"source": "fill", "fill_from": "scratchpad:home_city", "value": "Quito"},
                },
            )
        ],
        ["t1"],
    )
    res, *_ = run(good, scratchpad=scratchpad)
    assert committed(res) == ["save_report(city='Quito', note='rain')"]
    bad = turn(
        "save note 'rain' for my home city",
        [
            task(
                "t1",
                "save_report",
                "save note rain for home city",
                parameters={"note": "rain"},
                prerequisites=[{"key": "session", "outcome": "met"}],
                bindings={
                    "note": {"source": "request", "value": "rain"},
                    "city": {"source": "fill", "fill_from": "literal", "value": "Atlantis"},
                },
            )
        ],
        ["t1"],
    )
    res, trace, env, _ = run(bad, scratchpad=Scratchpad({"home_city": "Quito", "session": "tok"}))
    fills = trace.by_primitive("match_fill")
    assert len(fills) == 3 and all(not r.ok for r in fills)  # original + 2 retries, all rejected
    assert "not grounded" in fills[0].contract["violations"][0]["message"]
    assert res.outcomes["t1"].status == "missing_param"
    assert res.calls == []


def test_precondition_fails_closed_on_schema_violation():
    annotated = turn("weather for 42", [task("t1", "weather_backup", parameters={"city": 42})], ["t1"])
    res, _, env, _ = run(annotated)
    # decompose's parameters are grounded (42 is in the text) but 42 is not a string: the gate refuses it
    assert res.calls[0].committed is False and res.calls[0].rejected[0].startswith("pre:")
    assert env.states["weather_test"].log == []
    assert res.outcomes["t1"].status == "tool_failed"


def test_without_cvc_the_same_primitives_chain_unchecked():
    annotated = turn("weather for 42", [task("t1", "weather_primary", parameters={"city": 42})], ["t1"])
    res, _, env, _ = run(annotated, cvc=False)
    assert res.calls[0].rejected == []  # no gate: the malformed call reaches the tool
    assert env.states["weather_test"].log == ["primary:42"]  # and the incomplete result is committed
    annotated = turn(
        "alert Lima",
        [
            task(
                "t1",
                "premium_alert",
                parameters={"city": "Lima"},
                prerequisites=[{"key": "premium", "outcome": "not_met"}],
            )
        ],
        ["t1"],
    )
    res, *_ = run(annotated, cvc=False, config={"premium": False})
    assert res.prerequisites["t1"] == [] and res.outcomes["t1"].status == "executed"  # no prerequisite checking


def test_static_bound_and_program_structure():
    kernel = Kernel(KernelConfig(retries=1, max_tasks=4, max_prereqs=2, max_candidates=2, max_fanout=3))
    names = {p.name for p in kernel.program.primitives()}
    assert {
        "decompose",
        "get_order",
        "check_prerequisites",
        "match_func",
        "match_fill",
        "build_dep_graph",
        "guard_execute",
        "lookup_params",
    } <= names
    # decompose 2 + get_order 4*2 + match_func 4*2 + per task (a fan-out task runs up to 3 instances) 3 * (2 prereqs * (2 + 2) + 2 candidates * 2)
    assert kernel.program.max_slm_calls == 2 + 8 + 8 + 4 * 3 * (2 * 4 + 2 * 2)


@pytest.mark.parametrize("path", ["data_gen/solutions/file_system/paper_figure1.json"])
def test_paper_figure1_calls(path):
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.solution_file import load_solution

    turns = verify_solution(load_solution(path))
    assert committed(turns[0]) == ["mkdir(dir_name='archive')", "mv(source='report.txt', destination='archive')"]
    assert committed(turns[1]) == ["cd(folder='archive')", "grep(file_name='report.txt', pattern='revenue')"]
    bindings = turns[1].bindings
    assert (bindings["t1"]["folder"].source, bindings["t2"]["file_name"].source, bindings["t2"]["pattern"].source) == (
        "scratchpad",
        "scratchpad",
        "request",
    )


def test_a_task_whose_dependency_did_not_execute_is_skipped_and_independent_ones_run():
    annotated = turn(
        "translate the forecast, then save it for Oslo; also the weather for Rome",
        [
            task("t1", None, "translate the forecast"),
            task("t2", "save_report", "save the translation for Oslo", depends_on=["t1"], parameters={"city": "Oslo"}),
            task("t3", "weather_backup", "weather for Rome", parameters={"city": "Rome"}),
        ],
        ["t1", "t3", "t2"],
    )
    res, _, env, scratchpad = run(annotated, config={"session": "tok"})
    assert [res.outcomes[x].status for x in ("t1", "t2", "t3")] == ["missing_function", "skipped", "executed"]
    assert "t1 (missing_function)" in res.outcomes["t2"].reason
    assert res.bindings["t2"] == {} and res.prerequisites["t2"] == []
    assert committed(res) == ["weather_backup(city='Rome')"]
    # Without CVC there is no such protection: the dependent runs (and here fails on its missing note).
    res, *_ = run(annotated, cvc=False, config={"session": "tok"})
    assert res.outcomes["t2"].status != "skipped"


PAPER = {
    # Appendix C.2: the third turn of a file-system scenario, a three-step dependency chain.
    "data_gen/solutions/file_system/paper_c2_copy_rename.json": (
        2,
        [
            "cp(source='release_notes.txt', destination='handoff')",
            "cd(folder='handoff')",
            "mv(source='release_notes.txt', destination='client_release_notes.txt')",
        ],
    ),
    # Appendix C.3: the prerequisite is Met from persistent state; no remediation.
    "data_gen/solutions/travel/paper_c3_nearest_airport.json": (0, ["get_nearest_airport_by_city(city='Miami')"]),
    # Appendix C.4: the DOB is preserved from S while the names come from tau.
    "data_gen/solutions/airline/paper_c4_passenger_name.json": (
        0,
        [
            "get_reservation_details(reservation_id='G2LTC4')",
            "update_reservation_passengers(reservation_id='G2LTC4', passengers=[{'first_name': 'James', 'last_name': 'Nguyen', 'dob': '1998-08-02'}])",
        ],
    ),
}


@pytest.mark.parametrize("path", sorted(PAPER))
def test_paper_worked_examples_make_exactly_the_calls_shown(path):
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.solution_file import load_solution

    turn_index, calls = PAPER[path]
    turns = verify_solution(load_solution(path))
    assert committed(turns[turn_index]) == calls


def test_paper_c3_prerequisite_met_from_persistent_state():
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.solution_file import load_solution

    result = verify_solution(load_solution("data_gen/solutions/travel/paper_c3_nearest_airport.json"))[0]
    (tid,) = result.order
    assert [(p.key, p.outcome) for p in result.prerequisites[tid]] == [("authenticated", "met")]
    assert (result.bindings[tid]["city"].source, result.bindings[tid]["city"].value) == ("request", "Miami")
    assert result.calls[0].result["nearest_airport"] == "MIA" or "MIA" in str(result.calls[0].result)


def test_secret_parameters_are_passed_to_the_tool_but_never_kept_in_the_scratchpad():
    from forethought.data_gen.verify import verify_solution
    from forethought.kernel.domains import load_domain
    from forethought.kernel.solution_file import load_solution

    spec = load_domain("trading").tools["trading_login"].spec
    assert spec.secret == ["password"] and spec.parameters["properties"]["password"]["writeOnly"] is True
    for path in (
        "data_gen/solutions/social/post_wrong_password_blocked.json",
        "data_gen/solutions/travel/paper_d1_example1_business_la_ny.json",
    ):
        turns = verify_solution(load_solution(path))
        logins = [c for t in turns for c in t.calls if c.tool in ("posting_login", "authenticate_travel")]
        assert logins and any(k in logins[0].arguments for k in ("password", "client_secret"))  # the tool got it
        for result in turns:
            assert not {"password", "client_secret", "refresh_token"} & set(result.scratchpad)
