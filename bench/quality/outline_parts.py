"""Which parts of the outline context help on code: the code set, ctxr's chunks.

The outline says ``From <source>, section: <symbol path>.`` (``full``, ctxr's outline
``outline/2``); ``outline/1`` added ``, <language> source`` (``with-language``). Each variant
below adds or leaves out parts (``none`` leaves the whole context out) and indexes
anthropic-codebase with the defaults otherwise (floor 1/4, prefix 1/16, BM25 1.2 / 0.75, DBSF
at equal weights), through `bench.common.code_rankings`, so every variant is scored exactly as
the tuning grid of `bench.quality.code_cv` is. The set's documents have no paths (their
sources are ``doc_N``), so "source" is a name that says nothing here; the variants that matter
are the section trail and the language.

Printed per variant: Pass@5/10/20 over all 248 queries (nothing is tuned: the parts are
measured, and a part is dropped only if leaving it out is better by more than the noise,
about one Pass@5 point), and the 5-fold held-out mean of picking the variant on the other
folds, as `bench.quality.code_cv` does for its constants.

Usage::

    python -m bench.quality.outline_parts
        [--variants full,with-language,none,no-section,section-only]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.common.code_rankings import build_rankings, cross_validate, mean_rows, recall_at
from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.enrich.situate import outline
from ctxr.types import Chunk, Document

FULL = outline.outline_context


def variant_context(variant: str):  # type: ignore[no-untyped-def]
    """`outline_context` with the parts `variant` leaves out."""

    def context(document: Document, chunk: Chunk) -> str:
        parts = []
        if variant not in ("section-only",):
            parts.append(f"From {document.source}")
        trail = [h for h in chunk.heading_path if h != document.title] if chunk.heading_path else []
        if trail and variant != "no-section":
            parts.append("section: " + " > ".join(trail))
        if document.language and variant == "with-language":
            parts.append(f"{document.language} source")
        return ", ".join(parts) + "." if parts else ""

    return context


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--variants", default="full,with-language,none,no-section,section-only")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ctxr-code-cv"))
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    say(load_line(f"at start; work {args.work}"))
    table: dict[str, list[list[float]]] = {}
    for variant in args.variants.split(","):
        outline.outline_context = FULL if variant == "full" else variant_context(variant)
        context = {"full": "outline", "none": "none"}.get(variant, f"outline-{variant}")
        body = build_rankings(args.work, 0.25, 0.0625, 1.2, 0.75, context)
        table[variant] = recall_at(body, 1.0)
        print(f"{variant}: " + " / ".join(f"{x:.2f}" for x in mean_rows(table[variant])),
              flush=True)  # fmt: skip
    outline.outline_context = FULL
    picks, held = cross_validate(table, args.folds, args.seed)
    print(f"folds' picks: {picks}")
    print("held-out folds (Pass@5/10/20): " + " / ".join(f"{x:.2f}" for x in mean_rows(held)))
    say(load_line("at end"))


if __name__ == "__main__":
    main()
