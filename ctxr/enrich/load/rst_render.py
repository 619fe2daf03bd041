"""A docutils doctree as Markdown-like text: headings, paragraphs, lists, tables, code fences.

Only what the Markdown splitter reads is given Markdown syntax: ``#`` headings by section
depth, fenced code, ``|`` tables with a delimiter row (so a cut table repeats its header) and
list items. Inline markup is reduced to its text, which is what retrieval reads. A paragraph
line that starts with ``#`` is escaped, so it cannot pose as a heading.
"""

from __future__ import annotations

import re
from typing import Any

_ADMONITIONS = (
    "note", "warning", "tip", "important", "attention", "caution", "danger", "error", "hint",
)  # fmt: skip
_SKIPPED = (
    "comment", "system_message", "substitution_definition", "target", "raw", "meta",
    "decoration", "pending", "title_reference_target",
)  # fmt: skip
_LEADING_HASH = re.compile(r"^([ \t]*)#", re.MULTILINE)
_FENCE_RUN = re.compile(r"`{3,}")


def render(tree: Any) -> str:
    """The document's text: its blocks separated by blank lines, ending in one newline."""
    text = "\n\n".join(_blocks(tree.children, depth=0))
    return text.strip("\n") + "\n" if text.strip() else ""


def _blocks(children: Any, depth: int) -> list[str]:
    out: list[str] = []
    for child in children:
        out.extend(block for block in _block(child, depth) if block.strip())
    return out


def _block(node: Any, depth: int) -> list[str]:
    from docutils import nodes

    name = node.tagname
    if name in _SKIPPED or isinstance(node, nodes.Invisible):
        return []
    if isinstance(node, nodes.section):
        level = min(depth + 1, 6)
        title = node.next_node(nodes.title)
        heading = [f"{'#' * level} {_line(title.astext())}"] if title is not None else []
        rest = [child for child in node.children if child is not title]
        return heading + _blocks(rest, depth + 1)
    if isinstance(node, nodes.literal_block | nodes.doctest_block):
        return [_fence(node)]
    if isinstance(node, nodes.bullet_list | nodes.enumerated_list):
        return [_list(node, depth)]
    if isinstance(node, nodes.definition_list):
        return [_definitions(node, depth)]
    if isinstance(node, nodes.field_list):
        return [
            f"{_line(field[0].astext())}: " + _indent(" ".join(_blocks(field[1].children, depth)))
            for field in node.children
        ]
    if isinstance(node, nodes.table):
        return _table(node)
    if isinstance(node, nodes.transition):
        return ["* * *"]  # not "---": under a paragraph that would read as a heading
    if isinstance(node, nodes.Admonition):
        label = name.capitalize() if name in _ADMONITIONS else ""
        title = node.next_node(nodes.title) if not label else None
        label = label or (_line(title.astext()) if title is not None else "Note")
        body = _blocks([c for c in node.children if c is not title], depth)
        return [f"{label}: {body[0]}", *body[1:]] if body else []
    if isinstance(node, nodes.topic | nodes.sidebar | nodes.rubric | nodes.title):
        if isinstance(node, nodes.rubric | nodes.title):
            return [_paragraph(node.astext())]
        return _blocks(node.children, depth)
    if isinstance(node, nodes.image):
        alt = node.get("alt", "")
        return [_paragraph(alt)] if alt else []
    if isinstance(node, nodes.line_block):
        return ["\n".join(_paragraph(line.astext()) for line in node.findall(nodes.line))]
    if isinstance(node, nodes.footnote | nodes.citation):
        label = node.next_node(nodes.label)
        body = _blocks([c for c in node.children if c is not label], depth)
        mark = f"[{label.astext()}] " if label is not None else ""
        return [mark + body[0], *body[1:]] if body else []
    if isinstance(node, nodes.TextElement):
        return [_paragraph(node.astext())]
    return _blocks(node.children, depth)


def _line(text: str) -> str:
    return " ".join(text.split())


def _paragraph(text: str) -> str:
    return _LEADING_HASH.sub(r"\1\\#", text.strip())


def _indent(text: str, by: str = "  ") -> str:
    return text.replace("\n", "\n" + by)


def _fence(node: Any) -> str:
    code = node.astext().rstrip()
    classes = [c for c in node.get("classes", []) if c != "code"]
    language = node.get("language") or (classes[0] if classes else "")
    if node.tagname == "doctest_block":
        language = "pycon"
    longest = max((len(run) for run in _FENCE_RUN.findall(code)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{code}\n{fence}"


def _list(node: Any, depth: int) -> str:
    from docutils import nodes

    items = []
    start = int(node.get("start", 1))
    for k, item in enumerate(node.children):
        mark = f"{start + k}. " if isinstance(node, nodes.enumerated_list) else "- "
        body = "\n\n".join(_blocks(item.children, depth))
        items.append(mark + _indent(body, " " * len(mark)))
    return "\n".join(items)


def _definitions(node: Any, depth: int) -> str:
    from docutils import nodes

    entries = []
    for item in node.children:
        term = " : ".join(_line(c.astext()) for c in item.children if not _is_definition(c))
        definition = item.next_node(nodes.definition)
        body = "\n\n".join(_blocks(definition.children, depth)) if definition is not None else ""
        entries.append(_paragraph(term) + ("\n    " + _indent(body, "    ") if body else ""))
    return "\n\n".join(entries)


def _is_definition(node: Any) -> bool:
    return bool(node.tagname == "definition")


def _table(node: Any) -> list[str]:
    from docutils import nodes

    rows: list[list[str]] = []
    header_rows = 0
    for group in node.findall(nodes.thead):
        header_rows += len(list(group.findall(nodes.row)))
    for row in node.findall(nodes.row):
        rows.append([_line(entry.astext()).replace("|", "\\|") for entry in row.children])
    if not rows:
        return []
    width = max(len(row) for row in rows)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
    # A Markdown table needs a header; a table without one takes its first row.
    lines.insert(max(1, header_rows), "|" + " --- |" * width)
    return ["\n".join(lines)]
