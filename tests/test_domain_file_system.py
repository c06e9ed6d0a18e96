"""The simulated file_system domain: every tool's behaviour, its errors, no change on error, snapshots."""

from __future__ import annotations

import json

import pytest

from forethought.kernel.domains import load_domain
from forethought.kernel.environment import Environment
from tests.domain_harness import assert_solution_verifies, solution_paths

FS = load_domain("file_system")

TREE = {
    "root": {
        "children": {
            "report.txt": {"type": "file", "content": "b line\na revenue line\nc line"},
            "notes.md": {"type": "file", "content": "one two three"},
            ".hidden": {"type": "file", "content": "x"},
            "docs": {
                "type": "dir",
                "children": {
                    "guide.txt": {"type": "file", "content": "read me"},
                    "img": {"type": "dir", "children": {"logo.png": {"type": "file", "content": "PNG"}}},
                },
            },
            "empty": {"type": "dir", "children": {}},
        }
    }
}


def fresh(cwd: list[str] | None = None):
    data = json.loads(json.dumps(TREE))
    if cwd is not None:
        data["cwd"] = cwd
    return FS.load_state(data)


def call(state, tool: str, **args):
    return FS.tools[tool](state, args)


def node(state, *path: str):
    d = FS.snapshot(state)["root"]
    for p in path:
        d = d["children"][p]
    return d


def names(state, *path: str) -> set[str]:
    return set(node(state, *path)["children"])


# ------------------------------------------------------------------ registry
def test_registry_schemas_and_flags():
    expected = {
        "pwd",
        "ls",
        "cd",
        "mkdir",
        "touch",
        "echo",
        "cat",
        "grep",
        "wc",
        "sort",
        "tail",
        "diff",
        "find",
        "du",
        "mv",
        "cp",
        "rm",
        "rmdir",
    }
    assert set(FS.tools) == expected
    assert set(FS.registry().names) == expected
    side = {n for n, t in FS.tools.items() if t.spec.side_effect}
    assert side == {"cd", "mkdir", "touch", "echo", "mv", "cp", "rm", "rmdir"}
    assert all(not t.spec.prerequisites for t in FS.tools.values())
    assert FS.tools["mv"].spec.required == ["source", "destination"]
    assert FS.tools["echo"].spec.required == ["content"]
    assert FS.tools["wc"].spec.parameters["properties"]["mode"]["enum"] == ["l", "w", "c"]
    assert "state" not in FS.tools["cat"].spec.param_names
    assert FS.tools["cd"].spec.parameters["properties"]["folder"]["description"]


# ------------------------------------------------------------------ navigation
def test_pwd_and_cd():
    s = fresh()
    assert call(s, "pwd") == {"current_working_directory": "/"}
    assert call(s, "cd", folder="docs") == {"current_working_directory": "/docs"}
    assert call(s, "cd", folder="img") == {"current_working_directory": "/docs/img"}
    assert call(s, "cd", folder="..") == {"current_working_directory": "/docs"}
    assert call(s, "cd", folder="..") == {"current_working_directory": "/"}
    assert call(s, "cd", folder="..") == {"current_working_directory": "/"}  # the root's parent is the root
    assert call(s, "cd", folder="docs/img") == {"current_working_directory": "/docs/img"}
    assert s.cwd == ["docs", "img"]


@pytest.mark.parametrize("folder", ["nope", "report.txt", "docs/nope", "docs/guide.txt"])
def test_cd_errors_leave_cwd(folder):
    s = fresh()
    before = FS.snapshot(s)
    out = call(s, "cd", folder=folder)
    assert "no such directory" in out["error"]
    assert FS.snapshot(s) == before


def test_ls_hidden_and_sorted():
    s = fresh()
    assert call(s, "ls") == {"current_directory_content": ["docs", "empty", "notes.md", "report.txt"]}
    assert call(s, "ls", a=True)["current_directory_content"][0] == ".hidden"
    call(s, "cd", folder="docs")
    assert call(s, "ls") == {"current_directory_content": ["guide.txt", "img"]}


