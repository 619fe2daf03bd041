"""When the dense retriever counts as sure: its top score's threshold, per embedder.

DBSF gives both BM25 rankings less weight for a query whose best dense score reaches a
threshold (`ctxr.retrieve.fusion`). A score is a cosine of one embedder: one model's 0.7 is
another's 0.4, so a threshold holds only for the embedder it was measured with, and with the
query and document prefixes it was measured with (a prefix shifts every cosine).
`CTXR_DENSE_CONFIDENCE=auto` takes the measured one and turns the rule off for any other
embedder; a number sets it for whatever the index was embedded with, and `off` turns it off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from ctxr.index.embed.onnx import MODEL_NAME
from ctxr.index.manifest import IndexSettings

# The embedder's name in the manifest -> the dense top score from which it counts as sure,
# chosen on tuning splits (docs/explanation/evaluation.md, "Less BM25 when the dense
# retriever is sure"), without prefixes.
MEASURED: Final[Mapping[str, float]] = {MODEL_NAME: 0.7}


def dense_threshold(setting: float | Literal["auto", "off"], index: IndexSettings) -> float | None:
    """The dense top score from which a query's BM25 counts less in `index`, or None (never)."""
    if setting == "off":
        return None
    if setting == "auto":
        if index.query_prefix or index.document_prefix:
            return None
        return MEASURED.get(index.embedder)
    return float(setting)
