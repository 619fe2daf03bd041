"""The floor under code chunks: a chunk too small to hold a thought joins a neighbour.

Packing is greedy within one run of units, so small chunks are left where a run ends: the
closing bracket of an opened class, the header of a function whose body was opened, a lone
field between two long methods. Each would cost an embedding and an LLM request and say
little. ``merge_small`` joins every chunk under the floor with the neighbour before or after
it, whichever shares more of its symbol path (then whichever gives the smaller chunk), as long
as the joined chunk still fits; the joined chunk keeps the definitions both were inside. A
chunk with no neighbour it fits with stays as it is: its unit is that small, or its
neighbours are full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxr.enrich.split.sizing import Sized

__all__ = ["Chain", "Fits", "Out", "common_path", "merge_small"]

#: Signatures of the definitions a chunk is inside: (where the definition starts, signature).
Chain = tuple[tuple[int, str], ...]

#: Whether an embedded text (prefix, blank line, chunk text) fits the embedder's input.
Fits = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class Out:
    """A chunk being built: its span, symbol path and the definitions it is inside."""

    span: Sized
    path: tuple[str, ...]
    chain: Chain


def merge_small(
    outs: list[Out],
    floor: int,
    sized: Callable[[int, int], Sized],
    fits: Callable[[Sized, Chain], bool],
) -> list[Out]:
    """``outs`` with every chunk under ``floor`` tokens merged into a neighbour it fits with."""
    if floor <= 0 or len(outs) < 2:
        return outs
    outs = list(outs)
    i = 0
    while i < len(outs):
        small = outs[i]
        if small.span.tokens >= floor:
            i += 1
            continue
        best: tuple[tuple[int, int], int, Out] | None = None  # ((-shared, tokens), at, merged)
        for at in (i - 1, i):  # with the chunk before it, or with the chunk after it
            if at < 0 or at + 1 >= len(outs):
                continue
            first, second = outs[at], outs[at + 1]
            neighbour = first if at < i else second
            span = sized(first.span.start, second.span.end)
            chain = _common_chain(first.chain, second.chain)
            if not fits(span, chain):
                continue
            shared = len(common_path([small.path, neighbour.path]))
            merged = Out(span, common_path([first.path, second.path]), chain)
            if best is None or (-shared, span.tokens) < best[0]:
                best = ((-shared, span.tokens), at, merged)
        if best is None:
            i += 1
            continue
        _, at, merged = best
        outs[at : at + 2] = [merged]
        i = at  # the merged chunk may itself still be under the floor
    return outs


def common_path(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest symbol path that all of ``paths`` start with."""
    first = paths[0]
    size = len(first)
    for path in paths[1:]:
        size = min(size, len(path))
        while first[:size] != path[:size]:
            size -= 1
    return first[:size]


def _common_chain(a: Chain, b: Chain) -> Chain:
    size = 0
    while size < min(len(a), len(b)) and a[size] == b[size]:
        size += 1
    return a[:size]