def test_tools_fail_when_cwd_vanished():
    s = fresh(["gone"])
    assert "no longer exists" in call(s, "ls")["error"]


# ------------------------------------------------------------------ creation
def test_mkdir():
    s = fresh()
    assert call(s, "mkdir", dir_name="new") == {"created": "new"}
    assert node(s, "new") == {"type": "dir", "children": {}}
    call(s, "cd", folder="docs")
    call(s, "mkdir", dir_name="sub")
    assert "sub" in names(s, "docs")


@pytest.mark.parametrize(
    "name,msg",
    [
        ("docs", "File exists"),
        ("report.txt", "File exists"),
        ("a/b", "invalid name"),
        ("", "invalid name"),
        ("..", "invalid name"),
    ],
)
def test_mkdir_errors(name, msg):
    s = fresh()
    before = FS.snapshot(s)
    assert msg in call(s, "mkdir", dir_name=name)["error"]
    assert FS.snapshot(s) == before


def test_touch_creates_and_keeps_existing():
    s = fresh()
    assert call(s, "touch", file_name="new.txt") == {"file_name": "new.txt"}
    assert node(s, "new.txt") == {"type": "file", "content": ""}
    call(s, "touch", file_name="report.txt")
    assert node(s, "report.txt")["content"] == "b line\na revenue line\nc line"


@pytest.mark.parametrize("name", ["docs", "x/y", ""])
def test_touch_errors(name):
    s = fresh()
    before = FS.snapshot(s)
    assert "error" in call(s, "touch", file_name=name)
    assert FS.snapshot(s) == before


def test_echo_writes_overwrites_or_prints():
    s = fresh()
    before = FS.snapshot(s)
    assert call(s, "echo", content="hi") == {"terminal_output": "hi"}
    assert FS.snapshot(s) == before  # no file: nothing written
    assert call(s, "echo", content="new", file_name="n.txt") == {"terminal_output": None}
    assert node(s, "n.txt")["content"] == "new"
    call(s, "echo", content="replaced", file_name="report.txt")
    assert node(s, "report.txt")["content"] == "replaced"


def test_echo_errors():
    s = fresh()
    before = FS.snapshot(s)
    assert "is a directory" in call(s, "echo", content="x", file_name="docs")["error"]
    assert "invalid name" in call(s, "echo", content="x", file_name="docs/x.txt")["error"]
    assert FS.snapshot(s) == before


# ------------------------------------------------------------------ reading
def test_cat_grep_sort_tail():
    s = fresh()
    assert call(s, "cat", file_name="report.txt") == {"file_content": "b line\na revenue line\nc line"}
    assert call(s, "grep", file_name="report.txt", pattern="revenue") == {"matching_lines": ["a revenue line"]}
    assert call(s, "grep", file_name="report.txt", pattern="Revenue") == {"matching_lines": []}  # case-sensitive
    assert call(s, "grep", file_name="report.txt", pattern="line")["matching_lines"] == [
        "b line",
        "a revenue line",
        "c line",
    ]
    assert call(s, "sort", file_name="report.txt") == {"sorted_content": "a revenue line\nb line\nc line"}
    assert call(s, "tail", file_name="report.txt", lines=2) == {"last_lines": "a revenue line\nc line"}
    assert call(s, "tail", file_name="report.txt") == {"last_lines": "b line\na revenue line\nc line"}
    assert call(s, "tail", file_name="report.txt", lines=0) == {"last_lines": ""}
    assert node(s, "report.txt")["content"] == "b line\na revenue line\nc line"  # sort does not rewrite


def test_tail_negative_lines():
    assert "invalid number of lines" in call(fresh(), "tail", file_name="report.txt", lines=-1)["error"]


