"""What the whole-document BM25 ranking costs a hybrid search: the same index, the same
queries, `CTXR_DOC_RANKING` best against off, timed in turns (off, best, off, best, ...).

The index is any ctxr index built with document vectors, e.g. the one `ctxr eval beir` leaves
for SciFact (12,795 chunks, 5,183 abstracts, 5,100 with a document vector); the queries are
SciFact's 300 test claims. Each search goes through `SearchService.search` (k 10, the
defaults); a first untimed pass puts every query's embedding in the embedding cache, so the
turns time retrieval and fusion, not MiniLM. Printed: the median ms per search of each setting
in each turn, the median of the turns and their ratio, and the load average.

Usage::

    python -m bench.speed.doc_ranking_latency --index DIR [--turns 3]
        [--data ../shared/data/scifact]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import data_dir
from bench.common.measure import Timing, load_line, ratio_table, say, time_each, turns
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.eval.datasets import load_beir
from ctxr.index import components
from ctxr.retrieve.service import SearchService


def timed(index: Path, ranking: str, queries: list[str]) -> Timing:
    """Every query searched once, after 20 untimed ones that page the shard in."""
    settings = load_settings(index_dir=index, doc_ranking=ranking)
    service = SearchService(settings, embedder=components.make_embedder(settings, cached=True))
    try:
        timing, _ = time_each(service.search, queries, warm=queries[:20])
        return timing
    finally:
        service.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--data", type=Path, default=None)
    args = parser.parse_args(argv)
    data = args.data or data_dir("scifact")
    queries = [q.text for q in load_beir(data, "test").queries]
    say(load_line(f"at start; {len(queries)} queries"))
    timed(args.index, "best", queries)  # once untimed: every query's embedding into the cache
    medians: dict[str, list[float]] = {"off": [], "best": []}
    for turn, ranking in turns(list(medians), args.turns):
        ms = timed(args.index, ranking, queries).p50
        medians[ranking].append(ms)
        say(f"turn {turn + 1}: {ranking:4} median {ms:.2f} ms a search")
    for line in ratio_table(medians, "off", unit="ms"):
        say(line)
    say(load_line("at end"))


if __name__ == "__main__":
    main()
