"""Safe parsing and formatting of tool-call strings."""

from __future__ import annotations

import keyword
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from forethought.kernel.registry.callparse import (
    Call,
    CallParseError,
    format_call,
    format_calls,
    parse_call,
    parse_calls,
    parse_literal,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cd(folder='document')", ("cd", {"folder": "document"})),
        (
            "f(a=1, b='x', c=[1, 2], d={'k': None}, e=True)",
            ("f", {"a": 1, "b": "x", "c": [1, 2], "d": {"k": None}, "e": True}),
        ),
        ("mod.f(x=-1.5)", ("mod.f", {"x": -1.5})),
        ("a.b.c()", ("a.b.c", {})),
        (
            "f(t=(1, 'a'), s={3, 1, 3}, p=+2, n=None, f=False)",
            ("f", {"t": [1, "a"], "s": [3, 1], "p": 2, "n": None, "f": False}),
        ),
        ("f(s='a' 'b', u='\\u00e9')", ("f", {"s": "ab", "u": "é"})),
        ("  book(from='SFO', to='JFK', class='economy')  ", ("book", {"from": "SFO", "to": "JFK", "class": "economy"})),
        ("f(\n    a=1,\n    b=[\n        'x',\n    ],\n)", ("f", {"a": 1, "b": ["x"]})),
        ("f(x=1e3, y=-0, z=[])", ("f", {"x": 1000.0, "y": 0, "z": []})),
    ],
)
def test_parse_call(text, expected):
    call = parse_call(text)
    assert isinstance(call, Call)
    assert call == expected
    assert (call.name, call.args) == expected


def test_parse_calls_forms():
    assert parse_calls("[f(a=1), g(b='x')]") == [("f", {"a": 1}), ("g", {"b": "x"})]
    assert parse_calls("f(a=1)") == [("f", {"a": 1})]
    assert parse_calls("[]") == []
    # BFCL's list of call strings: as text, or as a Python list.
    assert parse_calls('["cd(folder=\'document\')", "ls(a=True)"]') == [
        ("cd", {"folder": "document"}),
        ("ls", {"a": True}),
    ]
    assert parse_calls(["cd(folder='document')", "ls()"]) == [("cd", {"folder": "document"}), ("ls", {})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f(a=g(1))", "argument 'a': a function call is not allowed in values (only literals) at column 5 in 'f(a=g(1))'"),
        ("f(a=x)", "argument 'a': bare name 'x' is not a literal (quote strings: 'x') at column 5 in 'f(a=x)'"),
        ("f(a=true)", "argument 'a': bare name 'true' is not a literal (did you mean True?) at column 5 in 'f(a=true)'"),
        ("f(1)", "positional arguments are not allowed; write name=value at column 3 in 'f(1)'"),
        ("f(a=1, *xs)", "positional arguments are not allowed; write name=value at column 8 in 'f(a=1, *xs)'"),
        ("f(**kw)", "**mapping arguments are not allowed; write name=value at column 3 in 'f(**kw)'"),
        ("f(a=os.environ)", "argument 'a': attribute access is not allowed in values (only literals) at column 5 in 'f(a=os.environ)'"),
        ("f(a=lambda: 1)", "argument 'a': a lambda is not allowed in values (only literals) at column 5 in 'f(a=lambda: 1)'"),
        ("f(a=f'{x}')", "argument 'a': an f-string is not allowed in values (only literals) at column 5 in \"f(a=f'{x}')\""),
        ("f(a=[i for i in y])", "argument 'a': a comprehension is not allowed in values (only literals) at column 5 in 'f(a=[i for i in y])'"),
        ("f(a=1 + 2)", "argument 'a': an operator expression is not allowed in values (only literals) at column 5 in 'f(a=1 + 2)'"),
        ("f(a=-x)", "argument 'a': a sign may only precede a number at column 5 in 'f(a=-x)'"),
        ("f(a=-True)", "argument 'a': a sign may only precede a number at column 5 in 'f(a=-True)'"),
        ("f(a=[1, open('x')])", "argument 'a': a function call is not allowed in values (only literals) at column 9 in \"f(a=[1, open('x')])\""),
        ("f(a={'k': v})", "argument 'a': bare name 'v' is not a literal (quote strings: 'v') at column 11 in \"f(a={'k': v})\""),
        ("f(a={**d})", "argument 'a': **mapping unpacking is not allowed at column 8 in 'f(a={**d})'"),
        ("f(a={1: 'x'})", "argument 'a': dict keys must be strings, got 1 at column 6 in \"f(a={1: 'x'})\""),
        ("f(a={'k': 1, 'k': 2})", "argument 'a': repeated dict key 'k' at column 14 in \"f(a={'k': 1, 'k': 2})\""),
        ("f(a=1, a=2)", "argument 'a' is repeated at column 8 in 'f(a=1, a=2)'"),
        ("f(a=b'x')", "argument 'a': bytes literals are not allowed at column 5 in \"f(a=b'x')\""),
        ("f(a=1j)", "argument 'a': complex literals are not allowed at column 5 in 'f(a=1j)'"),
        ("f(a=...)", "argument 'a': ellipsis literals are not allowed at column 5 in 'f(a=...)'"),
        ("f(a=1e999)", "argument 'a': non-finite number inf at column 5 in 'f(a=1e999)'"),
        ("f(a=x[0])", "argument 'a': subscripting is not allowed in values (only literals) at column 5 in 'f(a=x[0])'"),
        ("f(a=(y := 1))", "argument 'a': an assignment expression is not allowed in values (only literals) at column 6 in 'f(a=(y := 1))'"),
        ("__import__('os').system(c='ls')",
         "the called name must be a (dotted) identifier, found a function call at column 1 in \"__import__('os').system(c='ls')\""),
        ("f(a=1)(b=2)", "the called name must be a (dotted) identifier, found a function call at column 1 in 'f(a=1)(b=2)'"),
        ("f(a=1", "syntax error: '(' was never closed at column 2 in 'f(a=1'"),
        ("f(a=1); g()", "syntax error: invalid syntax at column 7 in 'f(a=1); g()'"),
        ("42", "expected a call like name(arg=value), got a literal value at column 1 in '42'"),
        ("", "empty call string"),
        ("  f(é=1, b=é)", "argument 'b': bare name 'é' is not a literal (quote strings: 'é') at column 12 in '  f(é=1, b=é)'"),
        ("f(from=1, b=x)", "argument 'b': bare name 'x' is not a literal (quote strings: 'x') at column 13 in 'f(from=1, b=x)'"),
        ("f(\n a=1,\n b=nope)", "argument 'b': bare name 'nope' is not a literal (quote strings: 'nope') at line 3, column 4 in 'f(\\n a=1,\\n b=nope)'"),
    ],
)  # fmt: skip
def test_rejects_unsafe_or_invalid(text, message):
    with pytest.raises(CallParseError) as info:
        parse_call(text)
    assert str(info.value) == message


