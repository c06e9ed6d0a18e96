"""kernel/specs.py is the registry: per-primitive behaviour lives on each PrimitiveSpec (issue 14)."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from forethought.kernel.backends.noisy import NoisyOracle
from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.scenario import Turn
from forethought.kernel.specs import (
    MAX_TASKS,
    PRIMITIVE_NAMES,
    SPECS,
    DecomposeInput,
    ToolBrief,
    default_sizes,
    default_thresholds,
    get_spec,
    register_spec,
    registered,
)
from forethought.primitives import SLMRequest


def _like_match_func(name, **changes):
    """A copy of match_func under another name (its golden cases copied, so it can be registered)."""
    spec = SPECS["match_func"]
    golden = tuple({"input": i.model_dump(mode="json"), "target": t.model_dump(mode="json")} for i, t in spec.golden())
    return replace(spec, name=name, golden_cases=golden, **changes)


TOOLS = [ToolBrief(name="ls"), ToolBrief(name="cd", params={"folder": "string"}, required=["folder"])]
TURN = Turn.model_validate(
    {
        "user": "go to docs and list it",
        "tasks": [
            {"id": "t1", "text": "cd docs", "tool": "cd", "parameters": {"folder": "docs"}},
            {"id": "t2", "text": "list", "tool": "ls", "depends_on": ["t1"]},
        ],
        "order": ["t1", "t2"],
        "calls": ["cd(folder='docs')", "ls()"],
    }
)


def test_the_five_primitives_are_registered_in_order_and_names_are_live():
    assert PRIMITIVE_NAMES == ("decompose", "get_order", "check_prerequisites", "match_func", "match_fill")
    assert tuple(PRIMITIVE_NAMES) == tuple(SPECS) and "decompose" in PRIMITIVE_NAMES and len(PRIMITIVE_NAMES) == 5
    toy = _like_match_func("toy_probe")
    with registered(toy):
        assert PRIMITIVE_NAMES[-1] == "toy_probe" and len(PRIMITIVE_NAMES) == 6
        assert default_sizes()["toy_probe"] == toy.default_size
    assert "toy_probe" not in PRIMITIVE_NAMES


def test_defaults_come_from_the_specs():
    # The paper's Table 4 sizes and gates a little under its Table 5 exact match.
    assert default_sizes() == {
        "decompose": 6910,
        "get_order": 2000,
        "check_prerequisites": 4867,
        "match_func": 1600,
        "match_fill": 1125,
    }
    assert default_thresholds() == {
        "decompose": 0.90,
        "get_order": 0.98,
        "check_prerequisites": 0.85,
        "match_func": 0.95,
        "match_fill": 0.90,
    }


def test_decompose_schema_bounds_tasks_by_the_configured_fan_out():
    spec, inp = SPECS["decompose"], DecomposeInput(user="u", tools=TOOLS)
    assert spec.decoding_schema(inp)["properties"]["tasks"]["maxItems"] == MAX_TASKS
    assert spec.decoding_schema(inp, max_tasks=3)["properties"]["tasks"]["maxItems"] == 3
    prim = spec.primitive(max_tasks=5)
    assert prim.request(inp).json_schema["properties"]["tasks"]["maxItems"] == 5


def test_the_oracle_answers_through_the_spec_and_refuses_an_unknown_primitive():
    oracle = OracleBackend(TURN, "t")
    ans = oracle.answer("decompose", DecomposeInput(user=TURN.user, tools=TOOLS))
    assert [t["id"] for t in ans["tasks"]] == ["t1", "t2"] and ans["tasks"][1]["depends_on"] == ["t1"]
    with pytest.raises(KeyError, match="unknown primitive 'decompos'"):
        oracle.answer("decompos", None)


def test_noisy_oracle_injects_only_declared_kinds_and_refuses_what_it_cannot_corrupt():
    inp = DecomposeInput(user=TURN.user, tools=TOOLS)
    noisy = NoisyOracle(OracleBackend(TURN, "t"), {"decompose": 1.0}, random.Random(0))
    req = SLMRequest("decompose", inp, [], adapter="decompose")
    for _ in range(40):
        (rep,) = noisy.complete([req])
        assert rep.model["injected"] in (*SPECS["decompose"].noise_kinds, "truncated_json", "empty")
    # An unknown primitive, or one whose spec declares no noise kinds, is an error, never a silent "{}".
    with pytest.raises(KeyError, match="unknown primitive 'toy'"):
        NoisyOracle(OracleBackend(TURN, "t"), {"toy": 0.5}, random.Random(0))
    quiet = _like_match_func("quiet", noise_kinds=(), corrupt=None)
    with registered(quiet):
        with pytest.raises(ValueError, match="cannot corrupt 'quiet'"):
            NoisyOracle(OracleBackend(TURN, "t"), {"quiet": 0.5}, random.Random(0))
        NoisyOracle(OracleBackend(TURN, "t"), {"quiet": 0.0}, random.Random(0))  # never corrupted: fine


def test_a_bad_spec_is_refused_with_every_problem():
    bad = replace(SPECS["match_func"], name="all", default_size=-1, gate_threshold=1.5, corrupt=None)
    with pytest.raises(ValueError) as ei:
        register_spec(bad)
    msg = str(ei.value)
    assert "reserved" in msg and "default_size" in msg and "gate_threshold" in msg and "noise_kinds and corrupt" in msg
    with pytest.raises(ValueError, match="already registered"):
        register_spec(replace(SPECS["match_func"], name="decompose"))
    with pytest.raises(ValueError, match="no golden cases"):
        register_spec(replace(SPECS["match_func"], name="ungolden"))
    assert "ungolden" not in SPECS and get_spec("match_func") is SPECS["match_func"]


def test_decoding_schemas_are_json():
    for name in PRIMITIVE_NAMES:
        for inp, _ in SPECS[name].golden():
            json.dumps(SPECS[name].decoding_schema(inp))


# ------------------------------------------------------------ config tables
def test_conf_tables_name_registered_primitives_with_their_spec_defaults():
    """The conf tables are a visible copy of the specs' defaults (so `data.sizes.decompose=N` is an override)."""
    import yaml

    from forethought.config import CONF_DIR

    sizes = yaml.safe_load((CONF_DIR / "data" / "default.yaml").read_text())["sizes"]
    thresholds = yaml.safe_load((CONF_DIR / "validate.yaml").read_text())["thresholds"]
    assert sizes == {p: default_sizes()[p] for p in sizes} and set(sizes) <= set(PRIMITIVE_NAMES)
    assert thresholds == {p: default_thresholds()[p] for p in thresholds} and set(thresholds) <= set(PRIMITIVE_NAMES)


