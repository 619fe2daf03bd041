"""HTML to Markdown-like text: what an HTML document's chunks store and their offsets refer to.

The page is parsed leniently (selectolax's lexbor backend, an HTML5 parser: malformed markup
is repaired the way browsers repair it, never rejected), stripped of what is not content, and
written out as Markdown so that the Markdown splitter's guarantees carry over unchanged:

* h1-h6 become ``#``-prefixed heading lines, so sections and heading trails follow the DOM;
* paragraphs and other blocks (div, section, article, ...) are separated by blank lines;
* list items are ``- `` or ``1. `` lines (nested lists indented), glued to a paragraph ending
  in ``:`` that introduces them;
* tables are pipe rows, the first row as header plus a ``|---|`` delimiter, so a long table is
  cut between rows with its header repeated; a table holding headings, ``<pre>`` or another
  table is layout, and its cells are read as ordinary blocks;
* ``<pre>`` becomes a fenced block (kept whole unless it alone exceeds the budget);
* elements nested deeper than `MAX_DEPTH` lose their tags, not their text: an HTML5 parser
  checks the stack of open elements on every tag, so 100k nested ``<div>``s took minutes to
  parse (quadratic); no real page nests that deep;
* scripts, styles, navigation, page-level header and footer, asides, forms' controls, hidden
  elements and comments are dropped; entities are decoded; whitespace is collapsed except
  inside ``<pre>``; a paragraph line that would read as Markdown structure is escaped with ``\\``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

__all__ = ["HTML_SUFFIXES", "HtmlText", "extract_html"]

HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
_DROP = (
    "script, style, noscript, template, nav, aside, iframe, object, embed, svg, canvas, "
    "button, select, input, textarea, [hidden], [aria-hidden=true], [role=navigation], "
    "[role=banner], [role=contentinfo], [role=search]"
)
_SECTIONING = {"article", "section", "main"}  # a header/footer inside one of these is content
_BLOCKS = {
    "address", "article", "blockquote", "body", "caption", "center", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header",
    "hgroup", "hr", "html", "legend", "main", "p", "section", "summary", "tbody", "td", "tfoot",
    "th", "thead", "tr",
}  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_LISTS = {"ul", "ol", "menu"}
_LAYOUT = "h1, h2, h3, h4, h5, h6, pre, table"
# A line that Markdown would read as a heading, fence, setext underline or table delimiter.
_STRUCTURAL = re.compile(r"^(?:#{1,6}(?:\s|$)|`{3}|~{3}|[-=|: ]+$)")
_BACKTICKS = re.compile(r"`+")
_BREAK = "\x00"  # a <br>; source newlines are only whitespace (NUL never survives parsing)
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang)-([\w+#.-]+)")
MAX_DEPTH = 256
# Elements whose end tag may not be left out, so counting their tags measures nesting; <p>, <li>
# and table parts close implicitly and would be counted deeper than they are.
_NESTING = {
    "a", "abbr", "article", "aside", "b", "bdi", "bdo", "blockquote", "center", "cite", "code",
    "del", "details", "dfn", "div", "dl", "em", "fieldset", "figure", "font", "form", "i", "ins",
    "kbd", "label", "main", "mark", "nobr", "ol", "q", "s", "samp", "section", "small", "span",
    "strike", "strong", "sub", "sup", "u", "ul", "var",
}  # fmt: skip
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)\b[^>]*?(/?)>")


@dataclass(frozen=True, slots=True)
class HtmlText:
    """The extracted text and the page's title (``<title>``, else the first h1; may be empty)."""

    text: str
    title: str


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _inline(node: LexborNode) -> str:
    """The node's text on one line: blocks and line breaks become spaces."""
    parts: list[str] = []
    for child in node.traverse(include_text=True):
        if child.is_text_node:
            parts.append(child.text_content or "")
        elif child.tag == "br" or child.tag in _BLOCKS or child.tag in _LISTS:
            parts.append(" ")
        elif child.tag == "img":
            parts.append(f" {child.attributes.get('alt') or ''} ")
    return _collapse("".join(parts))


def _page_level(node: LexborNode) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in _SECTIONING:
            return False
        parent = parent.parent
    return True


def _clean(root: LexborNode) -> None:
    for node in root.css(_DROP):
        node.decompose()
    for node in root.css("header, footer"):
        if _page_level(node):
            node.decompose()


def _fenced(node: LexborNode) -> str:
    body = node.text(deep=True)
    body = body[1:] if body.startswith("\n") else body
    body = "\n".join(line.rstrip() for line in body.rstrip().split("\n"))
    if not body.strip():
        return ""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(body)), default=0)
    fence = "`" * max(3, longest + 1)
    classes = " ".join(n.attributes.get("class") or "" for n in (node, *node.css("code")[:1]))
    match = _LANGUAGE.search(classes)
    return f"{fence}{match.group(1) if match else ''}\n{body}\n{fence}"


def _owner_table(node: LexborNode) -> LexborNode | None:
    parent = node.parent
    while parent is not None and parent.tag != "table":
        parent = parent.parent
    return parent


