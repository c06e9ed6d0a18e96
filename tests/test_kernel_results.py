"""Call results in S and same-turn binding (issue 15, part 2; docs/kernel.md "Results in S" and "Same-turn binding").

A minimal messaging/trading domain with no declared writes at all, as an imported registry has none:
every value a later call needs reaches S only as a result entry "<tool>.<field>" or an argument.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from forethought.kernel.backends.oracle import OracleBackend
from forethought.kernel.domains.base import Domain, ToolError
from forethought.kernel.environment import Environment
from forethought.kernel.program import Kernel
from forethought.kernel.records import KernelConfig
from forethought.kernel.scenario import Turn
from forethought.kernel.scratchpad import Scratchpad, is_truncated
from forethought.kernel.specs import MATCH_FILL, MatchFillInput, MatchFillOutput, TaskRef, ToolBrief


class DeskState(BaseModel):
    users: dict[str, str] = Field(default_factory=lambda: {"Alice": "U1", "Bob": "U2"})
    symbols: dict[str, str] = Field(default_factory=lambda: {"Apple": "AAPL", "Tesla": "TSLA", "Microsoft": "MSFT"})
    sent: list[dict[str, str]] = Field(default_factory=list)
    orders: list[dict[str, Any]] = Field(default_factory=list)
    posts: list[str] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=lambda: {"todo.txt": "pears\napples\nfigs", "big.txt": "x" * 5000})


DESK = Domain("desk_test", DeskState)


@DESK.tool()
def lookup_user(state: DeskState, user: str) -> dict:
    """Look up a user's id by name.

    Args:
        user: The user's name.
    """
    if user not in state.users:
        raise ToolError(f"no user {user!r}")
    return {"user": user, "user_id": state.users[user]}


@DESK.tool(side_effect=True)
def message(state: DeskState, receiver_id: str, text: str) -> dict:
    """Send a message to a user id.

    Args:
        receiver_id: The receiver's user id.
        text: The message.
    """
    state.sent.append({"to": receiver_id, "text": text})
    return {"sent": True}


@DESK.tool()
def symbol_of(state: DeskState, name: str) -> dict:
    """The stock symbol of a company.

    Args:
        name: Company name.
    """
    return {"symbol": state.symbols[name]}


@DESK.tool(side_effect=True)
def trade(state: DeskState, side: str, symbol: str, amount: int) -> dict:
    """Buy or sell shares.

    Args:
        side: Buy or Sell.
        symbol: Stock symbol.
        amount: Number of shares.
    """
    state.orders.append({"side": side, "symbol": symbol, "amount": amount})
    return {"order_id": len(state.orders)}


@DESK.tool()
def sort_file(state: DeskState, file_name: str) -> dict:
    """Sort a file's lines.

    Args:
        file_name: The file.
    """
    return {"sorted_content": "\n".join(sorted(state.files[file_name].splitlines()))}


@DESK.tool()
def read_file(state: DeskState, file_name: str) -> dict:
    """Read a file.

    Args:
        file_name: The file.
    """
    return {"file_content": state.files[file_name]}


@DESK.tool(side_effect=True)
def post(state: DeskState, content: str) -> dict:
    """Post a text.

    Args:
        content: The text.
    """
    state.posts.append(content)
    return {"posted": True}


@DESK.tool(side_effect=True)
def grant(state: DeskState, app: str, permission: Literal["sms", "storage", "camera"]) -> dict:
    """Grant an app a permission.

    Args:
        app: The app.
        permission: The permission.
    """
    return {"granted": f"{app}:{permission}"}


KERNEL = Kernel(KernelConfig(strict_invariants=True))


def run_turns(turns: list[dict[str, Any]], kernel: Kernel = KERNEL):
    env = Environment([DESK], {"desk_test": {}})
    scratchpad = Scratchpad()
    results = []
    for i, raw in enumerate(turns):
        annotated = Turn.model_validate({"calls": [], **raw})
        res, _ = kernel.run_turn(
            user=annotated.user,
            env=env,
            scratchpad=scratchpad,
            registry=env.registry(),
            backend=OracleBackend(annotated, "test"),
            turn_context=annotated.context,
            index=i,
        )
        assert not res.invariant_violations and res.halted is None, (res.invariant_violations, res.halted)
        results.append(res)
    return results, env.states["desk_test"], scratchpad


def task(tid: str, tool: str, text: str = "do it", **kw: Any) -> dict[str, Any]:
    return {"id": tid, "text": text, "tool": tool, **kw}


def tau(value: Any) -> dict[str, Any]:
    return {"source": "request", "value": value}


MESSAGE_ALICE = {
    "user": "Look up Alice and message her: hi",
    "tasks": [
        task("t1", "lookup_user", parameters={"user": "Alice"}, bindings={"user": tau("Alice")}),
        task(
            "t2",
            "message",
            depends_on=["t1"],
            parameters={"text": "hi"},
            bindings={
                "receiver_id": {"source": "fill", "value": "U1", "fill_from": "scratchpad:lookup_user.user_id"},
                "text": tau("hi"),
            },
        ),
    ],
    "order": ["t1", "t2"],
}


def test_a_result_enters_S_under_its_tools_namespace_without_declared_writes():
    (res,), _, scratchpad = run_turns([MESSAGE_ALICE])
    assert scratchpad.get("lookup_user.user_id") == "U1" and scratchpad.get("lookup_user.user") == "Alice"
    assert scratchpad.get("message.sent") is True
    assert (
        scratchpad.last_source("lookup_user.user_id") == "result:lookup_user"
        and scratchpad.last_source("receiver_id") == "call:message"
    )
    # the receiver id had no name to be looked up by: match_fill read it from the result entry in its view
    assert res.bindings["t2"]["receiver_id"].source == "fill"


def test_messaging_a_second_person_binds_the_id_just_looked_up_not_the_first_persons():
    """The issue's bug: S's receiver_id is Alice's (the earlier message's argument). The message to Bob depends on
    the lookup of Bob, so that older argument of the same tool is not reused: match_fill binds Bob's id."""
    second = {
        "user": "Now look up Bob and message him: hello",
        "tasks": [
            task("t1", "lookup_user", parameters={"user": "Bob"}, bindings={"user": tau("Bob")}),
            task(
                "t2",
                "message",
                depends_on=["t1"],
                parameters={"text": "hello"},
                bindings={
                    "receiver_id": {"source": "fill", "value": "U2", "fill_from": "scratchpad:lookup_user.user_id"},
                    "text": tau("hello"),
                },
            ),
        ],
        "order": ["t1", "t2"],
    }
    (_, res), world, scratchpad = run_turns([MESSAGE_ALICE, second])
    binding = res.bindings["t2"]["receiver_id"]
    assert (binding.source, binding.value, binding.shadowed_by) == ("fill", "U2", "receiver_id")
    assert binding.consulted == ["request", "dependencies", "scratchpad", "fill"]
    assert world.sent == [{"to": "U1", "text": "hi"}, {"to": "U2", "text": "hello"}]


