"""A Markdown file's YAML front matter as payload fields: ``tags: [api, auth]`` -> meta.tags.

Read with PyYAML's safe loader. Only what a filter can match is kept: keys that are plain names
(letters, digits, ``_`` and ``-``, not starting with a digit), whose values are scalars or
lists of scalars. Every scalar is kept as text (``2024`` as ``"2024"``, ``true`` as
``"true"``, a date as ``2024-05-01``), so a filter from the command line, where every value is
text, matches what the file said. Nested mappings and unreadable YAML are left out: the front
matter stays in the document's text either way, so nothing is lost to search.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*$", re.DOTALL | re.MULTILINE)
META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
MetaValue = str | tuple[str, ...]


def front_matter(text: str) -> dict[str, MetaValue]:
    """The filterable fields of `text`'s front matter; {} when it has none or it is not YAML."""
    found = _FRONT_MATTER.match(text)
    if not found:
        return {}
    import yaml  # imported here: only Markdown with front matter pays for it

    try:
        data = yaml.safe_load(found.group(1))
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict):
        return {}
    meta: dict[str, MetaValue] = {}
    for key, value in data.items():
        if not isinstance(key, str) or not META_KEY.match(key):
            continue
        if isinstance(value, list):
            items = tuple(shown for item in value if (shown := _scalar(item)) is not None)
            if items:
                meta[key] = items
        elif (shown := _scalar(value)) is not None:
            meta[key] = shown
    return meta


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return None
