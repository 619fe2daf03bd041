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
part of ``text``. It holds only the imports the chunk uses and the first line of each
signature, within ``prefix_tokens`` (see ``ctxr.enrich.split.code_prefix``). The file's head
(licence, package line, imports), which is inside no definition, gets instead the first lines
of the definitions that follow it: "which package is BadParametersException in?" finds the
head that says so only if the head names the class (code set Pass@10 87.5 -> 89.7).

Two constraints shape the chunks besides the budget. ``fits`` (when given) says whether a
chunk's prefix and text fit the embedder's input: a unit that does not is opened like one over
budget, and packing stops before it, so a long function is cut at its statements rather than
later by lines. And a chunk under ``floor_tokens`` is merged into a neighbour (the one whose
symbol path it shares most) when the two together still fit: a closing bracket, a lone
field or a two-line helper is not worth a chunk, an embedding and an LLM request of its own.
Only a unit that has no neighbour it fits with stays under the floor.

tree-sitter reports UTF-8 byte offsets; they are mapped to ``str`` indices before use.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from ctxr.enrich.split.code_floor import Chain, Fits, Out, common_path, merge_small
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
from ctxr.enrich.split.code_prefix import ImportLine, Prefixes
from ctxr.enrich.split.recursive import CODE_LEVELS, add_overlap, split_span
from ctxr.enrich.split.sizing import Piece, Sized, Sizer, char_byte_offsets, trim

__all__ = ["CODE_SPLIT_LANGUAGES", "split_code"]

CODE_SPLIT_LANGUAGES = SUPPORTED
_MAX_DEPTH = 48
#: A prefix's share of the budget (tokens), and the floor under which a chunk is merged into
#: a neighbour, as a share of the budget. The prefix share was chosen by 5-fold
#: cross-validation over the anthropic-codebase queries (every fold picked 1/16 among 1/16,
#: 1/8, 1/4; bench/quality/code_cv.py, docs/explanation/evaluation.md); the floor is the
#: smallest of those tried (0, 1/4, 0.4) that keeps fewer than a tenth of the set's code chunks
#: under 40 tokens.
PREFIX_SHARE = 0.0625
FLOOR_SHARE = 0.25
PREFIX_MIN_TOKENS = 16  # room for one signature line even at a small budget
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