def test_wc_modes():
    s = fresh()
    assert call(s, "wc", file_name="report.txt") == {"count": 3, "type": "lines"}
    assert call(s, "wc", file_name="notes.md", mode="w") == {"count": 3, "type": "words"}
    assert call(s, "wc", file_name="notes.md", mode="c") == {"count": 13, "type": "characters"}


@pytest.mark.parametrize(
    "tool,args",
    [
        ("cat", {"file_name": "missing.txt"}),
        ("cat", {"file_name": "docs"}),
        ("grep", {"file_name": "missing.txt", "pattern": "x"}),
        ("wc", {"file_name": "docs"}),
        ("sort", {"file_name": "missing.txt"}),
        ("tail", {"file_name": "docs"}),
        ("diff", {"file_name1": "report.txt", "file_name2": "missing.txt"}),
        ("cat", {"file_name": "guide.txt"}),  # only the current directory is visible
    ],
)
def test_read_errors(tool, args):
    s = fresh()
    before = FS.snapshot(s)
    out = call(s, tool, **args)
    assert "no such file" in out["error"] or "is a directory" in out["error"]
    assert FS.snapshot(s) == before


def test_diff():
    s = fresh()
    call(s, "echo", content="b line\nnew line", file_name="other.txt")
    assert call(s, "diff", file_name1="report.txt", file_name2="other.txt") == {
        "diff_lines": "- a revenue line\n- c line\n+ new line"
    }
    assert call(s, "diff", file_name1="report.txt", file_name2="report.txt") == {"diff_lines": ""}


def test_find():
    s = fresh()
    everything = call(s, "find")["matches"]
    assert everything == [
        "./.hidden",
        "./docs",
        "./docs/guide.txt",
        "./docs/img",
        "./docs/img/logo.png",
        "./empty",
        "./notes.md",
        "./report.txt",
    ]
    assert call(s, "find", name="guide") == {"matches": ["./docs/guide.txt"]}
    assert call(s, "find", path="docs") == {"matches": ["docs/guide.txt", "docs/img", "docs/img/logo.png"]}
    assert call(s, "find", path="docs/img", name="logo") == {"matches": ["docs/img/logo.png"]}
    assert call(s, "find", name="zzz") == {"matches": []}
    assert "No such directory" in call(s, "find", path="nope")["error"]
    assert "No such directory" in call(s, "find", path="report.txt")["error"]


def test_du():
    s = fresh()
    total = len("b line\na revenue line\nc line") + len("one two three") + 1 + len("read me") + len("PNG")
    assert call(s, "du") == {"disk_usage": f"{total} bytes"}
    assert call(s, "du", human_readable=True) == {"disk_usage": f"{total / 1024:.2f} KB"}
    call(s, "cd", folder="empty")
    assert call(s, "du") == {"disk_usage": "0 bytes"}


# ------------------------------------------------------------------ mv / cp
def test_mv_into_directory_and_rename():
    s = fresh()
    assert call(s, "mv", source="report.txt", destination="docs") == {"file_name": "report.txt", "folder": "docs"}
    assert "report.txt" not in names(s)
    assert node(s, "docs", "report.txt")["content"] == "b line\na revenue line\nc line"
    assert call(s, "mv", source="notes.md", destination="todo.md") == {"file_name": "todo.md", "folder": "."}
    assert "notes.md" not in names(s) and node(s, "todo.md")["content"] == "one two three"
    assert call(s, "mv", source="empty", destination="docs")["folder"] == "docs"  # directories move too
    assert node(s, "docs", "empty") == {"type": "dir", "children": {}}


def test_cp_into_directory_and_to_new_name():
    s = fresh()
    assert call(s, "cp", source="report.txt", destination="docs") == {"file_name": "report.txt", "folder": "docs"}
    assert "report.txt" in names(s) and "report.txt" in names(s, "docs")
    assert call(s, "cp", source="docs", destination="docs_copy") == {"file_name": "docs_copy", "folder": "."}
    assert node(s, "docs_copy") == node(s, "docs")
    call(s, "echo", content="changed", file_name="report.txt")
    assert node(s, "docs", "report.txt")["content"] == "b line\na revenue line\nc line"  # a deep copy


