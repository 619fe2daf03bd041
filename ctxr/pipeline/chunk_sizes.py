"""The size distribution of chunks per document kind, as `ctxr split` and `ctxr index` report it.

Chunk geometry decides what an embedder reads and how many LLM requests a context run makes,
so both commands say how big the chunks came out: count, quantiles and a coarse histogram of
tiktoken tokens per kind (markdown, code, text, ...), over the chunks' own text (the prefix
and context come on top)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxr.types import Chunk

__all__ = ["BINS", "ChunkSizes"]

#: Histogram bins in tokens: (label, lower bound inclusive); each runs to the next bound.
BINS: tuple[tuple[str, int], ...] = (
    ("<20", 0), ("20-39", 20), ("40-79", 40), ("80-159", 80), ("160-319", 160), (">=320", 320),
)  # fmt: skip


class ChunkSizes:
    """Token counts of chunks, gathered per kind."""

    def __init__(self) -> None:
        self._tokens: dict[str, list[int]] = {}

    def add(self, kind: str, chunks: Iterable[Chunk]) -> None:
        self._tokens.setdefault(kind, []).extend(c.token_count for c in chunks)

    def to_json(self) -> dict[str, dict[str, object]]:
        return {kind: summary(tokens) for kind, tokens in sorted(self._tokens.items()) if tokens}

    def lines(self) -> list[str]:
        """One human-readable line per kind."""
        out = []
        for kind, s in self.to_json().items():
            out.append(
                f"{kind}: {s['chunks']} chunks, median {s['median']} tokens "
                f"(p10 {s['p10']}, p90 {s['p90']}, max {s['max']}), "
                f"{s['share_under_40']:.0%} under 40"
            )
        return out


def summary(tokens: Sequence[int]) -> dict[str, object]:
    ordered = sorted(tokens)
    n = len(ordered)
    histogram = {label: 0 for label, _ in BINS}
    for t in ordered:
        label = next(label for label, low in reversed(BINS) if t >= low)
        histogram[label] += 1
    return {
        "chunks": n,
        "min": ordered[0],
        "p10": _quantile(ordered, 0.1),
        "median": _quantile(ordered, 0.5),
        "p90": _quantile(ordered, 0.9),
        "max": ordered[-1],
        "mean": round(sum(ordered) / n, 1),
        "share_under_40": round(sum(1 for t in ordered if t < 40) / n, 4),
        "histogram": histogram,
    }


def _quantile(ordered: Sequence[int], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, statistics' 'inclusive')."""
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    value = ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
    return round(value, 1)