def test_a_conf_table_naming_an_unknown_primitive_is_a_located_error(tmp_path):
    import shutil

    from forethought.config import CONF_DIR, ConfigError, compose_and_validate
    from forethought.data_gen.generate import GenerateConfig

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    defaults = conf / "data" / "default.yaml"
    defaults.write_text(defaults.read_text().replace("  match_fill: 1125", "  match_fil: 1125"))
    with pytest.raises(ConfigError) as ei:
        compose_and_validate("generate", [], GenerateConfig, conf_dir=conf)
    msg = str(ei.value)
    assert "conf/data/default.yaml: sizes.match_fil: not a registered primitive (did you mean 'match_fill'?)" in msg
    assert "data.sizes.match_fil.[key]: Input should be 'decompose'" in msg  # and the schema's own error


def test_a_size_or_threshold_not_named_is_the_specs_default_never_zero():
    from forethought.data_gen.generate import DataConfig
    from forethought.training.validate import ValidateConfig

    data_config = DataConfig(solutions=["x"], output_dir="y", sizes={"decompose": 5})
    assert data_config.sizes == {**default_sizes(), "decompose": 5} and list(data_config.sizes) == list(PRIMITIVE_NAMES)
    validate_config = ValidateConfig(thresholds={"get_order": 0.5})
    assert validate_config.thresholds == {**default_thresholds(), "get_order": 0.5}
    toy = _like_match_func("toy_probe", default_size=7, gate_threshold=0.25)
    with registered(toy):
        assert DataConfig(solutions=["x"], output_dir="y").sizes["toy_probe"] == 7
        assert ValidateConfig().thresholds["toy_probe"] == 0.25 and ValidateConfig(
            primitives="toy_probe"
        ).selected() == ["toy_probe"]


def test_config_types_accept_exactly_the_registered_names():
    from pydantic import ValidationError

    from forethought.config import compose_and_validate
    from forethought.training.config import TrainConfig

    def load_config(command, overrides, schema):
        return compose_and_validate(command, overrides, schema)[1]

    assert load_config("train", ["primitive=base"], TrainConfig).primitives() == []
    with pytest.raises(Exception) as ei:
        load_config("train", ["primitive=toy_probe"], TrainConfig)
    assert (
        "primitive: Input should be 'decompose', 'get_order', 'check_prerequisites', 'match_func', 'match_fill', 'all' or 'base'"
        in str(ei.value)
    )
    with registered(_like_match_func("toy_probe")):
        assert load_config("train", ["primitive=toy_probe"], TrainConfig).primitives() == ["toy_probe"]
        assert load_config("train", [], TrainConfig).primitives()[-1] == "toy_probe"  # primitive=all
    from forethought.data_gen.generate import DataConfig

    with pytest.raises(ValidationError):
        DataConfig(solutions=["x"], output_dir="y", sizes={"toy_probe": 1})


# --------------------------------------------------- task-graph checks, once
def test_annotations_and_answers_are_held_to_the_same_task_graph_checks():
    from forethought.data_gen.verify import Divergence, static_checks
    from forethought.kernel.scenario import Solution
    from forethought.kernel.specs import (
        DecomposeOutput,
        GetOrderInput,
        GetOrderOutput,
        TaskRef,
        permutation_problem,
        task_ids_problem,
    )

    tasks = [{"id": "t1", "text": "a", "tool_name": None, "depends_on": ["t1"]}]
    contract = SPECS["decompose"].check_output(
        DecomposeInput(user="u", tools=TOOLS), DecomposeOutput.model_validate({"tasks": tasks})
    )
    assert contract.violations[0].message == task_ids_problem(contract.output.tasks) == "task t1 depends on itself"
    with pytest.raises(ValueError, match="task t1 depends on itself"):
        Turn.model_validate(
            {
                "user": "u",
                "tasks": [{"id": "t1", "text": "a", "tool": None, "depends_on": ["t1"]}],
                "order": ["t1"],
                "calls": [],
            }
        )
    batch = GetOrderInput(user="u", tasks=[TaskRef(id="t1", text="a"), TaskRef(id="t2", text="b")])
    verdict = SPECS["get_order"].check_output(batch, GetOrderOutput(ordered_task_ids=["t2"]))
    assert verdict.violations[0].message == permutation_problem(["t1", "t2"], ["t2"])
    sol = Solution.model_validate(
        {"id": "s", "domains": ["file_system"], "turns": [TURN.model_dump() | {"order": ["t2"]}]}
    )
    with pytest.raises(Divergence) as ei:
        static_checks(sol, tags=False)
    assert ei.value.step == "get_order" and ei.value.message == "order " + permutation_problem(["t1", "t2"], ["t2"])
