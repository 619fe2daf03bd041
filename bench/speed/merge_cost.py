"""What merging an update into the small segment costs, against building that segment anew.

Every `ctxr index` update writes its new points into a segment of their own, and Qdrant's
merge optimizer then merges the smallest segments, up to the shard's `max_segment_size`, into
one (`ctxr.index.store.merge_cap`). At a million chunks that merge is most of a 1% update's
`optimize` ("Successive updates" in the benchmarks page), so this measures, on the engine
alone and in one process, three ways of getting an update's points searchable:

* **merge**: a shard holding a closed segment (too large to merge) and a small indexed one
  (``--small`` points) takes an update (``--update`` new points, and 1% of the small
  segment's documents deleted, as edited files are) and is optimised: the optimizer merges
  the update into the small segment. Qdrant builds the merged segment's HNSW graph from the
  small segment's own (its incremental HNSW building), so only the new points are inserted;
* **fresh**: the same points (small segment and update) written to a new shard and
  optimised once: the merged segment built from nothing;
* **alone**: the update's points alone in a new shard, optimised: what an update would pay
  if its segment stood apart and were never merged (the lower bound of any merge policy).

Points are `bench.common.synthetic`'s (Zipf texts, BM25 vectors by ctxr's analyzer, random
clustered vectors), stored by `EdgeStore` with ctxr's settings (int8, BM25 postings in files,
the payload indexes). Seconds are the optimize calls' own.

Usage::

    python -m bench.speed.merge_cost [--small 40000] [--update 8000] [--work /tmp/merge-cost]
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import synthetic
from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.bm25.weights import Bm25Params
from ctxr.index.store.base import StoredPoint
from ctxr.index.store.edge import EdgeStore

DIM = 384
POOL = 2_000  # cluster centres for the vectors (`synthetic.synthetic_dense`)
BATCH = 2_000  # points a write


class Points:
    """The corpus's points by number: texts, BM25 vectors and vectors made once."""

    def __init__(self, count: int) -> None:
        corpus = synthetic.make_corpus(count, seed=7)
        analyzer = Bm25Analyzer()
        self.texts = corpus.texts
        self.terms = [analyzer.terms(text) for text in corpus.texts]
        self.avg_len = sum(map(len, self.terms)) / len(self.terms)
        rng = np.random.default_rng(3)
        pool = rng.standard_normal((POOL, DIM)).astype(np.float32)
        self.pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)

    def write(self, store: EdgeStore, start: int, stop: int) -> None:
        for first in range(start, stop, BATCH):
            store.upsert(self._batch(first, min(stop, first + BATCH)))

    def _batch(self, start: int, stop: int) -> list[StoredPoint]:
        dense = synthetic.synthetic_dense(self.pool, start, stop, seed=5)
        return synthetic.stored_points(
            self.texts, self.terms, dense, start, self.avg_len, Bm25Params()
        )


def optimized(store: EdgeStore) -> float:
    started = time.perf_counter()
    store.optimize()
    return time.perf_counter() - started


def segments(store: EdgeStore) -> int:
    return int(store._shard.info().segments_count)  # the engine's own count


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--small", type=int, default=40_000, help="the small segment's points")
    parser.add_argument("--update", type=int, default=8_000, help="the update's new points")
    parser.add_argument("--work", type=Path, default=Path("/tmp/merge-cost"))
    args = parser.parse_args(argv)
    small, update = args.small, args.update
    # The closed segment is larger than the merge limit, which is larger than small + update,
    # so the optimizer merges exactly the update into the small segment.
    limit = small + update + update // 2
    closed = limit + BATCH
    segment_points = 4 * limit  # the shard's limit is a quarter of a segment
    shutil.rmtree(args.work, ignore_errors=True)
    say(load_line("at start"))
    points = Points(closed + small + update)
    say(f"closed segment {closed:,} points, small segment {small:,}, update {update:,}")

    store = EdgeStore.create(
        args.work / "merge", DIM, quantization="int8", segment_points=segment_points
    )
    points.write(store, 0, closed)
    say(f"the closed segment built in {optimized(store):.1f} s")
    points.write(store, closed, closed + small)
    say(f"the small segment built in {optimized(store):.1f} s; segments {segments(store)}")
    points.write(store, closed + small, closed + small + update)
    edited = {synthetic.doc_id(closed + i) for i in range(0, small, 100 * synthetic.CHUNKS_PER_DOC)}
    store.delete_documents(sorted(edited))
    before = segments(store)
    merge = optimized(store)
    say(f"segments before the update's optimize {before}, after {segments(store)}")
    store.close()

    fresh_store = EdgeStore.create(
        args.work / "fresh", DIM, quantization="int8", segment_points=segment_points
    )
    points.write(fresh_store, closed, closed + small + update)
    fresh = optimized(fresh_store)
    fresh_store.close()

    alone_store = EdgeStore.create(
        args.work / "alone", DIM, quantization="int8", segment_points=segment_points
    )
    points.write(alone_store, closed + small, closed + small + update)
    alone = optimized(alone_store)
    alone_store.close()

    say("| the update's points made searchable | optimize, s | against fresh |")
    say("|---|---:|---:|")
    merged = f"merged into the small segment ({small:,} + {update:,})"
    say(f"| {merged} | {merge:.1f} | {merge / fresh:.2f}x |")
    say(f"| the merged segment built fresh | {fresh:.1f} | 1.00x |")
    say(f"| the update's segment alone ({update:,}) | {alone:.1f} | {alone / fresh:.2f}x |")
    say(load_line("at end"))
    shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