def test_error_positions_are_attributes():
    with pytest.raises(CallParseError) as info:
        parse_call("  f(a=1,\n   b=g())")
    err = info.value
    assert (err.line, err.column) == (2, 6)
    assert err.message == "argument 'b': a function call is not allowed in values (only literals)"


def test_list_errors_name_the_element():
    with pytest.raises(CallParseError, match=r"^call #1: argument 'x': bare name 'y' .* at column 5 in 'g\(x=y\)'$"):
        parse_calls(["f(a=1)", "g(x=y)"])
    with pytest.raises(CallParseError, match=r"^call #0: expected a call string, got int$"):
        parse_calls([3])  # type: ignore[list-item]
    with pytest.raises(
        CallParseError,
        match=r"a list of calls may hold only calls \(or only call strings\), got a literal value at column 10",
    ):
        parse_calls("[f(a=1), 3]")
    with pytest.raises(CallParseError, match=r"expected a call or a list of calls, got a dict"):
        parse_calls("{'a': 1}")


def test_hostile_sizes_are_refused_not_crashing():
    with pytest.raises(CallParseError, match="too long"):
        parse_call("f(a='" + "x" * 200_000 + "')")
    with pytest.raises(CallParseError, match="nested deeper than 64"):
        parse_call("f(a=" + "[" * 80 + "]" * 80 + ")")
    with pytest.raises(CallParseError):
        parse_call("f(a=" + "[" * 5000 + "]" * 5000 + ")")
    with pytest.raises(CallParseError, match="expected a call string, got NoneType"):
        parse_call(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # names every provider accepts (^[a-zA-Z0-9_-]{1,64}$) that Python does not: the registry admits them, so the
        # kernel must read and write calls to them
        ("get-weather(city='Paris')", [("get-weather", {"city": "Paris"})]),
        ("3d_print(model='a-b(c)', n=2)", [("3d_print", {"model": "a-b(c)", "n": 2})]),
        ("[get-x(n=1), ls(), 3d(a=[1, 2])]", [("get-x", {"n": 1}), ("ls", {}), ("3d", {"a": [1, 2]})]),
        ('["get-x(n=1)", "ls()"]', [("get-x", {"n": 1}), ("ls", {})]),
        ("  get-x(\n  from='SFO',\n)", [("get-x", {"from": "SFO"})]),
    ],
)
def test_provider_tool_names_that_are_not_identifiers(text, expected):
    assert parse_calls(text) == expected
    for name, args in expected:
        assert parse_call(format_call(name, args)) == (name, args)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # masked only in call position: inside a value it is still an expression, reported where it stands
        (
            "get-x(n=get-y(1))",
            "argument 'n': an operator expression is not allowed in values (only literals) at column 9",
        ),
        ("get-x(n=bad)", "argument 'n': bare name 'bad' is not a literal (quote strings: 'bad') at column 9"),
        ("x-y", "expected a call or a list of calls, got an operator expression at column 1"),
    ],
)
def test_provider_tool_names_errors_keep_their_positions(text, message):
    with pytest.raises(CallParseError) as err:
        parse_calls(text)
    assert str(err.value).startswith(message)


