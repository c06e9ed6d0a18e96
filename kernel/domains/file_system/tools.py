"""File-system tools (BFCL GorillaFileSystem style), over the in-memory tree only."""

from __future__ import annotations

from typing import Literal

from ..base import Domain, ToolError
from .state import Directory, File, FileSystemState

DOMAIN = Domain(
    "file_system",
    FileSystemState,
    "An in-memory file system: navigate, list, create, copy, move, search and read text files.",
)
tool = DOMAIN.tool


def _cwd(state: FileSystemState) -> Directory:
    directory = state.root
    for part in state.cwd:
        nxt = directory.children.get(part)
        if not isinstance(nxt, Directory):
            raise ToolError(f"current directory {'/' + '/'.join(state.cwd)} no longer exists")
        directory = nxt
    return directory


def _name_ok(name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ToolError(f"invalid name {name!r}: use a single path component")
    return name


def _cwd_path(state: FileSystemState) -> str:
    return "/" + "/".join(state.cwd)


@tool(writes={"cwd": "result.current_working_directory"})
def pwd(state: FileSystemState) -> dict:
    """Return the current working directory path."""
    return {"current_working_directory": _cwd_path(state)}


@tool()
def ls(state: FileSystemState, a: bool = False) -> dict:  # names: math (the benchmark's ls -a flag, its API)
    """List the contents of the current directory.

    Args:
        a: Include hidden entries (names starting with a dot).
    """
    names = sorted(n for n in _cwd(state).children if a or not n.startswith("."))
    return {"current_directory_content": names}


@tool(side_effect=True, writes={"cwd": "result.current_working_directory"})
def cd(state: FileSystemState, folder: str) -> dict:
    """Change the current directory to a subdirectory of it, or '..' for the parent.

    Args:
        folder: Name of the subdirectory to enter, or '..'.
    """
    if folder == "..":
        if state.cwd:
            state.cwd.pop()
        return {"current_working_directory": _cwd_path(state)}
    parts = [p for p in folder.split("/") if p and p != "."]
    directory = _cwd(state)
    new = list(state.cwd)
    for part in parts:
        nxt = directory.children.get(part)
        if not isinstance(nxt, Directory):
            raise ToolError(f"cd: no such directory: {folder}")
        directory = nxt
        new.append(part)
    state.cwd = new
    return {"current_working_directory": _cwd_path(state)}


@tool(side_effect=True, writes={"dir:{params.dir_name}": 'const:"created"'})
def mkdir(state: FileSystemState, dir_name: str) -> dict:
    """Create a new directory in the current directory.

    Args:
        dir_name: Name of the directory to create.
    """
    directory = _cwd(state)
    if _name_ok(dir_name) in directory.children:
        raise ToolError(f"mkdir: cannot create directory '{dir_name}': File exists")
    directory.children[dir_name] = Directory()
    return {"created": dir_name}


@tool(side_effect=True, writes={"file_name": "params.file_name"})
def touch(state: FileSystemState, file_name: str) -> dict:
    """Create an empty file in the current directory (no change if it exists).

    Args:
        file_name: Name of the file to create.
    """
    directory = _cwd(state)
    if isinstance(directory.children.get(_name_ok(file_name)), Directory):
        raise ToolError(f"touch: '{file_name}' is a directory")
    directory.children.setdefault(file_name, File())
    return {"file_name": file_name}


@tool(side_effect=True)
def echo(state: FileSystemState, content: str, file_name: str | None = None) -> dict:
    """Write content to a file in the current directory (overwrites), or return it if no file is given.

    Args:
        content: Text to write.
        file_name: File to write to; omit to just return the text.
    """
    if file_name is None:
        return {"terminal_output": content}
    directory = _cwd(state)
    if isinstance(directory.children.get(_name_ok(file_name)), Directory):
        raise ToolError(f"echo: '{file_name}' is a directory")
    directory.children[file_name] = File(content=content)
    return {"terminal_output": None}


def _file(state: FileSystemState, name: str) -> File:
    entry = _cwd(state).children.get(name)
    if entry is None:
        raise ToolError(f"no such file: {name}")
    if not isinstance(entry, File):
        raise ToolError(f"'{name}' is a directory")
    return entry


@tool(writes={"file_name": "params.file_name"})
def cat(state: FileSystemState, file_name: str) -> dict:
    """Show the content of a file in the current directory.

    Args:
        file_name: File to read.
    """
    return {"file_content": _file(state, file_name).content}


@tool()
def grep(state: FileSystemState, file_name: str, pattern: str) -> dict:
    """Search a file in the current directory for lines containing a pattern.

    Args:
        file_name: File to search.
        pattern: Text to look for.
    """
    lines = [ln for ln in _file(state, file_name).content.splitlines() if pattern in ln]
    return {"matching_lines": lines}


@tool()
def wc(state: FileSystemState, file_name: str, mode: Literal["l", "w", "c"] = "l") -> dict:
    """Count lines, words or characters of a file.

    Args:
        file_name: File to count.
        mode: 'l' lines, 'w' words, 'c' characters.
    """
    text = _file(state, file_name).content
    n = {"l": len(text.splitlines()), "w": len(text.split()), "c": len(text)}[mode]
    return {"count": n, "type": {"l": "lines", "w": "words", "c": "characters"}[mode]}


@tool()
def sort(state: FileSystemState, file_name: str) -> dict:
    """Return the lines of a file sorted alphabetically.

    Args:
        file_name: File to sort.
    """
    return {"sorted_content": "\n".join(sorted(_file(state, file_name).content.splitlines()))}


@tool()
def tail(state: FileSystemState, file_name: str, lines: int = 10) -> dict:
    """Show the last lines of a file.

    Args:
        file_name: File to read.
        lines: Number of lines to show.
    """
    if lines < 0:
        raise ToolError(f"tail: invalid number of lines: {lines}")
    kept = _file(state, file_name).content.splitlines()[-lines:] if lines else []  # [-0:] would be everything
    return {"last_lines": "\n".join(kept)}


@tool()
def diff(state: FileSystemState, file_name1: str, file_name2: str) -> dict:
    """Compare two files line by line.

    Args:
        file_name1: First file.
        file_name2: Second file.
    """
    first_lines = _file(state, file_name1).content.splitlines()
    second_lines = _file(state, file_name2).content.splitlines()
    out = [f"- {x}" for x in first_lines if x not in second_lines] + [
        f"+ {x}" for x in second_lines if x not in first_lines
    ]
    return {"diff_lines": "\n".join(out)}


@tool()
def find(state: FileSystemState, path: str = ".", name: str | None = None) -> dict:
    """Find files and directories below a path whose name contains a string.

    Args:
        path: Directory to search from ('.' for the current one).
        name: Substring the name must contain; omit to list everything.
    """
    start = _cwd(state)
    prefix = "."
    if path not in (".", ""):
        for part in [x for x in path.split("/") if x and x != "."]:
            nxt = start.children.get(part)
            if not isinstance(nxt, Directory):
                raise ToolError(f"find: '{path}': No such directory")
            start = nxt
        prefix = path.rstrip("/")
    found: list[str] = []

    def walk(directory: Directory, at: str) -> None:
        for n, node in sorted(directory.children.items()):
            here = f"{at}/{n}"
            if name is None or name in n:
                found.append(here)
            if isinstance(node, Directory):
                walk(node, here)

    walk(start, prefix)
    return {"matches": found}


@tool()
def du(state: FileSystemState, human_readable: bool = False) -> dict:
    """Total size of the current directory.

    Args:
        human_readable: Report in KB/MB rather than bytes.
    """

    def size(directory: Directory) -> int:
        return sum(len(x.content.encode()) if isinstance(x, File) else size(x) for x in directory.children.values())

    n = size(_cwd(state))
    return {"disk_usage": f"{n / 1024:.2f} KB" if human_readable else f"{n} bytes"}


def _move_or_copy(state: FileSystemState, source: str, destination: str, move: bool) -> dict:
    directory = _cwd(state)
    node = directory.children.get(source)
    if node is None:
        raise ToolError(f"no such file or directory: {source}")
    if destination == source and isinstance(node, Directory):  # would nest the folder in itself (mv: then delete it)
        raise ToolError(f"cannot {'move' if move else 'copy'} '{source}' into itself")
    target = directory.children.get(destination)
    if isinstance(target, Directory):  # into an existing directory, keeping the name
        if source in target.children:
            raise ToolError(f"'{destination}/{source}' already exists")
        target.children[source] = node.model_copy(deep=True)
        placed, folder = source, destination
    else:
        if target is not None:
            raise ToolError(f"'{destination}' already exists")
        directory.children[_name_ok(destination)] = node.model_copy(deep=True)
        placed, folder = destination, "."
    if move:
        del directory.children[source]
    return {"file_name": placed, "folder": folder}


@tool(side_effect=True, writes={"file_name": "result.file_name", "folder": "result.folder"})
def mv(state: FileSystemState, source: str, destination: str) -> dict:
    """Move a file or directory into a directory, or rename it.

    Args:
        source: Name of the file or directory in the current directory.
        destination: An existing directory to move into, or a new name.
    """
    return _move_or_copy(state, source, destination, move=True)


@tool(side_effect=True, writes={"file_name": "result.file_name", "folder": "result.folder"})
def cp(state: FileSystemState, source: str, destination: str) -> dict:
    """Copy a file or directory into a directory, or to a new name.

    Args:
        source: Name of the file or directory in the current directory.
        destination: An existing directory to copy into, or a new name.
    """
    return _move_or_copy(state, source, destination, move=False)


@tool(side_effect=True)
def rm(state: FileSystemState, file_name: str) -> dict:
    """Remove a file or directory from the current directory.

    Args:
        file_name: Name to remove.
    """
    directory = _cwd(state)
    if file_name not in directory.children:
        raise ToolError(f"rm: cannot remove '{file_name}': No such file or directory")
    del directory.children[file_name]
    return {"removed": file_name}


@tool(side_effect=True)
def rmdir(state: FileSystemState, dir_name: str) -> dict:
    """Remove an empty directory from the current directory.

    Args:
        dir_name: Directory to remove.
    """
    directory = _cwd(state)
    node = directory.children.get(dir_name)
    if not isinstance(node, Directory):
        raise ToolError(f"rmdir: '{dir_name}': No such directory")
    if node.children:
        raise ToolError(f"rmdir: '{dir_name}': Directory not empty")
    del directory.children[dir_name]
    return {"removed": dir_name}
