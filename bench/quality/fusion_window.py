"""DBSF's normalisation window, measured on a BEIR split (tune on "train", never on "test").

Hybrid search fetches max(candidates, k) hits per retriever; DBSF normalises each ranking by
the mean and spread of its scores. This bench asks whether those statistics should come from
the whole fetched list or from its first `window` scores. It retrieves each query's rankings
once, at `--depth` (the eval's 300 hits for recall@100), then fuses them with ctxr's own code
(`ctxr.retrieve.records.fuse_records`, exactly what `SearchService.search` runs) at every
window, and scores the documents as `ctxr eval beir` does (`document_ranks`: each distinct
document at its best chunk).

Build the index once with the eval (it names the directory), then point this at it:

    ctxr eval beir --data ../shared/data/scifact --split train --index-dir /tmp/evalidx \\
        --modes hybrid:none
    python -m bench.quality.fusion_window --data ../shared/data/scifact --split train \\
        --index /tmp/evalidx/scifact-ours200-none-bm25-1.2-0.75-doc1024

Figures: docs/explanation/evaluation.md ("SciFact: DBSF's normalisation window").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.common.measure import Span, load_line, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.eval import metrics
from ctxr.eval.judging import document_ranks
from ctxr.eval.runner import eval_cache_dir, load_dataset
from ctxr.index import components
from ctxr.retrieve.fusion import FusionParams
from ctxr.retrieve.records import fuse_records
from ctxr.retrieve.service import SearchService

WINDOWS = "20,30,40,50,60,75,100,150,200,all"


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a BEIR data set folder")
    parser.add_argument("--split", default="train", help="qrels split to score (default train)")
    parser.add_argument("--index", type=Path, required=True, help="an index `ctxr eval` built")
    parser.add_argument("--depth", type=int, default=300, help="hits fetched per retriever")
    parser.add_argument("--windows", default=WINDOWS, help="comma list; 'all' = whole lists")
    parser.add_argument("--fusion", default="dbsf", choices=("dbsf", "rrf"))
    args = parser.parse_args(argv)

    cache_dir = eval_cache_dir(load_settings())
    settings = load_settings(index_dir=args.index, context="none", cache_dir=cache_dir)
    dataset = load_dataset("beir", args.data, args.split)
    queries = list(dataset.queries)
    embedder = components.make_embedder(settings, cached=True)
    say(load_line("at start"))
    with SearchService(settings, embedder=embedder) as service, Span() as span:
        retrieved = service.retrieve([q.text for q in queries], "hybrid", args.depth)
    say(f"{dataset.name} {args.split}: {len(queries)} queries retrieved at depth {args.depth} "
        f"in {span.seconds:.0f} s")  # fmt: skip
    params = FusionParams(
        settings.search.rrf_k,
        settings.search.weighted_k,
        settings.search.fusion_weights,
        settings.search.doc_bm25_weight,
    )
    qrels = {q.query_id: q.qrels for q in queries}
    print("| window | nDCG@10 | recall@10 | recall@100 | MRR@10 |\n|---|---|---|---|---|")
    for spec in args.windows.split(","):
        window = None if spec == "all" else int(spec)
        windowed = replace(params, window=window)
        found = {}
        for query, rankings in zip(queries, retrieved, strict=True):
            hits = fuse_records(
                rankings, args.depth, args.fusion, windowed, settings.search.doc_ranking
            )
            found[query.query_id] = document_ranks(hits)
        _row(spec, metrics.report_ranks(found, qrels, [10, 100]).scores)
    # What a search for 10 documents' worth of hits (k <= candidates) fuses: each retriever's
    # first `candidates` records only, so no record below them adds a share.
    shallow, same = {}, 0
    default = replace(params, window=settings.search.candidates)
    for query, rankings in zip(queries, retrieved, strict=True):
        head = {name: records[: settings.search.candidates] for name, records in rankings.items()}
        hits = fuse_records(head, 30, args.fusion, default, settings.search.doc_ranking)
        deep = fuse_records(rankings, 30, args.fusion, default, settings.search.doc_ranking)
        shallow[query.query_id] = document_ranks(hits)
        same += [h.chunk_id for h in hits[:10]] == [h.chunk_id for h in deep[:10]]
    _row(f"k=30 search ({settings.search.candidates} candidates)",
         metrics.report_ranks(shallow, qrels, [10, 100]).scores)  # fmt: skip
    print(f"top 10 hits of the {args.depth}-hit search equal the 30-hit search's on {same} of "
          f"{len(queries)} queries (window {settings.search.candidates})")  # fmt: skip
    say(load_line("at end"))


def _row(name: str, scores: dict[str, float]) -> None:
    print(f"| {name} | {scores['ndcg@10']:.4f} | {scores['recall@10']:.4f} | "
          f"{scores['recall@100']:.4f} | {scores['mrr@10']:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
