"""The whole-document BM25 ranking as a third ranking of chunks, pure.

Qdrant ranks short documents by their whole text (`ctxr.index.bm25.documents`): each hit is a
document's carrier point, its first chunk. Fusion ranks chunks, so each document's score must
land on one of its chunks:

- "best": on the document's best chunk in the fused dense + chunk BM25 ranking, so a document
  whose terms are spread over its chunks lifts the chunk the other retrievers liked most; a
  document neither of them returned lands on its carrier;
- "carrier": on the carrier, always (its first chunk, whatever the other rankings say).

Which is better was measured on SciFact's train queries (docs/explanation/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

Landing = Literal["best", "carrier"]


def land_documents(
    documents: Sequence[tuple[str, str, float]],
    chunk_order: Iterable[tuple[str, str]],
    how: Landing,
) -> list[tuple[str, float]]:
    """`(carrier id, doc id, score)` best first -> `(chunk id, score)` best first.

    `chunk_order` is the other rankings' fused order as `(chunk id, doc id)`, best first;
    "best" puts each document on its first chunk there. Distinct documents land on distinct
    chunks, so the result is a ranking like any other."""
    if how == "carrier":
        return [(carrier, score) for carrier, _, score in documents]
    best: dict[str, str] = {}
    for chunk_id, doc_id in chunk_order:
        best.setdefault(doc_id, chunk_id)
    return [(best.get(doc_id, carrier), score) for carrier, doc_id, score in documents]
