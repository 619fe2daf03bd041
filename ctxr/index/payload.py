"""The payload of a point: the one schema the writer fills and the search reads back."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

SPACE_AFTER_MAX = 256  # the longest whitespace run the writer stores after a chunk


_SPACE = re.compile(r"\s*")


def space_after(text: str, end: int) -> str:
    """The whitespace run that starts at `end` in `text`, at most SPACE_AFTER_MAX characters."""
    found = _SPACE.match(text, end, min(len(text), end + SPACE_AFTER_MAX))
    return found.group() if found else ""


def source_fields(source: str) -> dict[str, object]:
    """The payload fields that directory and glob filters on `source` match (see module doc)."""
    path = PurePosixPath(source)
    parent = path.parent
    dirs = [str(p) for p in reversed(path.parents) if str(p) not in (".", "/")]
    return {
        "source_dirs": dirs,
        "source_dir": "" if str(parent) == "." else str(parent),
        "source_ext": path.suffix,
    }
