"""Which parts of the outline context help on prose: BEIR sets, ctxr's chunks, tuning splits.

`bench.quality.outline_parts` measured the outline on code. This is its prose counterpart: a
BEIR document is a title and a text, ctxr indexes it as ``title\\n\\ntext`` (as `ctxr eval`
does), and each variant below puts another context before every chunk:

- ``none``: no context (the rows the BEIR figures of record are reported by);
- ``full``: ctxr's outline (``outline/2``): ``From <title> (<source>).``;
- ``title``: ``From <title>.``, the source left out;
- ``title-unless-first``: as ``title``, but nothing before a chunk that already begins with
  the title (a document's first chunk), so the title is not said twice;
- ``full-unless-first``: as ``full``, but only the path (``From <source>.``) before a chunk
  that already begins with the title, with or without a Markdown ``#``: the form ctxr would
  ship, which keeps the path.

A BEIR source is a name the harness makes (``scifact/<doc id>``), not a path a person chose,
so ``full`` against ``title`` says what a meaningless path costs, not what a real one is
worth; the title rows are the question. The set's documents have no headings, so the section
trail is never said.

Every variant is indexed with the defaults otherwise, by `ctxr.eval.runner.run_eval` with the
outline function swapped for the run (the only change), and scored on the split named
(tune on ``train`` / ``dev``; a variant is adopted only if it holds on every set). Embeddings
come from the shared cache (``--cache``), so the ``none`` index and the first chunks of
``title-unless-first`` cost nothing.

Usage::

    python -m bench.quality.outline_prose --set scifact:train --set nfcorpus:dev \\
        [--variants none,full,title,title-unless-first] [--work /tmp/ctxr-outline-prose] \\
        [--cache /tmp/q-evalidx/cache]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.enrich.situate import outline
from ctxr.eval.rows import parse_rows
from ctxr.eval.runner import EvalResult, run_eval
from ctxr.types import Chunk, Document

VARIANTS = ("none", "full", "title", "title-unless-first", "full-unless-first")
MODES = ("hybrid", "dense", "bm25")
ContextFn = Callable[[Document, Chunk], str]
# ctxr's own outline, kept before a run swaps the module's function for a variant's.
OUTLINE = outline.outline_context


def variant_context(variant: str) -> ContextFn:
    """The outline function a variant indexes with (``none`` is ctxr's own "none" context)."""
    if variant == "full":
        return OUTLINE
    if variant == "full-unless-first":
        return _path_unless_titled

    def context(document: Document, chunk: Chunk) -> str:
        if variant == "title-unless-first" and chunk.text.lstrip().startswith(document.title):
            return ""
        return f"From {document.title}."

    return context


def _path_unless_titled(document: Document, chunk: Chunk) -> str:
    full = OUTLINE(document, chunk)
    if not chunk.text.lstrip().lstrip("#").lstrip().startswith(document.title):
        return full
    return full.replace(f"From {document.title} ({document.source})", f"From {document.source}")


def run_variant(
    variant: str, name: str, split: str, data: Path, root: Path, cache: Path
) -> EvalResult:
    context = "none" if variant == "none" else "outline"
    rows = parse_rows([f"{mode}:{context}" for mode in MODES])
    settings = load_settings(cache_dir=cache)
    original = outline.outline_context
    outline.outline_context = variant_context(variant)  # `situate` looks it up at each call
    try:
        return run_eval(
            "beir", data / name, chunks="ours", rows=rows, index_dir=root / variant,
            settings=settings, split=split,
        )  # fmt: skip
    finally:
        outline.outline_context = original


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--set", action="append", required=True, help="NAME:SPLIT, repeatable")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/ctxr-outline-prose"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/q-evalidx/cache"))
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    say(load_line("at start"))
    table: dict[tuple[str, str], dict[str, float]] = {}
    for item in args.set:
        name, _, split = item.partition(":")
        for variant in variants:
            result = run_variant(variant, name, split or "test", args.data, args.work, args.cache)
            for row in result.rows:
                mode = row.name.split(":")[0]
                table.setdefault((f"{name} {split}", mode), {})[variant] = row.scores["ndcg@10"]
            say(f"{name} {split} {variant}: " + ", ".join(
                f"{r.name} {r.scores['ndcg@10']:.4f}" for r in result.rows
            ))  # fmt: skip
    say("")
    say("nDCG@10, the difference to `none` in brackets")
    say("")
    say("| set | mode | " + " | ".join(variants) + " |")
    say("|---|---|" + "---:|" * len(variants))
    for (label, mode), by_variant in table.items():
        base = by_variant.get("none", float("nan"))
        cells = []
        for variant in variants:
            ndcg = by_variant[variant]
            delta = "" if variant == "none" else f" [{ndcg - base:+.4f}]"
            cells.append(f"{ndcg:.4f}{delta}")
        say(f"| {label} | {mode} | " + " | ".join(cells) + " |")
    say("")
    say(load_line("at end"))


if __name__ == "__main__":
    main()
