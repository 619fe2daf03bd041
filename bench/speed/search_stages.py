"""Where a hybrid search's time goes on a large index, and what reading payloads costs.

Over an index kept by ``python -m bench.speed.scale --keep DIR`` (its corpus gives the
queries: 2-6 words of the corpus's own law, as the scale benchmark asks), one run times, with
the queries' vectors embedded once before timing and the rows interleaved query by query so
that load drifts alike on all:

- ``search``: `SearchService.search` as it runs: each retriever's candidates with only the
  payload fields fusion reads (`ctxr.index.store.base.RANKING_FIELDS`), fused, then the whole
  payloads of the hits kept;
- ``whole payloads``: the same search reading every candidate's whole payload and fusing
  those (`ctxr.retrieve.records.fuse_records`), as searches did before;
- per retriever (dense, BM25 of chunks, BM25 of documents): the store's query alone, with the
  whole payload and with the ranking fields;
- the three queries (ranking fields) one after another, and at once in three threads: whether
  the engine lets Python run another search while one is in it (it releases the GIL or not),
  which decides what one ``ctxr serve`` process does with a second core.

With ``--against DIR``, a second kept index of the same corpus (another segment layout, a
copy updated another way) is opened beside the first, and its ``search`` is one more row,
interleaved with the others query by query.

Printed: p50 / p95 / mean in milliseconds per row, the rows' medians against ``search``, and
the load average at start and end. No HTTP: ``bench.speed.scale`` measures ``ctxr serve``.

Usage::

    python -m bench.speed.scale --chunks 200000 --keep /tmp/scale200k   # once
    python -m bench.speed.search_stages --keep /tmp/scale200k --chunks 200000 [--queries 200]
        [--against /tmp/scale200k-copy]
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import markdown_corpus
from bench.common.measure import Timing, load_line, machine, parser, say
from bench.common.synthetic import make_queries
from ctxr.config import load_settings
from ctxr.index.bm25.weights import query_vector
from ctxr.index.store.base import RANKING_FIELDS
from ctxr.retrieve.records import fuse_records
from ctxr.retrieve.service import SearchService

K = 10
CANDIDATES = 50  # the default search's (CTXR_CANDIDATES)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work = Path(args.keep)
    if not (work / "index" / "manifest.json").exists():
        raise SystemExit(f"no index under {work}; make one: python -m bench.speed.scale --keep")
    say(f"search stages: index {work / 'index'}; {machine()}")
    say(load_line("at start"))
    corpus = markdown_corpus.corpus(work / "corpus", args.chunks, args.seed)
    queries = make_queries(corpus.words, args.queries, args.seed)
    with (
        SearchService(load_settings(index_dir=work / "index")) as service,
        ThreadPoolExecutor(3) as threads,
        contextlib.ExitStack() as others,
    ):
        rows = _rows(service, queries, threads)
        if args.against:
            index = Path(args.against) / "index"
            other = others.enter_context(SearchService(load_settings(index_dir=index)))
            rows[f"search, {args.against}"] = lambda q: other.search(q, k=K)
        for query in queries:  # warm: every query's vector cached, pages faulted in
            for call in rows.values():
                call(query)
        seconds: dict[str, list[float]] = {name: [] for name in rows}
        for query in queries:
            for name, call in rows.items():
                started = time.perf_counter()
                call(query)
                seconds[name].append(time.perf_counter() - started)
        points = service.store.count()
    say(f"{points:,} points, {len(queries)} queries, k = {K}, {CANDIDATES} candidates a retriever")
    say("")
    say("| row | p50 ms | p95 ms | mean ms | p50 / search |")
    say("|---|---:|---:|---:|---:|")
    base = Timing.of(seconds["search"]).p50
    for name, spans in seconds.items():
        t = Timing.of(spans)
        say(f"| {name} | {t.p50:.2f} | {t.p95:.2f} | {t.mean:.2f} | {t.p50 / base:.2f}x |")
    say("")
    say(load_line("at end"))
    return 0


def _rows(
    service: SearchService, queries: Sequence[str], threads: ThreadPoolExecutor
) -> dict[str, Callable[[str], Any]]:
    store = service.store
    settings = service.settings.search
    params = replace(service._fusion, window=CANDIDATES)
    analyzer = service._analyzer
    vectors = dict(zip(queries, service.embedder.embed(list(queries)).tolist(), strict=True))

    def whole(query: str) -> Any:
        [rankings] = service.retrieve([query], "hybrid", CANDIDATES)
        return fuse_records(rankings, K, settings.fusion, params, settings.doc_ranking)

    rows: dict[str, Callable[[str], Any]] = {
        "search": lambda q: service.search(q, k=K),
        "whole payloads": whole,
    }
    for label, fields in (("whole payload", None), ("ranking fields", RANKING_FIELDS)):
        rows[f"dense alone, {label}"] = lambda q, f=fields: store.query_dense(
            vectors[q], CANDIDATES, None, f
        )
        rows[f"BM25 chunks alone, {label}"] = lambda q, f=fields: store.query_sparse(
            query_vector(analyzer.terms(q)), CANDIDATES, None, f
        )
        rows[f"BM25 documents alone, {label}"] = lambda q, f=fields: store.query_documents(
            query_vector(analyzer.terms(q)), CANDIDATES, None, f
        )
    three = [
        rows[f"{name} alone, ranking fields"] for name in ("dense", "BM25 chunks", "BM25 documents")
    ]

    def at_once(query: str) -> Any:
        return [f.result() for f in [threads.submit(call, query) for call in three]]

    rows["the three, one after another"] = lambda q: [call(q) for call in three]
    rows["the three at once, three threads"] = at_once
    return rows


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--keep", required=True, help="the directory bench.speed.scale kept")
    p.add_argument("--chunks", type=int, required=True, help="the --chunks it was run with")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--against", help="a second kept index of the same corpus, searched too")
    p.add_argument("--seed", type=int, default=7, help="the --seed it was run with")
    return p


if __name__ == "__main__":
    raise SystemExit(main())
