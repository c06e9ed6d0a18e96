"""``forethought demo-dsl [out=PATH]``: the DSL in one screen.

A two-step reasoning program: an SLM primitive extracts the cities of a travel
request, under a contract (every city must occur in the request; at least one
city), and a symbolic primitive turns them into a route. The model here is a
**scripted stand-in** (no weights are loaded): its first answer names a city
that is not in the request, the engine catches the value violation, retries
with the violation fed back into the prompt, and the second answer passes.

Prints the output and the per-step trace as a table and writes the trace as
JSONL to ``out`` (default ``runs/dsl_demo/trace.jsonl``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence as Seq
from pathlib import Path

from pydantic import BaseModel

from forethought.errors import UserError
from forethought.primitives import (
    Contract,
    Engine,
    Program,
    Sequence,
    SLMReply,
    SLMRequest,
    Step,
    Trace,
    check,
    slm,
    symbolic,
)

DEFAULT_OUT = "runs/dsl_demo/trace.jsonl"
REQUEST = "I want to fly from Paris to Rome next week"


class Request(BaseModel):
    text: str


class Cities(BaseModel):
    cities: list[str]


class Route(BaseModel):
    legs: list[str]


# ----------------------------------------------------------------- primitives
in_request = check("cities_in_request")(
    lambda req, out: (
        all(c in req.text for c in out.cities)
        or f"not in the request: {', '.join(c for c in out.cities if c not in req.text)}"
    )
)
some_city = check("at_least_one_city", "semantic")(lambda req, out: bool(out.cities) or "no city extracted")


def render(inp: Request, feedback: Seq[str]) -> list[dict[str, str]]:
    msgs = [
        {"role": "system", "content": 'Extract the cities from the request. Answer JSON: {"cities": [...]}'},
        {"role": "user", "content": inp.text},
    ]
    if feedback:
        msgs.append({"role": "user", "content": "Your previous answer was rejected: " + "; ".join(feedback)})
    return msgs


extract_cities = slm(
    "extract_cities", Request, Cities, Contract(value=[in_request], semantic=[some_city]), render=render
)

one_leg_per_hop = check("one_leg_per_hop")(
    lambda cities, route: len(route.legs) == max(len(cities.cities) - 1, 0) or "wrong number of legs"
)
plan_route = symbolic(
    "plan_route",
    lambda c: Route(legs=[f"{a} -> {b}" for a, b in zip(c.cities, c.cities[1:], strict=False)]),
    Cities,
    Route,
    Contract(value=[one_leg_per_hop]),
)

PROGRAM = Program(
    Sequence(Step(extract_cities, retries=1), plan_route, label="travel"), name="dsl_demo", max_slm_calls=2
)


class ScriptedBackend:
    """SCRIPTED stand-in for a fine-tuned SLM: fixed answers, no model.

    The first answer hallucinates "Berlin"; once the violation is fed back the
    answer is corrected. Every request it received is kept in ``requests``.
    """

    name = "scripted-demo"

    def __init__(self) -> None:
        self.requests: list[SLMRequest] = []

    def complete(self, requests: list[SLMRequest]) -> list[SLMReply]:
        self.requests.extend(requests)
        replies = []
        for request in requests:
            cities = ["Paris", "Rome"] if request.feedback else ["Paris", "Berlin", "Rome"]
            replies.append(SLMReply(json.dumps({"cities": cities}), {"backend": self.name, "model": "scripted"}))
        return replies


# ----------------------------------------------------------------- display
def _short(obj, width: int = 60) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def trace_table(trace: Trace):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"trace {trace.run_id}", show_lines=False)
    for col in ("#", "path", "primitive", "kind", "try", "action", "contract", "output"):
        table.add_column(col, overflow="fold")
    for record in trace:
        if record.ok:
            verdict = "[green]ok[/green]"
        else:
            verdict = (
                "[red]"
                + escape(
                    "; ".join(f"{v['level']}:{v['constraint']} ({v['message']})" for v in record.contract["violations"])
                )
                + "[/red]"
            )
        colour = {"accept": "green", "retry": "yellow"}.get(record.action, "red")
        table.add_row(
            str(record.seq),
            escape(record.path),
            escape(record.primitive),
            record.kind,
            str(record.attempt),
            f"[{colour}]{record.action}[/{colour}]",
            verdict,
            escape(_short(record.output)),
        )
    return table


def _parse_args(args: list[str]) -> Path | None:
    out = DEFAULT_OUT
    for arg in args:
        if arg in ("-h", "--help"):
            print("usage: forethought demo-dsl [out=PATH]\n\n" + (__doc__ or "").strip())
            return None
        key, eq, value = arg.partition("=")
        if eq and key == "out":
            if not value:
                raise UserError("out= needs a path", where="demo-dsl")
            out = value
        else:
            raise UserError(f"unknown argument {arg!r} (usage: forethought demo-dsl [out=PATH])", where="demo-dsl")
    # The trace's path is checked before the program runs: a run that cannot be written is refused, not wasted.
    from forethought.errors import check_output_dir

    path = Path(out)
    if path.is_dir():
        raise UserError(f"{path} is a folder; out= names the trace file to write", where="out")
    check_output_dir(path.parent, "out")
    return path


def cli(args: list[str]) -> int:
    out = _parse_args(list(args))
    if out is None:
        return 0
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=140)
    backend = ScriptedBackend()
    run = Engine(backend).run(PROGRAM, {"text": REQUEST}, run_id="dsl-demo")
    console.print(
        f"[bold]program[/bold] {PROGRAM.name}: extract_cities (SLM, scripted) -> plan_route (symbolic); "
        f"static bound {PROGRAM.max_slm_calls} SLM calls"
    )
    console.print(f"[bold]input[/bold]   {escape(repr(REQUEST))}")
    console.print(trace_table(run.trace))
    for request in backend.requests:
        if request.feedback:
            console.print(
                f"[bold]feedback seen by the model on retry[/bold]: {escape(request.messages[-1]['content'])}"
            )
    run.trace.write_jsonl(out)
    if not run.ok:
        console.print(f"[red]halted[/red]: {escape(str(run.error))}")
        return 1
    console.print(f"[bold]output[/bold]  {run.output.model_dump_json()}  ({run.slm_calls} SLM calls)")
    console.print(f"trace written to {out}")
    return 0
