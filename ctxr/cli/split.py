"""`ctxr split`: how one file is chunked, for tuning a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ctxr.config import load_settings


@click.command("split")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--max-tokens", type=int, default=None, help="chunk budget in tokens [CTXR_CHUNK_TOKENS]"
)
@click.option("--json", "as_json", is_flag=True, help="print the chunks as JSON")
def split_command(file: Path, max_tokens: int | None, as_json: bool) -> None:
    """Show how one file is chunked (offsets, tokens, trail, pages), for tuning a corpus."""
    from ctxr.cli import render
    from ctxr.enrich.load.documents import load_document
    from ctxr.pipeline.chunking import default_chunker

    settings = load_settings(chunk_tokens=max_tokens)
    doc = load_document(file)  # the same load and split as `ctxr index`
    from ctxr.index import components

    # The embedder's input is a hard cap, as in `ctxr index` (its tokenizer only is loaded).
    chunks = default_chunker(settings, components.make_embedder(settings))(doc)
    if as_json:
        click.echo(json.dumps(render.split_json(doc, chunks, settings.chunk_tokens), indent=2))
        return
    render.print_split(doc, chunks, settings.chunk_tokens)