@pytest.mark.parametrize("tool", ["mv", "cp"])
@pytest.mark.parametrize(
    "src,dst,msg",
    [
        ("missing.txt", "docs", "no such file"),
        ("report.txt", "notes.md", "already exists"),
        ("report.txt", "x/y.txt", "invalid name"),
        ("docs", "docs", "into itself"),
        ("guide.txt", "empty", "no such file"),
    ],
)
def test_mv_cp_errors_leave_state(tool, src, dst, msg):
    s = fresh()
    before = FS.snapshot(s)
    assert msg in call(s, tool, source=src, destination=dst)["error"]
    assert FS.snapshot(s) == before


@pytest.mark.parametrize("tool", ["mv", "cp"])
def test_mv_cp_name_taken_in_target_directory(tool):
    s = fresh()
    call(s, "touch", file_name="guide.txt")
    before = FS.snapshot(s)
    assert "already exists" in call(s, tool, source="guide.txt", destination="docs")["error"]
    assert FS.snapshot(s) == before


# ------------------------------------------------------------------ removal
def test_rm_files_and_directories():
    s = fresh()
    assert call(s, "rm", file_name="report.txt") == {"removed": "report.txt"}
    assert call(s, "rm", file_name="docs") == {"removed": "docs"}  # recursive
    assert names(s) == {".hidden", "empty", "notes.md"}


def test_rm_missing():
    s = fresh()
    before = FS.snapshot(s)
    assert "No such file or directory" in call(s, "rm", file_name="missing.txt")["error"]
    assert FS.snapshot(s) == before


def test_rmdir():
    s = fresh()
    assert call(s, "rmdir", dir_name="empty") == {"removed": "empty"}
    assert "empty" not in names(s)
    before = FS.snapshot(s)
    assert "not empty" in call(s, "rmdir", dir_name="docs")["error"]
    assert "No such directory" in call(s, "rmdir", dir_name="report.txt")["error"]
    assert "No such directory" in call(s, "rmdir", dir_name="missing")["error"]
    assert FS.snapshot(s) == before


# ------------------------------------------------------------------ environment, snapshot
def test_environment_stage_discards_failed_calls():
    env = Environment(["file_system"], {"file_system": json.loads(json.dumps(TREE))})
    before = env.snapshot()
    result, staged = env.stage("mv", {"source": "report.txt", "destination": "notes.md"})
    assert "error" in result
    assert env.snapshot() == before
    result, staged = env.stage("mv", {"source": "report.txt", "destination": "docs"})
    assert "error" not in result and env.snapshot() == before  # staged only
    env.commit("mv", staged)
    assert "report.txt" in env.snapshot()["file_system"]["root"]["children"]["docs"]["children"]


def test_snapshot_deterministic_and_round_trips():
    a, b = fresh(), fresh()
    for s in (a, b):
        call(s, "mkdir", dir_name="z")
        call(s, "cp", source="report.txt", destination="z")
        call(s, "cd", folder="z")
    sa, sb = FS.snapshot(a), FS.snapshot(b)
    assert sa == sb
    assert json.dumps(sa, sort_keys=True) == json.dumps(FS.snapshot(a), sort_keys=True)  # repeatable
    assert FS.snapshot(FS.load_state(sa)) == sa  # the snapshot is a valid initial state
    assert sa["cwd"] == ["z"]
    json.dumps(sa)  # plain JSON


def test_initial_state_validation():
    with pytest.raises(ValueError, match="file_system"):
        FS.load_state({"root": {"children": {"a": {"type": "link"}}}})
    with pytest.raises(ValueError):
        FS.load_state({"root": {}, "extra": 1})
    assert FS.snapshot(FS.load_state({})) == {"root": {"type": "dir", "children": {}}, "cwd": []}


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("file_system", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
