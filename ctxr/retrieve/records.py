"""Stored chunk records as the search service's answers: the retrievers' rankings fused into
hits, document chunks, and the spans `merge_adjacent` and `expand_parents` read from the
retrieved payloads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxr.config import DocRanking
from ctxr.index.payload import ChunkPayload
from ctxr.index.store.base import ScoredRecord
from ctxr.retrieve.documents import land_documents
from ctxr.retrieve.fusion import DOCUMENT_RANKING, Fused, FusionParams, fuse
from ctxr.types import Hit


def fuse_records(
    rankings: dict[str, list[ScoredRecord]],
    k: int,
    fusion: str,
    params: FusionParams,
    landing: DocRanking,
) -> list[Hit]:
    """One query's retrievers' rankings, their records with whole payloads, -> its top-k
    hits, fused by `fusion` (`fuse_rankings`)."""
    payloads = {r.point_id: r.payload for ranking in rankings.values() for r in ranking}
    return hits_from(fuse_rankings(rankings, k, fusion, params, landing), payloads)


def fuse_rankings(
    rankings: dict[str, list[ScoredRecord]],
    k: int,
    fusion: str,
    params: FusionParams,
    landing: DocRanking,
) -> list[Fused[str]]:
    """One query's retrievers' rankings -> its top-k points, fused by `fusion`. Their records
    need only `doc_id` in the payload (`ctxr.index.store.base.RANKING_FIELDS`).

    The whole-document ranking, if present, lands on chunks first (`ctxr.retrieve.documents`):
    on each document's best chunk among the other rankings fused without it, or its carrier."""
    records = {r.point_id: r for ranking in rankings.values() for r in ranking}
    keyed = {name: [(r.point_id, r.score) for r in rs] for name, rs in rankings.items()
             if name != DOCUMENT_RANKING}  # fmt: skip
    if DOCUMENT_RANKING in rankings:
        found = [(r.point_id, r.payload["doc_id"], r.score) for r in rankings[DOCUMENT_RANKING]]
        if landing == "carrier" or not keyed:
            keyed[DOCUMENT_RANKING] = land_documents(found, [], "carrier")
        else:
            chunks = fuse(fusion, keyed, params)
            order = [(item.key, records[item.key].payload["doc_id"]) for item in chunks]
            keyed[DOCUMENT_RANKING] = land_documents(found, order, "best")
    return fuse(fusion, keyed, params)[:k]


def hits_from(fused: Sequence[Fused[str]], payloads: Mapping[str, ChunkPayload]) -> list[Hit]:
    """Fused points as hits, ranked from 1, each with its whole payload. A point without one
    was deleted after the search found it (a live update in between) and is left out."""
    found = [(item, payloads[item.key]) for item in fused if item.key in payloads]
    return [hit_from_fused(rank, item, payload) for rank, (item, payload) in
            enumerate(found, start=1)]  # fmt: skip


def spaces_after(rankings: dict[str, list[ScoredRecord]]) -> dict[str, str]:
    """Each retrieved chunk's following whitespace, which lets `merge_adjacent` bridge gaps."""
    return {
        r.point_id: str(r.payload.get("space_after") or "") for rs in rankings.values() for r in rs
    }


def parent_spans(rankings: dict[str, list[ScoredRecord]]) -> dict[str, tuple[int, int]]:
    """Each retrieved chunk's parent section span, for chunks that have one."""
    found: dict[str, tuple[int, int]] = {}
    for rs in rankings.values():
        for r in rs:
            start, end = r.payload.get("parent_start"), r.payload.get("parent_end")
            if start is not None and end is not None:
                found[r.point_id] = (int(start), int(end))
    return found


def hit_from_fused(rank: int, item: Fused[str], payload: ChunkPayload) -> Hit:
    return Hit(
        rank=rank,
        chunk_id=item.key,
        doc_id=payload["doc_id"],
        source=payload["source"],
        start=payload["start"],
        end=payload["end"],
        heading_path=tuple(payload.get("heading_path") or ()),
        text=payload["text"],
        context=payload.get("context") or "",
        score=item.score,
        scores=item.by_retriever,
        pages=tuple(payload.get("pages") or ()),
    )


def chunk_record(record: ScoredRecord) -> dict[str, Any]:
    p = record.payload
    return {
        "chunk_id": record.point_id,
        "index": p.get("index", 0),
        "start": p["start"],
        "end": p["end"],
        "token_count": p.get("token_count"),
        "heading_path": list(p.get("heading_path") or ()),
        "prefix": p.get("prefix") or "",
        "text": p["text"],
        "context": p.get("context") or "",
        "context_kind": p.get("context_kind"),
    }
