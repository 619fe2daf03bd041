"""`ctxr split`: how files are chunked, and the chunk sizes per kind, for tuning a corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ctxr.cli.options import flags_for
from ctxr.config import load_settings


@click.command("split")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--max-tokens", type=int, default=None, help="chunk budget in tokens [CTXR_CHUNK_TOKENS]"
)
@click.option("--json", "as_json", is_flag=True, help="print the chunks as JSON")
def split_command(files: tuple[Path, ...], max_tokens: int | None, as_json: bool) -> None:
    """Show how files are chunked (offsets, tokens, trail, pages) and the chunk-size
    distribution per kind, for tuning a corpus.

    With one FILE, --json prints that file's object with a "sizes" entry; with several, an
    object holding "files" (one such object each) and "sizes" over all of them."""
    from ctxr.cli import render
    from ctxr.enrich.load.documents import load_document
    from ctxr.index import components
    from ctxr.pipeline.chunk_sizes import ChunkSizes
    from ctxr.pipeline.chunking import chunk_budget, default_chunker

    settings = load_settings(flags=flags_for(chunk_tokens="--max-tokens"), chunk_tokens=max_tokens)
    # The embedder's input is a hard cap, as in `ctxr index` (its tokenizer only is loaded).
    embedder = components.make_embedder(settings)
    chunker = default_chunker(settings, embedder)
    sizes = ChunkSizes()
    outputs: list[dict[str, Any]] = []
    for file in files:
        doc = load_document(file)  # the same load and split as `ctxr index`
        # The budget the chunker sizes with, computed once: reported below, passed to it.
        language = chunk_budget(settings, doc, embedder)
        chunks = chunker(doc, language)
        sizes.add(doc.kind, chunks)
        budget = settings.split.chunk_tokens_for(doc.kind)
        if as_json:
            outputs.append(render.split_json(doc, chunks, budget, language))
        else:
            render.print_split(doc, chunks, budget, language)
    if not as_json:
        for kind, summary in sizes.to_json().items():
            click.echo(f"{kind} chunk tokens: {render.size_line(summary)}")
        return
    body: dict[str, Any] = (
        outputs[0] | {"sizes": sizes.to_json()}
        if len(outputs) == 1
        else {"files": outputs, "sizes": sizes.to_json()}
    )
    click.echo(json.dumps(body, indent=2))