def test_without_a_dependency_the_same_tools_earlier_argument_is_still_S():
    """Cross-turn state is unchanged: 'message her again' binds the receiver from S (INV-L: τ, then S)."""
    again = {
        "user": "Message her again: bye",
        "tasks": [
            task(
                "t1",
                "message",
                parameters={"text": "bye"},
                bindings={"receiver_id": {"source": "scratchpad", "value": "U1"}, "text": tau("bye")},
            )
        ],
        "order": ["t1"],
    }
    (_, res), world, _ = run_turns([MESSAGE_ALICE, again])
    assert res.bindings["t1"]["receiver_id"].source == "scratchpad" and world.sent[-1] == {"to": "U1", "text": "bye"}


def _two_symbols_then_sell(order: list[str], sell_from: str) -> dict[str, Any]:
    return {
        "user": "Look up Tesla's and Microsoft's symbols and sell 5 Microsoft",
        "tasks": [
            task("t1", "symbol_of", parameters={"name": "Tesla"}, bindings={"name": tau("Tesla")}),
            task("t2", "symbol_of", parameters={"name": "Microsoft"}, bindings={"name": tau("Microsoft")}),
            task(
                "t3",
                "trade",
                depends_on=[sell_from],
                parameters={"side": "Sell", "amount": 5},
                bindings={
                    "side": tau("Sell"),
                    "amount": tau(5),
                    "symbol": {"source": "fill", "value": "MSFT", "fill_from": "scratchpad:symbol_of.symbol"},
                },
            ),
        ],
        "order": order,
    }


