"""Which parts of the outline context help on prose: BEIR sets, ctxr's chunks, tuning splits.

`bench.quality.outline_parts` measured the outline on code. This is its prose counterpart: a
BEIR document is a title and a text, ctxr indexes it as ``title\\n\\ntext`` (as `ctxr eval`
does), and each variant below puts another context before every chunk:

- ``none``: no context (the rows the BEIR figures of record are reported by);
- ``full``: ctxr's outline (``outline/3``): ``From <title> (<source>).``, but only the path
  (``From <source>.``) before a chunk that opens with the title, with or without a Markdown
  ``#`` (measured as ``full-unless-first`` before it became the outline);
- ``full-twice``: the outline before that (``outline/2``), which said the title before every
  chunk, the first one too;
- ``title``: ``From <title>.``, the source left out;
- ``title-unless-first``: as ``title``, but nothing before a chunk that already begins with
  the title (a document's first chunk), so the title is not said twice.

A BEIR source is a name the harness makes (``scifact/<doc id>``), not a path a person chose,
so ``full`` against ``title`` says what a meaningless path costs, not what a real one is
worth; the title rows are the question. The set's documents have no headings, so the section
trail is never said.

Every variant is indexed with the defaults otherwise, by `ctxr.eval.runner.run_eval` with the
outline function swapped for the run (the only change), and scored on the split named
(tune on ``train`` / ``dev``; a variant is adopted only if it holds on every set). Embeddings
come from the shared cache (``--cache``), so the ``none`` index and the first chunks of
``title-unless-first`` cost nothing.

``--opening-titles`` indexes nothing: it counts, per set, the documents whose text contains
their own title at all. Where none does, no chunk can open with its title, so ``full`` and the
"unless-first" variants index the same text and score the same (the code set, whose titles
are ``doc_N``; CoSQA, whose functions have no titles and are named by their source).

Usage::

    python -m bench.quality.outline_prose --set scifact:train --set nfcorpus:dev \\
        [--variants none,full,title,title-unless-first] [--work /tmp/ctxr-outline-prose] \\
        [--cache /tmp/q-evalidx/cache]
    python -m bench.quality.outline_prose --opening-titles --set anthropic-codebase \\
        --set cosqa:dev:python --set arguana:test
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common.measure import load_line, say
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.enrich.situate import outline
from ctxr.eval.rows import parse_rows
from ctxr.eval.runner import EvalResult, load_dataset, run_eval, to_documents
from ctxr.types import Chunk, Document

VARIANTS = ("none", "full", "full-twice", "title", "title-unless-first")
MODES = ("hybrid", "dense", "bm25")
ContextFn = Callable[[Document, Chunk], str]
# ctxr's own outline, kept before a run swaps the module's function for a variant's.
OUTLINE = outline.outline_context


def variant_context(variant: str) -> ContextFn:
    """The outline function a variant indexes with (``none`` is ctxr's own "none" context)."""
    if variant == "full":
        return OUTLINE
    if variant == "full-twice":
        return _title_always

    def context(document: Document, chunk: Chunk) -> str:
        if variant == "title-unless-first" and chunk.text.lstrip().startswith(document.title):
            return ""
        return f"From {document.title}."

    return context


def _title_always(document: Document, chunk: Chunk) -> str:
    """``outline/2``: the title said before a chunk that opens with it too."""
    full = OUTLINE(document, chunk)
    path_only = f"From {document.source}"
    if document.title == document.source.rsplit("/", 1)[-1] or not full.startswith(path_only):
        return full
    return full.replace(path_only, f"From {document.title} ({document.source})", 1)


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


def count_opening_titles(item: str, data: Path) -> None:
    """Say how many of a set's documents contain their own title (``NAME[:SPLIT[:LANGUAGE]]``)."""
    name, _, rest = item.partition(":")
    split, _, language = rest.partition(":")
    kind = "anthropic-codebase" if name == "anthropic-codebase" else "beir"
    dataset = load_dataset(kind, data / name, split or "test", language or None)
    documents = to_documents(dataset, kind)
    holding = sum(1 for d in documents if d.title and d.title in d.text)
    say(f"{name}: {holding} of {len(documents)} documents contain their title "
        f"(e.g. {documents[0].title!r})")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--set", action="append", required=True, help="NAME:SPLIT, repeatable")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/ctxr-outline-prose"))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/q-evalidx/cache"))
    parser.add_argument("--opening-titles", action="store_true", help="count, index nothing")
    args = parser.parse_args(argv)
    if args.opening_titles:
        for item in args.set:
            count_opening_titles(item, args.data)
        return
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
    say("nDCG@10" + (", the difference to `none` in brackets" if "none" in variants else ""))
    say("")
    say("| set | mode | " + " | ".join(variants) + " |")
    say("|---|---|" + "---:|" * len(variants))
    for (label, mode), by_variant in table.items():
        base = by_variant.get("none")
        cells = []
        for variant in variants:
            ndcg = by_variant[variant]
            delta = "" if variant == "none" or base is None else f" [{ndcg - base:+.4f}]"
            cells.append(f"{ndcg:.4f}{delta}")
        say(f"| {label} | {mode} | " + " | ".join(cells) + " |")
    say("")
    say(load_line("at end"))


if __name__ == "__main__":
    main()
