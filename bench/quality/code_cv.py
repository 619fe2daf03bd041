"""Cross-validated choice of the code-set constants: chunk floor, prefix share,
BM25 k1/b and the DBSF weight of BM25, on anthropic-codebase with ctxr's own chunks.

Every constant tuned on the code set is chosen here, never on the queries it is scored on: the
248 queries are shuffled once (``--seed``) into ``--folds`` folds; for each fold the
combination with the best mean of Pass@5, @10 and @20 over the *other* folds is picked and
scored on the held-out fold. The figure reported is the held-out folds' mean (every query
scored once, by a combination chosen without it), beside the untuned default and the
combination that is best on all queries (which is optimistic, shown only for contrast).

Each chunking combination builds an index (outline contexts, as the default `ctxr eval`
row) under ``--work`` and stores each query's dense and BM25 top-50 with their scores;
fusions are then computed offline with the same DBSF as ``ctxr.retrieve.fusion`` (checked
against the service's hybrid ranking at weight 1): `bench.common.code_rankings`. Rankings
are kept in ``--work``, so a rerun with more combinations embeds only what is new (the
embedding cache keys on text).

Usage::

    python -m bench.quality.code_cv [--floors 0,0.25,0.4] [--prefixes 0.0625,0.125,0.25]
        [--bm25 1.2:0.75,0.9:0.4] [--weights 0.8,1,1.2,1.5,2] [--folds 5] [--work DIR]
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from bench.common.code_rankings import build_rankings, cross_validate, mean_rows, recall_at
from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.retrieve.fusion import distribution_based_score_fusion


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _same_as_service(body: dict[str, object]) -> None:
    """The offline fusion at weight 1 must rank exactly as the search service's hybrid."""
    for q in body["queries"]:  # type: ignore[attr-defined]
        fused = distribution_based_score_fusion({"dense": q["dense"], "bm25": q["bm25"]})
        if [f.key for f in fused[: len(q["hybrid"])]] != q["hybrid"]:
            raise SystemExit(f"{body['name']}: offline DBSF differs from the service's hybrid")


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--floors", default="0,0.25,0.4")
    parser.add_argument("--prefixes", default="0.0625,0.125,0.25")
    parser.add_argument("--bm25", default="1.2:0.75")
    parser.add_argument("--weights", default="0.8,1,1.2,1.5,2")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ctxr-code-cv"))
    parser.add_argument("--default", default="0.25,0.125,1.2,0.75,1", help="the untuned row")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    say(load_line(f"at start; work {args.work}"))
    bm25 = [tuple(float(v) for v in pair.split(":")) for pair in args.bm25.split(",")]
    table: dict[tuple[float, ...], list[list[float]]] = {}
    for floor in _floats(args.floors):
        for prefix in _floats(args.prefixes):
            for k1, b in bm25:
                body = build_rankings(args.work, floor, prefix, k1, b)
                _same_as_service(body)
                check = recall_at(body, 1.0)
                for weight in _floats(args.weights):
                    rows = check if weight == 1.0 else recall_at(body, weight)
                    table[(floor, prefix, k1, b, weight)] = rows
                sizes = body["sizes"]["code"]  # type: ignore[index]
                say(
                    f"{body['name']}: {body['chunks']} chunks, median {sizes['median']}, "
                    f"{sizes['share_under_40']:.1%} under 40; weight 1: "
                    + " / ".join(f"{x:.2f}" for x in mean_rows(check))
                )
    picks, held = cross_validate(table, args.folds, args.seed)
    default = tuple(_floats(args.default))
    everything = max(table, key=lambda c: statistics.fmean(sum(r) for r in table[c]))
    print("\ncombination = (floor share, prefix share, k1, b, BM25 weight)")
    print(f"folds' picks: {picks}")
    print("held-out folds (Pass@5/10/20): " + " / ".join(f"{x:.2f}" for x in mean_rows(held)))
    if default in table:
        print(f"untuned {default}: " + " / ".join(f"{x:.2f}" for x in mean_rows(table[default])))
    print(
        f"best on all queries {everything} (optimistic): "
        + " / ".join(f"{x:.2f}" for x in mean_rows(table[everything]))
    )
    say(load_line("at end"))


if __name__ == "__main__":
    main()
