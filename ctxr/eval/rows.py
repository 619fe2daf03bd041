"""An evaluation's rows: `MODE[:CONTEXT[:FUSION]]` specs, parsed and checked before any work.

Kept apart from the runner so that `ctxr eval --help` needs none of the indexing stack."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ctxr.config import FUSIONS
from ctxr.errors import ConfigError

DatasetKind = Literal["anthropic-codebase", "beir"]


ChunkSource = Literal["given", "ours"]


#: Rows as "mode:context"; "rerank" is hybrid + a reranker.
DEFAULT_ROWS: tuple[str, ...] = (
    "dense:none", "dense:outline", "bm25:none", "bm25:outline", "hybrid:none", "hybrid:outline",
    "rerank:outline",
)  # fmt: skip


# "bm25-doc": whole-document BM25 alone (short documents only, `ctxr.index.bm25.documents`).
ROW_MODES = ("dense", "bm25", "bm25-doc", "hybrid", "rerank")


CONTEXTS = ("none", "outline")


@dataclass(frozen=True)
class RowSpec:
    mode: str
    context: str
    fusion: str | None = None  # hybrid rows only; None means the configured fusion

    @property
    def name(self) -> str:
        return f"{self.mode}:{self.context}" + (f":{self.fusion}" if self.fusion else "")


def parse_rows(text: str | Sequence[str]) -> list[RowSpec]:
    """``"dense:none,hybrid,hybrid:outline:rrf"`` -> rows; a mode alone means the outline
    context; a third part picks the fusion of a hybrid row."""
    items = text.split(",") if isinstance(text, str) else list(text)
    rows: list[RowSpec] = []
    for item in filter(None, (i.strip() for i in items)):
        mode, _, rest = item.partition(":")
        context, _, fusion = rest.partition(":")
        context = context or "outline"
        fused = mode in ("hybrid", "rerank")
        if (
            mode not in ROW_MODES
            or context not in CONTEXTS
            or (fusion and (not fused or fusion not in FUSIONS))
        ):
            raise ConfigError(
                f"unknown ablation row {item!r}; use MODE[:CONTEXT[:FUSION]] with MODE one of "
                f"{', '.join(ROW_MODES)}, CONTEXT one of {', '.join(CONTEXTS)} and FUSION "
                f"(hybrid and rerank only) one of {', '.join(FUSIONS)}"
            )
        rows.append(RowSpec(mode, context, fusion or None))
    if not rows:
        raise ConfigError("no ablation rows given; e.g. --modes dense:none,hybrid:outline")
    return rows
