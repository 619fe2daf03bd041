"""Dense vectors as float32 or int8 (`CTXR_QUANTIZATION`), side by side on real embeddings.

The vectors are SciFact's chunks as `ctxr eval` indexes them (real MiniLM embeddings, read
back from the eval index as `bench.quality.hnsw_recall` does), optionally padded with
SYNTHETIC noisy copies (``--synthetic N``); the queries are SciFact's 300 test claims embedded
by the same model. One run fills two shards made by ctxr's own ``EdgeStore.create``, one with
``quantization="none"`` and one with ``"int8"``, from the same points, builds each one's HNSW
graph (``EdgeStore.optimize``, timed), takes the truth from ``SearchParams(exact=True)`` on
the float32 shard, and then, the two shards' queries interleaved query by query:

- recall@10 and recall@50 of ``EdgeStore.query_dense`` (the search's own parameters:
  ``hnsw_ef`` 256, and for int8 rescoring twice the candidates with the float32 originals),
  and of the int8 shard once more ranked by its bytes alone (``CTXR_RESCORE=false``);
- the time of a dense query of 50 candidates with the ranking fields, as a search asks;
- the bytes each shard maps for its dense vectors: float32 ``matrix.dat`` (held in memory,
  ``Memory.Cached``), or int8 ``quantized.data`` (held) beside the originals (on disk,
  ``Memory.Cold``, read only to rescore).

Usage::

    python -m bench.quality.quantization [--index DIR] [--synthetic 100000]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import data_dir
from bench.common.measure import Span, Timing, load_line, machine, parser, say
from bench.common.stored_vectors import DEFAULT_INDEX
from bench.quality.hnsw_recall import (
    add_synthetic,
    embed_queries,
    exact_top,
    fill,
    recall,
    scifact_vectors,
)
from ctxr.config import Quantization
from ctxr.index.store.base import RANKING_FIELDS
from ctxr.index.store.edge import EdgeStore

CHOICES: tuple[Quantization, ...] = ("none", "int8")
# The rows: each shard searched as `ctxr` searches it, and the int8 shard once more ranked by
# its bytes alone (`CTXR_RESCORE=false`: the float32 originals never read).
ROWS: tuple[str, ...] = ("none", "int8", "int8, no rescore")
CANDIDATES = 50


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--index", type=Path, default=DEFAULT_INDEX, help="SciFact eval index")
    p.add_argument("--data", type=Path, default=None, help="SciFact folder (BEIR layout)")
    p.add_argument("--synthetic", type=int, default=0, help="pad to N points (SYNTHETIC)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    data = args.data or data_dir("scifact")
    say(f"dense vectors as float32 and as int8, real MiniLM embeddings of SciFact; {machine()}")
    say(load_line("at start"))
    with tempfile.TemporaryDirectory(prefix="ctxr-quant-") as tmp:
        corpus = scifact_vectors(args.index, data, Path(tmp))
        real = len(corpus.ids)
        if args.synthetic:
            corpus = add_synthetic(corpus, args.synthetic, args.seed)
        _, queries = embed_queries(data)
        dim = corpus.dense.shape[1]
        stores: dict[Quantization, EdgeStore] = {}
        optimize_s: dict[Quantization, float] = {}
        for choice in CHOICES:
            store = EdgeStore.create(Path(tmp) / choice, dim, quantization=choice)
            fill(store, corpus)
            with Span() as span:
                store.optimize()
            optimize_s[choice] = span.seconds
            stores[choice] = store
        rows: dict[str, EdgeStore] = {
            "none": stores["none"],
            "int8": stores["int8"],
            # the same shard, other search parameters (a bench may look inside)
            "int8, no rescore": EdgeStore(stores["int8"]._shard, rescore=False),
        }
        truth10 = exact_top(stores["none"]._shard, queries, 10)  # a bench may look inside
        truth50 = exact_top(stores["none"]._shard, queries, 50)
        vectors = [q.tolist() for q in queries]
        got10: dict[str, list[list[str]]] = {r: [] for r in ROWS}
        got50: dict[str, list[list[str]]] = {r: [] for r in ROWS}
        seconds: dict[str, list[float]] = {r: [] for r in ROWS}
        for vector in vectors[:50]:  # warm: graph and vectors paged in
            for store in rows.values():
                store.query_dense(vector, CANDIDATES, None, RANKING_FIELDS)
        for vector in vectors:
            for row, store in rows.items():
                got10[row].append([r.point_id for r in store.query_dense(vector, 10)])
                started = time.perf_counter()
                ranked = store.query_dense(vector, CANDIDATES, None, RANKING_FIELDS)
                seconds[row].append(time.perf_counter() - started)
                got50[row].append([r.point_id for r in ranked])
        held = {c: _held_bytes(Path(tmp) / c, c) for c in CHOICES}
        for store in stores.values():
            store.close()

    padded = len(corpus.ids) - real
    say(
        f"\n## float32 against int8: {len(corpus.ids):,} points ({real:,} real SciFact chunk "
        f"vectors{f' + {padded:,} SYNTHETIC' if padded else ''}), {len(queries)} real queries, "
        "hnsw_ef 256, m 16"
    )
    say("| vectors | recall@10 | recall@50 | dense query p50 ms | p95 ms | HNSW build s "
        "| dense bytes held |")  # fmt: skip
    say("|---|---:|---:|---:|---:|---:|---:|")
    for row in ROWS:
        t = Timing.of(seconds[row])
        r10 = statistics.fmean(recall(truth10, got10[row], 10))
        r50 = statistics.fmean(recall(truth50, got50[row], 50))
        choice: Quantization = "none" if row == "none" else "int8"
        say(
            f"| {row} | {r10:.4f} | {r50:.4f} | {t.p50:.2f} | {t.p95:.2f} | "
            f"{optimize_s[choice]:.1f} | {held[choice] / 2**20:,.1f} MiB |"
        )
    say(load_line("at end"))
    return 0


def _held_bytes(shard: Path, choice: Quantization) -> int:
    """The dense vector files a search keeps in memory: the float32 matrix, or the bytes."""
    name = "matrix.dat" if choice == "none" else "quantized.data"
    return sum(f.stat().st_size for f in shard.glob(f"segments/*/vector_storage-dense/{name}"))


if __name__ == "__main__":
    sys.exit(main())