class _CodeSplitter:
    def __init__(
        self,
        sizer: Sizer,
        language: str,
        budget: int,
        *,
        prefix_tokens: int,
        floor_tokens: int,
        fits: Fits | None,
    ) -> None:
        self.sizer = sizer
        self.text = sizer.text
        self.language = language
        self.budget = budget
        self.raw = self.text.encode("utf-8")
        # Byte offset at which each character starts; None when every character is one byte.
        self._starts = char_byte_offsets(self.text)
        encode = sizer.encoding.encode_ordinary
        self.prefixes = Prefixes(self.text, prefix_tokens, lambda text: len(encode(text)))
        self.floor_tokens = floor_tokens
        self._fits = fits

    def char(self, byte: int) -> int:
        if self._starts is None:
            return byte
        return int(self._starts.searchsorted(byte))

    def split(self, root: Node) -> list[Piece]:
        children = root.named_children  # (each access builds the Node objects anew)
        self._find_imports(children)
        units = self._partition(children, 0, len(self.text), (), in_function=False)
        self.prefixes.outline = [(u.start, u.end) for u in units if u.named]
        outs = merge_small(self._process(units, ()), self.floor_tokens, self.sizer.sized, self.fits)
        return [Piece(o.span, o.path, self.prefix(o.span, o.chain)) for o in outs]

    def _find_imports(self, children: list[Node]) -> None:
        nodes = [c for c in children if c.type in IMPORT_TYPES]
        if not nodes:
            return
        for node in nodes:
            start, end = self.char(node.start_byte), self.char(node.end_byte)
            self.prefixes.imports.append(ImportLine.of(self.text[start:end]))
        first, last = self.char(nodes[0].start_byte), self.char(nodes[-1].end_byte)
        self.prefixes.import_span = (first, last)

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

    def _process(self, units: list[_Unit], chain: Chain, depth: int = 0) -> list[Out]:
        out: list[Out] = []
        group: list[tuple[Sized, _Unit]] = []
        for unit in units:
            sized = self.sizer.sized(unit.start, unit.end)
            if self.fits(sized, chain):
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

    def fits(self, span: Sized, chain: Chain) -> bool:
        """Within the token budget and, with its prefix, within the embedder's input."""
        if span.tokens > self.budget:
            return False
        if self._fits is None:
            return True
        prefix = self.prefix(span, chain)
        body = self.text[span.start : span.end]
        return self._fits(f"{prefix}\n\n{body}" if prefix else body)

    def _flush(self, group: list[tuple[Sized, _Unit]], chain: Chain, out: list[Out]) -> None:
        """Pack consecutive units greedily while the joined chunk fits (see ``fits``)."""
        i, n = 0, len(group)
        while i < n:
            chunk, j = group[i][0], i + 1
            while j < n:
                joined = self.sizer.sized(chunk.start, group[j][0].end)
                if not self.fits(joined, chain):
                    break
                chunk, j = joined, j + 1
            members = [u for _, u in group[i:j]]
            i = j
            if out and all(u.glue for u in members):
                last = out[-1]
                merged = self.sizer.sized(last.span.start, chunk.end)
                if self.fits(merged, last.chain):
                    out[-1] = Out(merged, last.path, last.chain)
                    continue
            named = [u.path for u in members if u.named] or [u.path for u in members]
            out.append(Out(chunk, common_path(named), chain))

    def _open(
        self, unit: _Unit, sized: Sized, chain: Chain, depth: int, lead: Out | None
    ) -> list[Out]:
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
                        path = lead.path
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
        out: list[Out] = []
        for piece in pieces:
            path = unit.path
            if lead is not None and piece.start <= lead.span.start:
                path = common_path([lead.path, unit.path])
            out.append(Out(piece, path, chain))
        return out

    def prefix(self, chunk: Sized, chain: Chain) -> str:
        return self.prefixes.of(chunk.start, chunk.end, chain)


def split_code(
    sizer: Sizer,
    language: str | None,
    source: str,
    max_tokens: int,
    overlap: int,
    *,
    fits: Fits | None = None,
    prefix_tokens: int | None = None,
    floor_tokens: int | None = None,
) -> list[Piece] | None:
    """Chunks of a code file cut on syntax boundaries; None for a language without a grammar
    here (or whose grammar cannot load), which the caller splits by lines instead.

    ``prefix_tokens`` and ``floor_tokens`` default to ``PREFIX_SHARE`` and ``FLOOR_SHARE`` of
    the budget; ``fits`` is the embedder's input check (None: the budget alone)."""
    if language not in CODE_SPLIT_LANGUAGES:
        return None
    if language == "typescript" and source.lower().endswith(".tsx"):
        language = "tsx"
    parser = parser_for(language)
    if parser is None:
        return None
    budget = max_tokens - overlap
    splitter = _CodeSplitter(
        sizer,
        language,
        budget,
        prefix_tokens=(
            max(PREFIX_MIN_TOKENS, int(max_tokens * PREFIX_SHARE))
            if prefix_tokens is None
            else prefix_tokens
        ),
        floor_tokens=int(budget * FLOOR_SHARE) if floor_tokens is None else floor_tokens,
        fits=fits,
    )
    tree = parser.parse(splitter.raw)
    pieces = splitter.split(tree.root_node)
    if overlap <= 0 or len(pieces) < 2:
        return pieces
    spans = add_overlap(sizer, [p.span for p in pieces], overlap, max_tokens)
    return [Piece(s, p.heading_path, p.prefix) for s, p in zip(spans, pieces, strict=True)]
