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
    entry = FS.snapshot(state)["root"]
    for part in path:
        entry = entry["children"][part]
    return entry


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
    state = fresh()
    assert call(state, "pwd") == {"current_working_directory": "/"}
    assert call(state, "cd", folder="docs") == {"current_working_directory": "/docs"}
    assert call(state, "cd", folder="img") == {"current_working_directory": "/docs/img"}
    assert call(state, "cd", folder="..") == {"current_working_directory": "/docs"}
    assert call(state, "cd", folder="..") == {"current_working_directory": "/"}
    assert call(state, "cd", folder="..") == {"current_working_directory": "/"}  # the root's parent is the root
    assert call(state, "cd", folder="docs/img") == {"current_working_directory": "/docs/img"}
    assert state.cwd == ["docs", "img"]


@pytest.mark.parametrize("folder", ["nope", "report.txt", "docs/nope", "docs/guide.txt"])
def test_cd_errors_leave_cwd(folder):
    state = fresh()
    before = FS.snapshot(state)
    out = call(state, "cd", folder=folder)
    assert "no such directory" in out["error"]
    assert FS.snapshot(state) == before


def test_ls_hidden_and_sorted():
    state = fresh()
    assert call(state, "ls") == {"current_directory_content": ["docs", "empty", "notes.md", "report.txt"]}
    assert call(state, "ls", a=True)["current_directory_content"][0] == ".hidden"
    call(state, "cd", folder="docs")
    assert call(state, "ls") == {"current_directory_content": ["guide.txt", "img"]}


def test_tools_fail_when_cwd_vanished():
    state = fresh(["gone"])
    assert "no longer exists" in call(state, "ls")["error"]


# ------------------------------------------------------------------ creation
def test_mkdir():
    state = fresh()
    assert call(state, "mkdir", dir_name="new") == {"created": "new"}
    assert node(state, "new") == {"type": "dir", "children": {}}
    call(state, "cd", folder="docs")
    call(state, "mkdir", dir_name="sub")
    assert "sub" in names(state, "docs")


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
    state = fresh()
    before = FS.snapshot(state)
    assert msg in call(state, "mkdir", dir_name=name)["error"]
    assert FS.snapshot(state) == before


def test_touch_creates_and_keeps_existing():
    state = fresh()
    assert call(state, "touch", file_name="new.txt") == {"file_name": "new.txt"}
    assert node(state, "new.txt") == {"type": "file", "content": ""}
    call(state, "touch", file_name="report.txt")
    assert node(state, "report.txt")["content"] == "b line\na revenue line\nc line"


@pytest.mark.parametrize("name", ["docs", "x/y", ""])
def test_touch_errors(name):
    state = fresh()
    before = FS.snapshot(state)
    assert "error" in call(state, "touch", file_name=name)
    assert FS.snapshot(state) == before


def test_echo_writes_overwrites_or_prints():
    state = fresh()
    before = FS.snapshot(state)
    assert call(state, "echo", content="hi") == {"terminal_output": "hi"}
    assert FS.snapshot(state) == before  # no file: nothing written
    assert call(state, "echo", content="new", file_name="n.txt") == {"terminal_output": None}
    assert node(state, "n.txt")["content"] == "new"
    call(state, "echo", content="replaced", file_name="report.txt")
    assert node(state, "report.txt")["content"] == "replaced"


def test_echo_errors():
    state = fresh()
    before = FS.snapshot(state)
    assert "is a directory" in call(state, "echo", content="x", file_name="docs")["error"]
    assert "invalid name" in call(state, "echo", content="x", file_name="docs/x.txt")["error"]
    assert FS.snapshot(state) == before


# ------------------------------------------------------------------ reading
def test_cat_grep_sort_tail():
    state = fresh()
    assert call(state, "cat", file_name="report.txt") == {"file_content": "b line\na revenue line\nc line"}
    assert call(state, "grep", file_name="report.txt", pattern="revenue") == {"matching_lines": ["a revenue line"]}
    assert call(state, "grep", file_name="report.txt", pattern="Revenue") == {"matching_lines": []}  # case-sensitive
    assert call(state, "grep", file_name="report.txt", pattern="line")["matching_lines"] == [
        "b line",
        "a revenue line",
        "c line",
    ]
    assert call(state, "sort", file_name="report.txt") == {"sorted_content": "a revenue line\nb line\nc line"}
    assert call(state, "tail", file_name="report.txt", lines=2) == {"last_lines": "a revenue line\nc line"}
    assert call(state, "tail", file_name="report.txt") == {"last_lines": "b line\na revenue line\nc line"}
    assert call(state, "tail", file_name="report.txt", lines=0) == {"last_lines": ""}
    assert node(state, "report.txt")["content"] == "b line\na revenue line\nc line"  # sort does not rewrite


def test_tail_negative_lines():
    assert "invalid number of lines" in call(fresh(), "tail", file_name="report.txt", lines=-1)["error"]


