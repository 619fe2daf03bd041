"""What the whole-document BM25 ranking costs a hybrid search: the same index, the same
queries, `CTXR_DOC_RANKING` best against off, timed in turns (off, best, off, best, ...).

The index is any ctxr index built with document vectors, e.g. the one `ctxr eval beir` leaves
for SciFact (12,795 chunks, 5,183 abstracts, 5,100 with a document vector); the queries are
SciFact's 300 test claims. Each search goes through `SearchService.search` (k 10, the
defaults); a first untimed pass puts every query's embedding in the embedding cache, so the
turns time retrieval and fusion, not MiniLM. Printed: the median ms per search of each setting,
their ratio, and the load average.

Usage::

    python -m bench.speed.doc_ranking_latency --index DIR [--turns 3]
        [--data ../shared/data/scifact]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from ctxr.config import load_settings
from ctxr.eval.datasets import default_data_dir, load_beir
from ctxr.index import components
from ctxr.retrieve.service import SearchService


def timed(index: Path, ranking: str, queries: list[str]) -> list[float]:
    settings = load_settings(index_dir=index, doc_ranking=ranking)
    service = SearchService(settings, embedder=components.make_embedder(settings, cached=True))
    try:
        for query in queries[:20]:  # warm the shard's pages
            service.search(query)
        out = []
        for query in queries:
            started = time.perf_counter()
            service.search(query)
            out.append(1000 * (time.perf_counter() - started))
        return out
    finally:
        service.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args()
    data = args.data or default_data_dir() / "scifact"
    queries = [q.text for q in load_beir(data, "test").queries]
    print(f"load average at start {os.getloadavg()[0]:.2f}; {len(queries)} queries", flush=True)
    timed(args.index, "best", queries)  # once untimed: every query's embedding into the cache
    runs: dict[str, list[float]] = {"off": [], "best": []}
    for turn in range(1, args.turns + 1):
        for ranking in ("off", "best"):
            ms = statistics.median(timed(args.index, ranking, queries))
            runs[ranking].append(ms)
            print(f"turn {turn}: {ranking:4} median {ms:.2f} ms a search", flush=True)
    off, best = statistics.median(runs["off"]), statistics.median(runs["best"])
    print(f"median of turns: off {off:.2f} ms, best {best:.2f} ms, ratio {best / off:.2f}x; "
          f"load average at end {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