def _table(node: LexborNode) -> str:
    rows: list[list[str]] = []
    for tr in node.css("tr"):
        owner = _owner_table(tr)
        if owner is None or owner.mem_id != node.mem_id:
            continue  # a row of a nested table
        cells: list[str] = []
        for cell in tr.iter():
            if cell.tag in ("td", "th"):
                cells.append(_inline(cell).replace("|", "\\|"))
                span = cell.attributes.get("colspan") or "1"
                cells.extend([""] * (min(int(span), 50) - 1 if span.isdigit() else 0))
        if any(cells):
            rows.append(cells)
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines)


def _is_layout(table: LexborNode) -> bool:
    return any(node.mem_id != table.mem_id for node in table.css(_LAYOUT))


class _Writer:
    """Blocks of Markdown, collected while walking the DOM in document order."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str]] = []  # (kind, text): a list's items join tightly
        self.buffer: list[str] = []
        self.lists: list[list[int]] = []  # per open list: [ordered (0/1), next number]
        self.marker: str | None = None  # the pending marker of the innermost open item
        self.list_serial = 0  # numbers outermost lists, so two adjacent lists stay apart

    def flush(self) -> None:
        lines = [_collapse(line) for line in "".join(self.buffer).split(_BREAK)]
        self.buffer.clear()
        lines = ["\\" + line if _STRUCTURAL.match(line) else line for line in lines if line]
        if not lines:
            return
        if not self.lists:
            self.blocks.append(("para", "\n".join(lines)))
            return
        indent = "  " * len(self.lists)
        first = self.marker if self.marker is not None else indent
        self.marker = None
        text = "\n".join([first + lines[0], *(indent + line for line in lines[1:])])
        self.blocks.append((f"item{self.list_serial}", text))

    def block(self, kind: str, text: str) -> None:
        self.flush()
        if text:
            self.blocks.append((kind, text))

    def open_item(self) -> None:
        self.flush()
        state = self.lists[-1]
        bullet = f"{state[1]}. " if state[0] else "- "
        state[1] += 1
        self.marker = "  " * (len(self.lists) - 1) + bullet

    def text(self) -> str:
        out: list[str] = []
        prev_kind, prev_text = "", ""
        for kind, text in self.blocks:
            if out:
                tight = kind.startswith("item") and (
                    prev_kind == kind or (prev_kind == "para" and prev_text.endswith(":"))
                )
                out.append("\n" if tight else "\n\n")
            out.append(text)
            prev_kind, prev_text = kind, text
        return "".join(out)


def _walk(root: LexborNode) -> str:
    writer = _Writer()
    # An explicit stack, not recursion: malformed pages can nest thousands of elements deep.
    stack: list[LexborNode | str] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, str):  # the exit marker of an element
            writer.flush()
            if item == "list":
                writer.lists.pop()
            elif item == "item":
                writer.marker = None
            continue
        if item.is_text_node:
            writer.buffer.append(item.text_content or "")
            continue
        tag = item.tag or ""
        if tag in _HEADINGS:
            title = _inline(item)
            writer.block("heading", f"{'#' * _HEADINGS[tag]} {title}" if title else "")
            continue
        if tag == "pre":
            writer.block("fence", _fenced(item))
            continue
        if tag == "table" and not _is_layout(item):
            caption = item.css_first("caption")
            writer.block("para", _inline(caption) if caption is not None else "")
            writer.block("table", _table(item))
            continue
        if tag == "br":
            writer.buffer.append(_BREAK)
        elif tag == "img":
            writer.buffer.append(f" {item.attributes.get('alt') or ''} ")
        elif tag in _LISTS:
            writer.flush()
            writer.list_serial += not writer.lists
            writer.lists.append([1 if tag == "ol" else 0, 1])
            stack.append("list")
        elif tag == "li":
            if not writer.lists:  # a stray <li>: read it as a bullet of a list of its own
                writer.flush()
                writer.list_serial += 1
                writer.lists.append([0, 1])
                stack.append("list")
            writer.open_item()
            stack.append("item")
        elif tag in _BLOCKS:
            writer.flush()
            stack.append("block")
        stack.extend(reversed(list(item.iter(include_text=True))))
    writer.flush()
    return writer.text()


def _flatten_deep(html: str, limit: int = MAX_DEPTH) -> str:
    """`html` without the tags of elements nested deeper than `limit` (their text stays)."""
    if html.count("<") <= limit:
        return html  # cannot nest that deep: the common case costs one count
    out: list[str] = []
    depth = kept = 0
    for match in _TAG.finditer(html):
        closing, name, self_closing = match.group(1), match.group(2).lower(), match.group(3)
        if name not in _NESTING or self_closing:
            continue
        if closing:
            depth = max(depth - 1, 0)
            if depth >= limit:
                out.append(html[kept : match.start()])
                kept = match.end()
        else:
            depth += 1
            if depth > limit:
                out.append(html[kept : match.start()])
                kept = match.end()
    if not out:
        return html
    out.append(html[kept:])
    return " ".join(out)


def extract_html(html: str) -> HtmlText:
    """The Markdown-like text of an HTML page and its title; never raises on bad markup."""
    tree = LexborHTMLParser(_flatten_deep(html))
    title_node = tree.css_first("title")
    title = _collapse(title_node.text()) if title_node is not None else ""
    root = tree.body or tree.root
    if root is None:
        return HtmlText("", title)
    _clean(root)
    if not title:
        h1 = root.css_first("h1")
        title = _inline(h1) if h1 is not None else ""
    return HtmlText(_walk(root), title)