def test_parse_literal():
    assert parse_literal("['a', 'b']") == ["a", "b"]
    assert parse_literal("-2") == -2
    with pytest.raises(CallParseError):
        parse_literal("open('x')")


def test_format_call():
    assert format_call("cd", {"folder": "document"}) == "cd(folder='document')"
    assert (
        format_call("mod.f", {"x": -1.5, "y": [1, {"k": None}], "z": True})
        == "mod.f(x=-1.5, y=[1, {'k': None}], z=True)"
    )
    assert format_call("book", {"from": "SFO"}) == "book(from='SFO')"
    assert format_calls([("f", {"a": 1}), Call("g", {})]) == "[f(a=1), g()]"
    for name, args, why in [
        ("f", {"first-name": 1}, "not an identifier"),
        ("f g", {}, "not an identifier"),
        ("class.f", {}, "is a Python keyword"),
        ("f", {"a": float("nan")}, "non-finite"),
        ("f", {"a": {1: 2}}, "keys must be strings"),
        ("f", {"a": object()}, "cannot format object"),
        ("f", {"ﬁle": 1}, "not an identifier"),  # NFKC would turn it into 'file'
    ]:
        with pytest.raises(ValueError, match=why):
            format_call(name, args)


# -- round trip -------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))
_arg_name = _ident | st.sampled_from(keyword.kwlist) | st.text(string.ascii_letters + "é", min_size=1, max_size=5)
_name = st.lists(_ident, min_size=1, max_size=3).map(".".join) | st.from_regex(
    r"[A-Za-z0-9_-]{1,12}", fullmatch=True
).filter(lambda s: not keyword.iskeyword(s))


def _same(left, right) -> bool:
    """Equal with equal types all the way down (so True is not 1 and 1.0 is not 1)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(x, y) for x, y in zip(left, right, strict=True))
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    return left == right


@settings(max_examples=300, deadline=None)
@given(_name, st.dictionaries(_arg_name, _json, max_size=5))
@example("G", {"A": {"_ft_kw_": None}, "False": None})  # a string holding the reserved prefix disabled the renaming
def test_format_parse_round_trip(name, args):
    text = format_call(name, args)
    call = parse_call(text)
    assert call.name == name
    assert _same(call.args, args), text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_name, st.dictionaries(_ident, _json, max_size=3)), max_size=4))
def test_format_calls_round_trip(calls):
    parsed = parse_calls(format_calls(calls))
    assert [(c.name, c.args) for c in parsed] == calls


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(list("f(a=1,'x')[]{}.:*-_ \n\"g") + ["lambda", "import", "from=", "os."]), max_size=30
    ).map("".join)
)
def test_parse_never_raises_anything_but_call_parse_error(text):
    try:
        parse_calls(text)
    except CallParseError:
        pass
