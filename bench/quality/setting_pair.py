"""One search setting two ways, query by query: which queries it moves, and by how much.

Every judged query is searched through `SearchService` (what `ctxr eval` scores) once with
each value of ``--setting`` on the same index, and scored as `ctxr eval` scores it (BEIR
sets: nDCG@10 by distinct documents; the code set: the mean of Pass@5/10/20 by the span-overlap
rule of ``--chunks ours``). Printed per value: the metric; then the second value against the
first: the mean difference with its paired bootstrap interval and sign-flip p-value
(`ctxr.eval.stats.paired_test`, what `ctxr trial` compares rows with), and how many queries rose
and fell. A mean alone hides whether a change is a few queries or noise.

    ctxr eval beir --data ../shared/data/cosqa --language python --index-dir /tmp/q-evalidx \\
        --modes hybrid:none
    python -m bench.quality.setting_pair --set beir --data ../shared/data/cosqa \\
        --language python --split test \\
        --index /tmp/q-evalidx/cosqa-ours200-none-bm25-1.2-0.75-python-doc1024 \\
        --setting dense_confidence --values off,auto

Figures: docs/explanation/evaluation.md ("Less BM25 when the dense retriever is sure").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.eval.datasets import load_anthropic_codebase, load_beir
from ctxr.eval.judging import judged_ranks
from ctxr.eval.runner import BEIR_HITS_PER_DOC, search_and_score
from ctxr.eval.stats import paired_test
from ctxr.index import components
from ctxr.retrieve.service import SearchService

TIE = 1e-9  # two queries' metrics closer than this are equal


def per_query(
    kind: str, data: Path, split: str, language: str | None, index: Path, context: str,
    setting: str, value: str, leave_own_out: bool,
) -> dict[str, float]:  # fmt: skip
    """Each judged query's metric with `setting` at `value`."""
    if kind == "beir":
        dataset = load_beir(data, split, language)
        ks, depth, names = (10, 100), 100 * BEIR_HITS_PER_DOC, ["ndcg@10"]
    else:
        dataset = load_anthropic_codebase(data)
        ks, depth, names = (5, 10, 20), 20, ["pass@5", "pass@10", "pass@20"]
    pairs = [(q.query_id, q.text) for q in dataset.queries]
    qrels = {q.query_id: q.qrels for q in dataset.queries}
    own = {q.query_id: q.ignore for q in dataset.queries if q.ignore and leave_own_out}
    settings = load_settings(index_dir=index, context=context, **{setting: value})
    embedder = components.make_embedder(settings, cached=True)
    with SearchService(settings, embedder=embedder) as service:
        mapper = judged_ranks(dataset, "beir" if kind == "beir" else "anthropic-codebase",
                              "ours", {})  # fmt: skip
        report, _ = search_and_score(
            service, pairs, mapper, qrels, ks, depth=depth, mode="hybrid",
            candidates=settings.search.candidates, fusion=None, left_out=own,
        )  # fmt: skip
    return {qid: sum(report.per_query[qid][n] for n in names) / len(names) for qid in qrels}


def compare(first: dict[str, float], second: dict[str, float]) -> str:
    """The second's mean difference from the first (`ctxr.eval.stats.paired_test`: its interval
    and sign-flip p-value), and the queries it moved up and down."""
    queries = list(first)
    test = paired_test([second[q] for q in queries], [first[q] for q in queries])
    up = sum(second[q] > first[q] + TIE for q in queries)
    down = sum(second[q] < first[q] - TIE for q in queries)
    return (f"{test.difference:+.4f} [{test.low:+.4f}, {test.high:+.4f}], p {test.p_value:.3f}, "
            f"{up} up / {down} down")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--set", choices=("beir", "code"), required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--language", default=None, help="BEIR: the corpus is code (cosqa)")
    parser.add_argument("--index", type=Path, required=True, help="an index `ctxr eval` built")
    parser.add_argument("--context", default="none", help="the index's context (code: outline)")
    parser.add_argument("--setting", required=True, help="a search setting's field name")
    parser.add_argument("--values", required=True, help="two values, comma-separated")
    parser.add_argument("--own-documents", choices=("drop", "leave-out"), default="drop")
    args = parser.parse_args(argv)
    values = args.values.split(",")
    if len(values) != 2:
        parser.error("--values takes two values, e.g. off,auto")
    say(load_line("at start") + f"; {args.data.name} {args.split}, {args.setting} {args.values}")
    scores = [
        per_query(args.set, args.data, args.split, args.language, args.index, args.context,
                  args.setting, value, args.own_documents == "leave-out")
        for value in values
    ]  # fmt: skip
    for value, by_query in zip(values, scores, strict=True):
        say(f"{args.setting}={value}: {sum(by_query.values()) / len(by_query):.4f}")
    say(f"{values[1]} - {values[0]}: {compare(*scores)}")
    say(load_line("at end"))


if __name__ == "__main__":
    main()
