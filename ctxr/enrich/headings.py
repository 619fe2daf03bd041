"""Heading text as it goes into titles and heading trails, shared by the loaders and splitters.

Its own module, with nothing but `re`, so that loading a document (and `ctxr --help`, which
imports the loaders' suffix tables) never imports the splitters and their numpy.
"""

from __future__ import annotations

import re

# A MkDocs / Pandoc attribute list closing a heading: "Tasks { #tasks .new data-x=1 }", "{-}".
# Every item must look like an id, a class, "-" or key=value, so "Using {name}" keeps its braces.
_ATTR_ITEM = r'(?:[#.][\w:.-]+|-|[\w-]+=(?:"[^"]*"|[^\s}]+))'
_HEADING_ATTRS = re.compile(rf"[ \t]*\{{[ \t]*{_ATTR_ITEM}(?:[ \t]+{_ATTR_ITEM})*[ \t]*\}}[ \t]*$")


def heading_text(raw: str) -> str:
    """A heading's words for its trail, without a trailing attribute list (``{ #id }``)."""
    return _HEADING_ATTRS.sub("", raw).strip()
