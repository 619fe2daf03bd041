"""Prompt templates, kept as text files beside this module and loaded one way.

Each template is versioned by its content: the version is ``name/`` and the first 12 hex digits
of the SHA-256 of the file's bytes, so any edit (a comment line included) changes the key of
the response cache, and nobody has to remember to bump a number. Leading ``#`` lines are
comments for editors; `Template.body` leaves them out.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from importlib import resources


def prompt_version(data: bytes, name: str) -> str:
    """`name/` plus the first 12 hex digits of the SHA-256 of the prompt file's bytes."""
    return f"{name}/{hashlib.sha256(data).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    data: bytes  # the file's bytes, as hashed

    @property
    def version(self) -> str:
        return prompt_version(self.data, self.name)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8").replace("\r\n", "\n")

    @property
    def body(self) -> str:
        """The text without its leading `#` comment lines and surrounding blank lines."""
        lines = self.text.split("\n")
        while lines and lines[0].startswith("#"):
            lines.pop(0)
        return "\n".join(lines).strip("\n")


def read_prompt_bytes(name: str) -> bytes:
    """The packaged prompt file's bytes (shipped as package data: `prompts/*.txt`)."""
    return resources.files(__name__).joinpath(f"{name}.txt").read_bytes()


@functools.cache
def load_template(name: str) -> Template:
    return Template(name, read_prompt_bytes(name))
