"""Splitting source code on syntax-tree boundaries (tree-sitter), sized in tokens.

The file is cut into units that partition it: each top-level node, with the comments,
attributes and decorators directly above it (no blank line between), runs up to the start of
the next unit, so stray punctuation between nodes is never lost. Consecutive units that fit
are packed greedily up to the budget. A unit that does not fit is opened: a class, impl block,
namespace or struct becomes its header (signature, docstring) plus its members, each a unit
of its own; a function becomes its header plus the statements of its body; the closing
bracket joins the last chunk when it fits. What has no body left to open (a long statement, a
huge signature) falls back to the recursive code ladder (``CODE_LEVELS``).

Each chunk's ``heading_path`` is its symbol path (``("ThumbnailCache", "evict")``): the common
path of the definitions it holds. A chunk inside an opened definition carries, in ``prefix``,
the file's import block and the signatures of the definitions it is inside (those that do not
already start within the chunk), so that embedding and BM25 see them; the prefix is never
part of ``text``. The import block is cut between imports to at most 64 tokens or a quarter
of the budget, whichever is more.

tree-sitter reports UTF-8 byte offsets; they are mapped to ``str`` indices before use.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from ctxr.enrich.split.code_languages import (
    IMPORT_TYPES,
    LEADING_TYPES,
    STATEMENT_BODIES,
    SUPPORTED,
    find_body,
    is_classish,
    is_definition,
    parser_for,
    symbol_name,
    unwrap,
)
from ctxr.enrich.split.recursive import CODE_LEVELS, add_overlap, split_span
from ctxr.enrich.split.sizing import Piece, Sized, Sizer, char_byte_offsets, pack, trim

__all__ = ["CODE_SPLIT_LANGUAGES", "split_code"]

CODE_SPLIT_LANGUAGES = SUPPORTED
_MAX_DEPTH = 48
# Named only at file or class level: ``const handler = () => ...`` but not a local variable.
_BINDINGS = frozenset(("lexical_declaration", "variable_declaration"))


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    path: tuple[str, ...]
    named: bool  # carries a symbol of its own (not a comment, statement or bracket)
    node: Node | None = None  # the definition or statement it holds, if it can be opened
    glue: bool = False  # a closing bracket: joins the chunk before it when it fits


# Signatures of the definitions a unit is inside: (where the definition starts, signature).
_Chain = tuple[tuple[int, str], ...]


class _CodeSplitter:
    def __init__(self, sizer: Sizer, language: str, budget: int, max_tokens: int) -> None:
        self.sizer = sizer
        self.text = sizer.text
        self.language = language
        self.budget = budget
        self.raw = self.text.encode("utf-8")
        # Byte offset at which each character starts; None when every character is one byte.
        self._starts = char_byte_offsets(self.text)
        self.imports = ""
        self.import_span = (0, 0)
        self._import_cap = max(64, max_tokens // 4)

    def char(self, byte: int) -> int:
        if self._starts is None:
            return byte
        return int(self._starts.searchsorted(byte))

    def split(self, root: Node) -> list[Piece]:
        children = root.named_children  # (each access builds the Node objects anew)
        self._find_imports(children)
        units = self._partition(children, 0, len(self.text), (), in_function=False)
        return self._process(units, ())

    def _find_imports(self, children: list[Node]) -> None:
        nodes = [c for c in children if c.type in IMPORT_TYPES]
        if not nodes:
            return
        encode = self.sizer.encoding.encode_ordinary
        lines: list[str] = []
        joined_with_newline = 0  # tokens of "\n".join(lines) + "\n"
        for node in nodes:
            start, end = self.char(node.start_byte), self.char(node.end_byte)
            line = self.text[start:end].strip()
            # The join's tokens add up line by line when a line starts with neither
            # whitespace nor "/": it then starts a tokenizer piece (see token_index).
            additive = line[:1] not in ("", "/")
            if additive:
                total = joined_with_newline + len(encode(line))
            else:
                total = len(encode("\n".join([*lines, line])))
            if total > self._import_cap:
                break
            lines.append(line)
            if additive:
                joined_with_newline += len(encode(line + "\n"))
            else:
                joined_with_newline = len(encode("\n".join(lines) + "\n"))
        self.imports = "\n".join(lines)
        self.import_span = (self.char(nodes[0].start_byte), self.char(nodes[-1].end_byte))

    def _partition(
        self, nodes: list[Node], start: int, end: int, path: tuple[str, ...], in_function: bool
    ) -> list[_Unit]:
        """Units covering ``text[start:end]``: one per node, leading comments joined below."""
        heads: list[tuple[int, Node]] = []  # (unit start, node), in order
        pending: int | None = None  # start of a run of leading comments not yet placed
        for node in nodes:
            n_start, n_end = self.char(node.start_byte), self.char(node.end_byte)
            if n_end <= n_start or n_start < start or n_end > end:
                continue
            if (
                heads
                and node.type in LEADING_TYPES
                and not self._newline_between(heads[-1][1], node)
            ):
                continue  # a comment at the end of a line stays with the code on that line
            if pending is not None and not self._blank_line_between(heads[-1][1], node):
                heads.pop()  # the comment run joins this node
                n_start_unit = pending
            else:
                n_start_unit = n_start
            heads.append((n_start_unit, node))
            pending = n_start_unit if node.type in LEADING_TYPES else None
        units: list[_Unit] = []
        bounds = [s for s, _ in heads[1:]] + [end] if heads else []
        first = True
        for (u_start, node), u_end in zip(heads, bounds, strict=True):
            span = trim(self.text, start if first else u_start, u_end)
            first = False
            if span is None:
                continue
            definition = unwrap(node)
            own: tuple[str, ...] = ()
            if node.type not in LEADING_TYPES and (
                is_definition(definition) or (not in_function and definition.type in _BINDINGS)
            ):
                own = symbol_name(definition, self.language)
            units.append(_Unit(span[0], span[1], path + own, bool(own), node))
        if not units:
            span = trim(self.text, start, end)
            if span is not None:
                units.append(_Unit(span[0], span[1], path, False))
        return units

    def _newline_between(self, before: Node, after: Node) -> bool:
        return b"\n" in self.raw[before.end_byte : after.start_byte]

    def _blank_line_between(self, before: Node, after: Node) -> bool:
        gap = self.raw[before.end_byte : after.start_byte]
        return gap.count(b"\n") > 1

    def _process(self, units: list[_Unit], chain: _Chain, depth: int = 0) -> list[Piece]:
        out: list[Piece] = []
        group: list[tuple[Sized, _Unit]] = []
        for unit in units:
            sized = self.sizer.sized(unit.start, unit.end)
            if sized.tokens <= self.budget:
                group.append((sized, unit))
                continue
            mark = len(out)
            self._flush(group, chain, out)
            group = []
            # A short chunk just before an oversized unit (the imports before a long class, a
            # lone signature line before a long docstring) joins its first chunk, not alone.
            lead = None
            if len(out) > mark and out[-1].span.tokens <= self.budget // 4:
                lead = out.pop()
            out.extend(self._open(unit, sized, chain, depth, lead))
        self._flush(group, chain, out)
        return out

    def _flush(self, group: list[tuple[Sized, _Unit]], chain: _Chain, out: list[Piece]) -> None:
        if not group:
            return
        chunks = pack(self.sizer, [s for s, _ in group], self.budget)
        i = 0
        for chunk in chunks:
            members: list[_Unit] = []
            while i < len(group) and group[i][1].start < chunk.end:
                members.append(group[i][1])
                i += 1
            if out and all(u.glue for u in members):
                last = out[-1].span
                count = self.sizer.count(last.start, chunk.end)
                if count <= self.budget:
                    merged = Sized(last.start, chunk.end, count)
                    out[-1] = Piece(merged, out[-1].heading_path, out[-1].prefix)
                    continue
            named = [u.path for u in members if u.named] or [u.path for u in members]
            out.append(Piece(chunk, _common(named), self._prefix(chunk, chain, named)))

    def _open(
        self, unit: _Unit, sized: Sized, chain: _Chain, depth: int, lead: Piece | None
    ) -> list[Piece]:
        """Split an oversized unit into its header, members or statements, and closing."""
        node = unit.node
        definition = unwrap(node) if node is not None else None
        body = find_body(definition) if definition is not None else None
        if body is not None and depth < _MAX_DEPTH:
            assert definition is not None and node is not None
            members = body.named_children
            first_start = self.char(members[0].start_byte)
            last_end = self.char(members[-1].end_byte)
            if unit.start <= first_start and last_end <= unit.end:
                in_function = body.type in STATEMENT_BODIES and not is_classish(definition)
                inner = self._partition(members, first_start, last_end, unit.path, in_function)
                header = trim(self.text, unit.start, first_start)
                closing = trim(self.text, last_end, unit.end)
                units = [_Unit(*header, unit.path, True)] if header else []
                units.extend(inner)
                if closing:
                    units.append(_Unit(*closing, unit.path, False, glue=True))
                if len(units) > 1:
                    if lead is not None:  # the opened unit's header will pack with it
                        path = lead.heading_path
                        units.insert(0, _Unit(lead.span.start, lead.span.end, path, bool(path)))
                    sig_start = max(unit.start, self.char(node.start_byte))
                    signature = trim(self.text, sig_start, first_start)
                    inner_chain = chain
                    if signature:
                        sig_text = self.text[signature[0] : signature[1]]
                        inner_chain = (*chain, (signature[0], sig_text))
                    return self._process(units, inner_chain, depth + 1)
        pieces = split_span(
            self.sizer, sized, CODE_LEVELS, self.budget, lead.span if lead else None
        )
        out: list[Piece] = []
        for piece in pieces:
            path = unit.path
            if lead is not None and piece.start <= lead.span.start:
                path = _common([lead.heading_path, unit.path])
            out.append(Piece(piece, path, self._prefix(piece, chain, [path])))
        return out

    def _prefix(self, chunk: Sized, chain: _Chain, paths: list[tuple[str, ...]]) -> str:
        parts: list[str] = []
        i_start, i_end = self.import_span
        inside = bool(chain) or any(paths)
        if self.imports and inside and not (chunk.start < i_end and i_start < chunk.end):
            parts.append(self.imports)
        parts.extend(sig for start, sig in chain if start < chunk.start)
        return "\n\n".join(parts)


def _common(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    first = paths[0]
    size = len(first)
    for path in paths[1:]:
        size = min(size, len(path))
        while first[:size] != path[:size]:
            size -= 1
    return first[:size]


def split_code(
    sizer: Sizer, language: str | None, source: str, max_tokens: int, overlap: int
) -> list[Piece] | None:
    """Chunks of a code file cut on syntax boundaries; None for a language without a grammar
    here (or whose grammar cannot load), which the caller splits by lines instead."""
    if language not in CODE_SPLIT_LANGUAGES:
        return None
    if language == "typescript" and source.lower().endswith(".tsx"):
        language = "tsx"
    parser = parser_for(language)
    if parser is None:
        return None
    splitter = _CodeSplitter(sizer, language, max_tokens - overlap, max_tokens)
    tree = parser.parse(splitter.raw)
    pieces = splitter.split(tree.root_node)
    if overlap <= 0 or len(pieces) < 2:
        return pieces
    spans = add_overlap(sizer, [p.span for p in pieces], overlap, max_tokens)
    return [Piece(s, p.heading_path, p.prefix) for s, p in zip(spans, pieces, strict=True)]
