"""One fusion configuration for every judged set, chosen without the queries it is scored on.

Reads the per-query scores `bench.quality.fusion_grid --json` wrote, one file per set:
sets with a tuning split (SciFact train, NFCorpus dev, CoSQA dev) are used whole; sets without
one (ArguAna test, the code set) are split into ``--folds`` folds (seed 0, as the grid's own
``--folds``). For each fold, the variant whose *worst* gain over the default, across the sets,
is largest (maximin: no set may pay for another's gain) is picked on the tuning splits and the
other folds, and scored on the held-out fold. Printed: each variant's gain per set on all of
its queries, the folds' picks, and the held-out figures beside the default's.

    python -m bench.quality.fusion_choice tune:/tmp/q-out/grid-sf-train.json \\
        tune:/tmp/q-out/grid-nf-dev.json cv:/tmp/q-out/grid-code.json ...
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

DEFAULT = "bm25 1 doc 0.5"


def _gain(scores: dict[str, list[float]], variant: str, keep: set[int] | None) -> float:
    pairs = zip(scores[variant], scores[DEFAULT], strict=True)
    deltas = [a - b for i, (a, b) in enumerate(pairs) if keep is None or i in keep]
    return statistics.fmean(deltas)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    folds = 5
    sets: dict[str, tuple[str, dict[str, list[float]]]] = {}
    for spec in args:
        role, path = spec.split(":", 1)
        sets[Path(path).stem] = (role, json.loads(Path(path).read_text()))
    variants = sorted(set.intersection(*(set(s) for _, s in sets.values())))
    names = list(sets)
    print("| variant | " + " | ".join(names) + " | worst |")
    print("|---|" + "---|" * (len(names) + 1))
    for v in sorted(variants, key=lambda v: -min(_gain(s, v, None) for _, s in sets.values())):
        gains = [_gain(sets[n][1], v, None) for n in names]
        print(f"| {v} | " + " | ".join(f"{g:+.4f}" for g in gains) + f" | {min(gains):+.4f} |")
    cv = [n for n in names if sets[n][0] == "cv"]
    orders = {}
    for n in cv:
        order = list(range(len(sets[n][1][DEFAULT])))
        random.Random(0).shuffle(order)
        orders[n] = order
    picks: list[str] = []
    held: dict[str, dict[str, list[float]]] = {n: {"pick": [], "default": []} for n in cv}
    for f in range(folds):
        test = {n: set(orders[n][f::folds]) for n in cv}
        train = {n: set(range(len(orders[n]))) - test[n] for n in cv}

        def worst(v: str, train: dict[str, set[int]] = train) -> float:
            return min(_gain(sets[n][1], v, train.get(n)) for n in names)

        pick = max(variants, key=worst)
        picks.append(pick)
        for n in cv:
            held[n]["pick"] += [sets[n][1][pick][i] for i in test[n]]
            held[n]["default"] += [sets[n][1][DEFAULT][i] for i in test[n]]
    print(f"\nfolds' picks: {picks}")
    for n in cv:
        pick, default = statistics.fmean(held[n]["pick"]), statistics.fmean(held[n]["default"])
        print(
            f"{n}: held out {pick:.4f} against the default's {default:.4f} ({pick - default:+.4f})"
        )
    everything = max(variants, key=lambda v: min(_gain(s, v, None) for _, s in sets.values()))
    print(f"picked on all queries of every set: {everything}")


if __name__ == "__main__":
    main()