BUY_APPLE = {
    "user": "Buy 10 AAPL",
    "tasks": [
        task(
            "t1",
            "trade",
            parameters={"side": "Buy", "symbol": "AAPL", "amount": 10},
            bindings={"side": tau("Buy"), "symbol": tau("AAPL"), "amount": tau(10)},
        )
    ],
    "order": ["t1"],
}


def test_two_lookups_then_a_sale_bind_the_symbol_of_the_lookup_the_sale_depends_on():
    """S's symbol is the buy's (an argument of trade, so not reused) and symbol_of's result entry was last written by
    the Tesla lookup, which ran after the Microsoft one: the sale's view shows its dependency's entry as it wrote it."""
    (_, res), world, scratchpad = run_turns([BUY_APPLE, _two_symbols_then_sell(["t2", "t1", "t3"], "t2")])
    assert scratchpad.get("symbol_of.symbol") == "TSLA"  # what S holds now: the later, unrelated lookup
    binding = res.bindings["t3"]["symbol"]
    assert (binding.source, binding.value, binding.shadowed_by) == ("fill", "MSFT", "symbol_of.symbol")
    assert world.orders[-1] == {"side": "Sell", "symbol": "MSFT", "amount": 5}


def test_a_dependencys_argument_binds_by_name_newest_first():
    """A dependency's own entry under the parameter's name (its argument or declared write) binds directly, as that
    call wrote it; of two dependencies that both wrote it, the later commit wins."""
    turn = {
        "user": "Buy 1 TSLA, then buy 2 MSFT, then sell 3 of the last one",
        "tasks": [
            task(
                "t1",
                "trade",
                parameters={"side": "Buy", "symbol": "TSLA", "amount": 1},
                bindings={"side": tau("Buy"), "symbol": tau("TSLA"), "amount": tau(1)},
            ),
            task(
                "t2",
                "trade",
                depends_on=["t1"],
                parameters={"side": "Buy", "symbol": "MSFT", "amount": 2},
                bindings={"side": tau("Buy"), "symbol": tau("MSFT"), "amount": tau(2)},
            ),
            task(
                "t3",
                "trade",
                depends_on=["t1", "t2"],
                parameters={"side": "Sell", "amount": 3},
                bindings={"side": tau("Sell"), "amount": tau(3), "symbol": {"source": "scratchpad", "value": "MSFT"}},
            ),
        ],
        "order": ["t1", "t2", "t3"],
    }
    (res,), world, _ = run_turns([turn])
    assert res.bindings["t3"]["symbol"].consulted == ["request", "dependencies"]
    assert world.orders[-1] == {"side": "Sell", "symbol": "MSFT", "amount": 3}


def test_a_value_decompose_copied_from_S_does_not_shadow_a_fresh_result():
    """Decompose stated symbol='AAPL' for the sale, a value it could only take from the state view (the request names
    no symbol): the lookup the sale depends on produced a symbol field, so the copy does not bind."""
    turn = _two_symbols_then_sell(["t1", "t2", "t3"], "t2")
    turn["tasks"][2]["parameters"]["symbol"] = "AAPL"
    (_, res), world, _ = run_turns([BUY_APPLE, turn])
    binding = res.bindings["t3"]["symbol"]
    assert (binding.source, binding.value, binding.shadowed_by) == ("fill", "MSFT", "symbol_of.symbol")
    assert world.orders[-1]["symbol"] == "MSFT"


def test_a_value_the_user_stated_still_wins_over_a_fresh_result():
    """INV-L for what the user actually said: the request names TSLA, so τ binds it although the dependency's
    result holds another symbol."""
    turn = _two_symbols_then_sell(["t1", "t2", "t3"], "t2")
    turn["user"] = "Look up Tesla's and Microsoft's symbols and sell 5 TSLA"
    turn["tasks"][2]["parameters"]["symbol"] = "TSLA"
    turn["tasks"][2]["bindings"]["symbol"] = tau("TSLA")
    (_, res), world, _ = run_turns([BUY_APPLE, turn])
    assert res.bindings["t3"]["symbol"].consulted == ["request"] and world.orders[-1]["symbol"] == "TSLA"


