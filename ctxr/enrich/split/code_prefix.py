"""What a code chunk carries in its prefix, within a bounded share of the embedder's input.

A chunk inside a definition loses what it is about when cut from its file: the names it
uses come from imports at the top, and the definition it sits in is named lines above. The
prefix gives both back, but every token of it is a token of the chunk that the embedder no
longer reads, so it is kept small and relevant:

* only the import statements that bring in a name the chunk actually uses (an identifier of
  the statement, other than the language's keywords and the usual roots such as ``std`` or
  ``java``, occurs in the chunk's text);
* the signatures of the definitions the chunk is inside, each cut to its first line of code
  (annotations, attributes and comments above it skipped): ``impl<A> Executor for Diff<A>``
  says where the chunk is; a ``where`` clause twenty lines long does not;
* the whole cut to ``budget`` tokens: the innermost signature first (cut at a space if it
  alone is over), then the outer ones, then the used imports in file order, each of those
  taken whole or not at all.

The parts are joined imports first, then signatures from the outermost in, so the prefix
reads like the top of the file. A chunk that holds the file's head gets ``outline`` instead:
the first lines of the definitions that follow it, in order, while the budget lasts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["ImportLine", "Prefixes", "build_prefix", "signature_line"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words of import syntax and package roots that name nothing a chunk would use.
_NOT_NAMES = frozenset(
    (
        *("use", "import", "from", "as", "include", "package", "pub", "crate", "self", "super"),
        *("extern", "static", "using", "namespace", "mod", "std", "core", "alloc", "java"),
        *("javax", "org", "com", "net", "io", "h", "hpp", "hh", "typing", "__future__"),
        *("annotations", "type", "in", "for"),
    )
)
_SKIPPED_LINE_STARTS = ("@", "#[", "#![", "//", "/*", "*", "#")


@dataclass(frozen=True, slots=True)
class ImportLine:
    """One import statement of the file and the names it may bring into scope."""

    text: str
    names: frozenset[str]

    @classmethod
    def of(cls, text: str) -> ImportLine:
        text = text.strip()
        return cls(text, frozenset(_IDENTIFIER.findall(text)) - _NOT_NAMES)


class Prefixes:
    """The prefixes of one file's chunks: its imports, its top-level definitions, a cache."""

    def __init__(self, text: str, budget: int, count: Callable[[str], int]) -> None:
        self.text = text
        self.budget = budget
        self.count = count
        self.imports: list[ImportLine] = []
        self.import_span = (0, 0)
        self.outline: list[tuple[int, int]] = []  # spans of the top-level definitions
        self._cache: dict[tuple[int, int, tuple[tuple[int, str], ...]], str] = {}

    def of(self, start: int, end: int, chain: tuple[tuple[int, str], ...]) -> str:
        """The prefix of ``text[start:end]`` inside the definitions ``chain`` (start, signature)."""
        key = (start, end, chain)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        i_start, i_end = self.import_span
        holds_imports = start < i_end and i_start < end
        outline = (
            [self.text[s:e] for s, e in self.outline if s >= end]
            if holds_imports and not chain
            else []
        )
        prefix = build_prefix(
            self.text[start:end],
            [] if holds_imports else self.imports,
            [sig for s, sig in chain if s < start],
            self.budget,
            self.count,
            outline=outline,
        )
        self._cache[key] = prefix
        return prefix


def signature_line(signature: str) -> str:
    """A definition's signature cut to its first line of code (the line that names it)."""
    lines = [line.strip() for line in signature.splitlines() if line.strip()]
    code = [line for line in lines if not line.startswith(_SKIPPED_LINE_STARTS)]
    if not code:
        return lines[0] if lines else ""
    # C/C++ often put the return type on a line of its own: keep it with the name.
    if len(code) > 1 and "(" not in code[0] and "(" in code[1] and len(code[0]) < 24:
        return f"{code[0]} {code[1]}"
    return code[0]


def build_prefix(
    chunk_text: str,
    imports: Sequence[ImportLine],
    signatures: Sequence[str],
    budget: int,
    count: Callable[[str], int],
    *,
    outline: Sequence[str] = (),
) -> str:
    """The prefix of a chunk: used imports and its enclosing signatures within ``budget``."""
    if budget <= 0 or not (imports or signatures or outline):
        return ""
    total = 0
    chosen_signatures: list[str] = []
    for signature in reversed(signatures):  # innermost first: it says most about the chunk
        line = signature_line(signature)
        if not line or line in chunk_text:
            continue
        cost = count(line) + 2  # the blank line that joins it
        if total + cost > budget and not chosen_signatures:
            line = _cut(line, budget - total - 2, count)  # the innermost is kept, cut
            cost = count(line) + 2
        if not line or total + cost > budget:
            break
        chosen_signatures.insert(0, line)
        total += cost
    used = set(_IDENTIFIER.findall(chunk_text)) if imports else set()
    chosen_imports: list[str] = []
    for statement in imports:
        if not statement.names & used:
            continue
        cost = count(statement.text) + 1
        if total + cost > budget:
            continue  # a shorter import further down may still fit
        chosen_imports.append(statement.text)
        total += cost
    chosen_outline: list[str] = []
    for definition in outline:  # what the file defines next, in order, while room is left
        line = signature_line(definition)
        cost = count(line) + 1
        if not line or total + cost > budget:
            break
        chosen_outline.append(line)
        total += cost
    parts = ["\n".join(chosen_imports)] if chosen_imports else []
    parts.extend(chosen_signatures)
    if chosen_outline:
        parts.append("\n".join(chosen_outline))
    return "\n\n".join(parts)


def _cut(line: str, tokens: int, count: Callable[[str], int]) -> str:
    """``line`` cut at a space to at most ``tokens`` tokens ("" when nothing fits)."""
    while line and count(line) > tokens:
        cut = line.rfind(" ", 0, max(1, len(line) * 4 // 5))
        line = line[:cut].rstrip() if cut > 0 else ""
    return line
