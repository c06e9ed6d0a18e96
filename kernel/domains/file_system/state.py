"""State of the simulated file system: a tree of directories and text files, and a cwd."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["file"] = "file"
    content: str = ""


class Directory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["dir"] = "dir"
    children: dict[str, Annotated[Union[File, Directory], Field(discriminator="type")]] = Field(default_factory=dict)


Directory.model_rebuild()


class FileSystemState(BaseModel):
    model_config = ConfigDict(extra="forbid")
    root: Directory = Field(default_factory=Directory)
    cwd: list[str] = Field(default_factory=list)  # path components below the root