def test_a_sort_result_is_posted_by_a_later_call():
    turn = {
        "user": "Sort todo.txt and post the result",
        "tasks": [
            task("t1", "sort_file", parameters={"file_name": "todo.txt"}, bindings={"file_name": tau("todo.txt")}),
            task(
                "t2",
                "post",
                depends_on=["t1"],
                bindings={
                    "content": {
                        "source": "fill",
                        "value": "apples\nfigs\npears",
                        "fill_from": "scratchpad:sort_file.sorted_content",
                    }
                },
            ),
        ],
        "order": ["t1", "t2"],
    }
    (res,), world, scratchpad = run_turns([turn])
    assert world.posts == ["apples\nfigs\npears"]
    assert scratchpad.get("sort_file.sorted_content") == "apples\nfigs\npears"


def test_a_long_result_field_is_a_marker_shown_but_never_bound():
    turn = {
        "user": "Read big.txt",
        "tasks": [task("t1", "read_file", parameters={"file_name": "big.txt"}, bindings={"file_name": tau("big.txt")})],
        "order": ["t1"],
    }
    (_,), _, scratchpad = run_turns([turn])
    marker = scratchpad.get("read_file.file_content")
    assert is_truncated(marker) and marker["$truncated"] == 5002 and len(marker["preview"]) == 121
    # match_fill may not propose a value that only a preview shows: the grounding contract refuses it
    brief = ToolBrief(name="post", params={"content": "string"}, required=["content"])
    inp = MatchFillInput(
        task=TaskRef(id="t2", text="post it"), tool=brief, missing=["content"], state={"read_file.file_content": marker}
    )
    grounded = next(c for c in MATCH_FILL.checks if c.name == "values_grounded")
    assert "content='xxxxxxxxxx'" in grounded.fn(inp, MatchFillOutput(values={"content": "xxxxxxxxxx"}))
    # ... and the cap is the kernel's setting
    (_,), _, scratchpad = run_turns([turn], Kernel(KernelConfig(strict_invariants=True, result_entry_max_chars=10_000)))
    assert scratchpad.get("read_file.file_content") == "x" * 5000


def test_the_state_view_budgets_result_entries_apart_and_shows_a_tasks_dependencies():
    scratchpad = Scratchpad({"authenticated": True})
    for i in range(30):
        scratchpad.set(f"tool{i}.field", i, f"result:tool{i}")
    scratchpad.set("symbol", "AAPL", "call:trade")
    view = scratchpad.view(2, 3)
    assert view == {"tool27.field": 27, "tool28.field": 28, "tool29.field": 29, "authenticated": True, "symbol": "AAPL"}
    # a dependency's entry overlays S's value and counts as the most recent
    assert list(scratchpad.view(2, 3, {"tool3.field": 99})) == [
        "authenticated",
        "tool28.field",
        "tool29.field",
        "symbol",
        "tool3.field",
    ]
    assert scratchpad.view(2, 3, {"tool3.field": 99})["tool3.field"] == 99


def test_INV_S_holds_when_a_later_call_rewrites_a_result_entry():
    """Result entries are overwritten by the next call of the same tool; no key is ever removed."""
    results, _, scratchpad = run_turns([BUY_APPLE, _two_symbols_then_sell(["t1", "t2", "t3"], "t2")])
    assert all(not r.invariant_violations for r in results)
    assert {"symbol_of.symbol", "trade.order_id", "symbol", "side", "amount"} <= scratchpad.keys()
    assert scratchpad.get("trade.order_id") == 2


def test_a_value_decompose_proposed_afresh_is_not_shadowed_by_a_dependencys_argument():
    """Decompose's permission='storage' is in neither the request nor S (an enum value of the tool): nothing earlier
    produced it, so the dependency's own argument permission='sms' must not replace it (tau2 telecom's
    grant-both-permissions fix, where the second grant repeated the first)."""
    turn = {
        "user": "Give the messaging app the permissions it needs",
        "tasks": [
            task(
                "t1",
                "grant",
                parameters={"app": "messaging", "permission": "sms"},
                bindings={"app": tau("messaging"), "permission": tau("sms")},
            ),
            task(
                "t2",
                "grant",
                depends_on=["t1"],
                parameters={"app": "messaging", "permission": "storage"},
                bindings={"app": tau("messaging"), "permission": tau("storage")},
            ),
        ],
        "order": ["t1", "t2"],
    }
    (res,), _, scratchpad = run_turns([turn])
    assert [c.arguments["permission"] for c in res.committed_calls] == ["sms", "storage"]
    assert (
        res.bindings["t2"]["permission"].consulted == ["request"]
        and scratchpad.get("grant.granted") == "messaging:storage"
    )
