"""Each domain's reference data is a file beside its tools (issue 26, point 5): ``kernel/domains/<name>/data.json``,
read through the package (never the current directory), checked by the domain's state model, which holds structure
only; a bad file is a located error naming it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from forethought.errors import UserError
from forethought.kernel.domain_data import DATA_FILE, data_file_of
from forethought.kernel.domains import available, domain_folders, load_domain
from forethought.kernel.domains.base import Domain, ReferenceData


@pytest.mark.parametrize("name", available())
def test_every_domain_reads_its_reference_data_from_the_file_beside_its_tools(name):
    domain = load_domain(name)
    model = domain.state_model
    assert issubclass(model, ReferenceData)
    path = data_file_of(model.__module__)
    assert path == domain_folders()[name] / DATA_FILE
    written = json.loads(path.read_text(encoding="utf-8"))
    assert set(written) == set(model.model_fields)  # every field of the state, nothing else
    # the model holds structure only: no field of the state has a default of its own
    assert [field for field, info in model.model_fields.items() if not info.is_required()] == []
    # a scenario that gives nothing starts from the file
    assert domain.load_state({}) == model.model_validate(written)


def test_the_reference_data_is_found_through_the_package_from_any_folder(tmp_path):
    code = (
        "from forethought.kernel.domains import load_domain\n"
        "state = load_domain('airline').load_state({})\n"
        "print(state.current_time, sorted(state.users))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2024-05-15T15:00:00", "['olivia_gray_2034',", "'raj_patel_5120']"]


def test_a_scenario_is_merged_over_the_reference_data():
    airline = load_domain("airline")
    reference = airline.load_state({})
    added = {"origin": "JFK", "destination": "BOS", "dates": {"2024-06-03": {}}}
    state = airline.load_state({"flights": {"HAT999": added}, "current_time": "2024-06-01T09:00:00"})
    assert set(state.flights) == set(reference.flights) | {"HAT999"}  # a merged table: the file's entries stay
    assert state.current_time == "2024-06-01T09:00:00"  # any other field given replaces the file's
    assert state.users == reference.users
    trading = load_domain("trading")
    account = trading.load_state(
        {"account": {"balance": 5.0}}
    ).account  # a record given in part: the rest from the file
    assert (account.balance, account.username) == (5.0, trading.load_state({}).account.username)
    # states own their data: changing one changes neither the file's values nor the next state
    reference.users["olivia_gray_2034"].reservations.append("ZZZZZZ")
    assert "ZZZZZZ" not in airline.load_state({}).users["olivia_gray_2034"].reservations


_STATE_MODULE = """
from pydantic import BaseModel, ConfigDict

from forethought.kernel.domains.base import ReferenceData


class Flight(BaseModel):
    model_config = ConfigDict(extra="forbid")
    origin: str
    seats: int


class Desk(ReferenceData):
    data_section = ("desk",)
    open: bool


class ToyState(ReferenceData):
    model_config = ConfigDict(extra="forbid")
    merged_tables = ("flights",)
    flights: dict[str, Flight]
    desk: Desk
"""


def _toy_model(tmp_path: Path, data: str | None, name: str) -> type[ReferenceData]:
    """A domain state module in a folder of its own, with ``data`` as the data file beside it (None: no file)."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "state.py").write_text(_STATE_MODULE, encoding="utf-8")
    if data is not None:
        (folder / DATA_FILE).write_text(data, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_reference_data_{name}", folder / "state.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ToyState


GOOD = {"flights": {"F1": {"origin": "JFK", "seats": 3}}, "desk": {"open": True}}


def test_a_domain_of_yours_reads_its_data_file_and_merges_a_scenario_over_it(tmp_path):
    model = _toy_model(tmp_path, json.dumps(GOOD), "good")
    domain = Domain("toy", model)
    state = domain.load_state({"flights": {"F2": {"origin": "BOS", "seats": 1}}, "desk": {}})
    assert sorted(state.flights) == ["F1", "F2"] and state.desk.open is True


@pytest.mark.parametrize(
    "data, message",
    [
        (None, "the domain's reference data file is missing"),
        ('{"flights": {', "line 1, column 14"),
        ("[1, 2]", "must hold a JSON object"),
        (json.dumps({**GOOD, "flights": {"F1": {"origin": "JFK", "seats": "many"}}}), "flights.F1.seats:"),
        (json.dumps({"flights": {}}), "desk: Field required"),
        (json.dumps({**GOOD, "gates": {}}), "gates: Extra inputs are not permitted"),
    ],
    ids=["missing", "not-json", "not-an-object", "wrong-type", "field-missing", "unknown-field"],
)
def test_a_bad_data_file_is_refused_naming_the_file_and_where(data, message, tmp_path):
    name = f"bad_{tmp_path.name}"
    model = _toy_model(tmp_path, data, name)
    with pytest.raises(UserError) as refused:
        Domain("toy", model)  # checked when the domain is made, before any scenario runs
    assert refused.value.where == str((tmp_path / name / DATA_FILE).resolve())
    assert message in str(refused.value)


def test_a_record_without_its_section_in_the_file_is_refused(tmp_path):
    model = _toy_model(tmp_path, json.dumps({"flights": {}}), "no_section")
    desk = model.model_fields["desk"].annotation
    with pytest.raises(UserError, match=r"desk: missing or not an object \(the fields of Desk\)"):
        desk.reference_data()