def test_wc_modes():
    state = fresh()
    assert call(state, "wc", file_name="report.txt") == {"count": 3, "type": "lines"}
    assert call(state, "wc", file_name="notes.md", mode="w") == {"count": 3, "type": "words"}
    assert call(state, "wc", file_name="notes.md", mode="c") == {"count": 13, "type": "characters"}


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
    state = fresh()
    before = FS.snapshot(state)
    out = call(state, tool, **args)
    assert "no such file" in out["error"] or "is a directory" in out["error"]
    assert FS.snapshot(state) == before


def test_diff():
    state = fresh()
    call(state, "echo", content="b line\nnew line", file_name="other.txt")
    assert call(state, "diff", file_name1="report.txt", file_name2="other.txt") == {
        "diff_lines": "- a revenue line\n- c line\n+ new line"
    }
    assert call(state, "diff", file_name1="report.txt", file_name2="report.txt") == {"diff_lines": ""}


def test_find():
    state = fresh()
    everything = call(state, "find")["matches"]
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
    assert call(state, "find", name="guide") == {"matches": ["./docs/guide.txt"]}
    assert call(state, "find", path="docs") == {"matches": ["docs/guide.txt", "docs/img", "docs/img/logo.png"]}
    assert call(state, "find", path="docs/img", name="logo") == {"matches": ["docs/img/logo.png"]}
    assert call(state, "find", name="zzz") == {"matches": []}
    assert "No such directory" in call(state, "find", path="nope")["error"]
    assert "No such directory" in call(state, "find", path="report.txt")["error"]


def test_du():
    state = fresh()
    total = len("b line\na revenue line\nc line") + len("one two three") + 1 + len("read me") + len("PNG")
    assert call(state, "du") == {"disk_usage": f"{total} bytes"}
    assert call(state, "du", human_readable=True) == {"disk_usage": f"{total / 1024:.2f} KB"}
    call(state, "cd", folder="empty")
    assert call(state, "du") == {"disk_usage": "0 bytes"}


# ------------------------------------------------------------------ mv / cp
def test_mv_into_directory_and_rename():
    state = fresh()
    assert call(state, "mv", source="report.txt", destination="docs") == {"file_name": "report.txt", "folder": "docs"}
    assert "report.txt" not in names(state)
    assert node(state, "docs", "report.txt")["content"] == "b line\na revenue line\nc line"
    assert call(state, "mv", source="notes.md", destination="todo.md") == {"file_name": "todo.md", "folder": "."}
    assert "notes.md" not in names(state) and node(state, "todo.md")["content"] == "one two three"
    assert call(state, "mv", source="empty", destination="docs")["folder"] == "docs"  # directories move too
    assert node(state, "docs", "empty") == {"type": "dir", "children": {}}


def test_cp_into_directory_and_to_new_name():
    state = fresh()
    assert call(state, "cp", source="report.txt", destination="docs") == {"file_name": "report.txt", "folder": "docs"}
    assert "report.txt" in names(state) and "report.txt" in names(state, "docs")
    assert call(state, "cp", source="docs", destination="docs_copy") == {"file_name": "docs_copy", "folder": "."}
    assert node(state, "docs_copy") == node(state, "docs")
    call(state, "echo", content="changed", file_name="report.txt")
    assert node(state, "docs", "report.txt")["content"] == "b line\na revenue line\nc line"  # a deep copy


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
    state = fresh()
    before = FS.snapshot(state)
    assert msg in call(state, tool, source=src, destination=dst)["error"]
    assert FS.snapshot(state) == before


@pytest.mark.parametrize("tool", ["mv", "cp"])
def test_mv_cp_name_taken_in_target_directory(tool):
    state = fresh()
    call(state, "touch", file_name="guide.txt")
    before = FS.snapshot(state)
    assert "already exists" in call(state, tool, source="guide.txt", destination="docs")["error"]
    assert FS.snapshot(state) == before


# ------------------------------------------------------------------ removal
def test_rm_files_and_directories():
    state = fresh()
    assert call(state, "rm", file_name="report.txt") == {"removed": "report.txt"}
    assert call(state, "rm", file_name="docs") == {"removed": "docs"}  # recursive
    assert names(state) == {".hidden", "empty", "notes.md"}


def test_rm_missing():
    state = fresh()
    before = FS.snapshot(state)
    assert "No such file or directory" in call(state, "rm", file_name="missing.txt")["error"]
    assert FS.snapshot(state) == before


def test_rmdir():
    state = fresh()
    assert call(state, "rmdir", dir_name="empty") == {"removed": "empty"}
    assert "empty" not in names(state)
    before = FS.snapshot(state)
    assert "not empty" in call(state, "rmdir", dir_name="docs")["error"]
    assert "No such directory" in call(state, "rmdir", dir_name="report.txt")["error"]
    assert "No such directory" in call(state, "rmdir", dir_name="missing")["error"]
    assert FS.snapshot(state) == before


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
    first, second = fresh(), fresh()
    for state in (first, second):
        call(state, "mkdir", dir_name="z")
        call(state, "cp", source="report.txt", destination="z")
        call(state, "cd", folder="z")
    sa, sb = FS.snapshot(first), FS.snapshot(second)
    assert sa == sb
    assert json.dumps(sa, sort_keys=True) == json.dumps(FS.snapshot(first), sort_keys=True)  # repeatable
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
