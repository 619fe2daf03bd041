"""`ctxr estimate`: what indexing with LLM contexts would cost, per model; calls no model."""

from __future__ import annotations

from pathlib import Path

import click

from ctxr.cli.options import flags_for, index_option
from ctxr.config import load_settings


@click.command("estimate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@index_option
@click.option("--model", "models", multiple=True, help="model to price; repeat to compare")
@click.option("--output-tokens", type=click.IntRange(min=0), default=None,
              help="assumed output tokens per context [100]")  # fmt: skip
@click.option("--chunk-tokens", type=int, default=None, help="chunk budget in tokens")
@click.option("--exact", is_flag=True, help="count Claude tokens with Anthropic's count_tokens")
@click.option("--batch", is_flag=True, default=None,
              help="estimate a --batch run (Batch API prices, 1-hour cache writes)")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print the estimate as JSON")
def estimate_command(
    paths: tuple[Path, ...],
    index_dir: Path | None,
    models: tuple[str, ...],
    output_tokens: int | None,
    chunk_tokens: int | None,
    exact: bool,
    batch: bool | None,
    as_json: bool,
) -> None:
    """Estimate what indexing PATHS with LLM contexts would cost; calls no model."""
    from ctxr.cli import render
    from ctxr.pipeline.estimate import estimate_paths

    settings = load_settings(
        flags=flags_for("index_dir", "chunk_tokens", "llm_batch"),
        index_dir=index_dir,
        chunk_tokens=chunk_tokens,
        llm_batch=batch,
    )
    result = estimate_paths(
        paths, settings, models=models or None, output_tokens=output_tokens, exact=exact
    )
    render.print_estimate(result, as_json)
