"""State of the simulated file system: a tree of directories and text files, and a cwd.

The tree and the cwd a scenario starts from when it gives none are ``data.json`` beside this module (an empty root).
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..base import ReferenceData


class File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["file"] = "file"
    content: str = ""


class Directory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["dir"] = "dir"
    children: dict[str, Annotated[Union[File, Directory], Field(discriminator="type")]] = Field(default_factory=dict)


Directory.model_rebuild()


class FileSystemState(ReferenceData):
    model_config = ConfigDict(extra="forbid")
    root: Directory
    cwd: list[str]  # path components below the root
