"""reStructuredText, parsed by docutils and rendered as Markdown-like text with ``#`` headings.

docutils (the reference parser) decides what a section is, whatever adornment characters the
author chose, and the nesting it infers becomes ``#`` to ``######`` headings, so the Markdown
splitter gives each chunk its heading trail. Chunk offsets refer to this rendering (the
document's text), as they do for HTML.

Sphinx documents use roles and directives plain docutils does not know (``:ref:``,
``:func:``, ``.. code-block::``, ``.. versionadded::``, ``.. toctree::``). They are registered
here for the parse only: a cross-reference role keeps its visible text, a code directive
becomes a fenced block, a version note keeps its words, and directives that build navigation
or pull in API docs from code are dropped. Parse problems are never printed: a document with
markup docutils cannot read still yields its text.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from ctxr.enrich.load.walk import display_path
from ctxr.errors import LoadError
from ctxr.types import Document, text_hash

RST_SUFFIXES = frozenset({".rst", ".rest"})
_SPHINX_ROLES = (
    "ref", "doc", "term", "func", "class", "meth", "attr", "mod", "data", "exc", "obj",
    "const", "envvar", "option", "file", "program", "command", "kbd", "guilabel",
    "menuselection", "abbr", "pep", "rfc", "any", "samp", "keyword", "numref", "download",
    "py:func", "py:class", "py:meth", "py:attr", "py:mod", "py:data", "py:exc", "py:obj",
    "issue", "pr", "user", "gh", "confval",
)  # fmt: skip
_CODE_DIRECTIVES = ("code-block", "sourcecode", "highlight-block")
_NOTE_DIRECTIVES = ("versionadded", "versionchanged", "deprecated", "seealso", "only", "tab")
_DROPPED_DIRECTIVES = (
    "toctree", "autofunction", "autoclass", "automodule", "automethod", "autoattribute",
    "autodata", "autoexception", "autosummary", "literalinclude", "highlight", "currentmodule",
    "module", "function", "class", "method", "attribute", "data", "exception", "index",
    "tabularcolumns", "testsetup", "testcleanup", "ifconfig", "click", "include",
)  # fmt: skip
_TITLE_TARGET = re.compile(r"^(.*?)\s*<[^<>]+>$", re.DOTALL)
_registered = False


def load_rst(path: Path, raw: str) -> Document:
    """Parse `raw` (the file's text) with docutils; raise a `LoadError` naming the file and fix."""
    source = display_path(path)
    try:
        from docutils.core import publish_doctree
    except ImportError as exc:  # a dependency of ctxr; missing only in a broken environment
        raise LoadError(source, "reStructuredText needs docutils; pip install docutils") from exc
    _register_sphinx_markup()
    settings = {
        "report_level": 5, "halt_level": 5, "warning_stream": False, "file_insertion_enabled":
        False, "raw_enabled": False, "doctitle_xform": False, "sectsubtitle_xform": False,
        "input_encoding": "unicode",
    }  # fmt: skip
    try:
        tree = publish_doctree(raw, source_path=source, settings_overrides=settings)
    except Exception as exc:  # docutils raises on some malformed tables and nesting
        raise LoadError(
            source,
            f"docutils cannot parse it ({type(exc).__name__}: {exc}); fix the markup near "
            "the line it names, or rename it to .txt to index it as plain text",
        ) from exc
    from ctxr.enrich.load.rst_render import render

    text = render(tree)
    if not text.strip():
        raise LoadError(source, "no text once directives and comments are dropped")
    first = re.search(r"^# (.+)$", text, re.MULTILINE)
    return Document(
        doc_id=source,
        source=source,
        text=text,
        kind="rst",
        title=first.group(1).strip() if first else path.name,
        sha256=text_hash(text),
    )


def _register_sphinx_markup() -> None:
    global _registered
    if _registered:
        return
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives, roles

    # Any option name is accepted (docutils asks the spec for each; an empty spec is falsy).
    any_option: defaultdict[str, Any] = defaultdict(
        lambda: directives.unchanged, {"class": directives.unchanged}
    )

    def xref(
        name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None,
        content: Any = None,
    ) -> tuple[list[Any], list[Any]]:  # fmt: skip
        # ":ref:`Title <target>`" shows "Title"; "~a.b.c" shows "c"; otherwise the text.
        shown = _TITLE_TARGET.sub(r"\1", text).strip() or text
        shown = shown.split(".")[-1] if shown.startswith("~") else shown.lstrip("!")
        return [nodes.literal(rawtext, shown.lstrip("~"))], []

    class Code(Directive):  # type: ignore[misc]  # docutils ships no types
        has_content = True
        optional_arguments = 1
        option_spec = any_option  # :linenos:, :emphasize-lines:, ... accepted, unused

        def run(self) -> list[Any]:
            block = nodes.literal_block("\n".join(self.content), "\n".join(self.content))
            block["language"] = self.arguments[0] if self.arguments else ""
            return [block]

    class Note(Directive):  # type: ignore[misc]  # docutils ships no types
        has_content = True
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = any_option

        def run(self) -> list[Any]:
            container = nodes.container()
            if self.arguments:
                label = self.name.replace("version", "version ").capitalize()
                container += nodes.paragraph(text=f"{label} {self.arguments[0]}")
            self.state.nested_parse(self.content, self.content_offset, container)
            return [container]

    class Dropped(Directive):  # type: ignore[misc]  # docutils ships no types
        has_content = True
        optional_arguments = 10
        final_argument_whitespace = True
        option_spec = any_option

        def run(self) -> list[Any]:
            return []

    for role in _SPHINX_ROLES:
        roles.register_local_role(role, xref)
    for name in _CODE_DIRECTIVES:
        directives.register_directive(name, Code)
    for name in _NOTE_DIRECTIVES:
        directives.register_directive(name, Note)
    for name in _DROPPED_DIRECTIVES:
        directives.register_directive(name, Dropped)
    _registered = True
