"""The `ctxr` command line: parsing and printing only; the work lives in the library.

Errors that ctxr raises on purpose print one line (what, and the fix) and exit with status 2.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from dotenv import load_dotenv

from ctxr.cli import render
from ctxr.cli.eval import eval_command
from ctxr.config import load_settings
from ctxr.errors import ConfigError, CtxrError

err_console = render.err_console


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ctxr: %(message)s"))
    logger = logging.getLogger("ctxr")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


class _Group(click.Group):
    """Turns deliberate ctxr errors into one readable line instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CtxrError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
            sys.exit(2)


@click.group(cls=_Group)
@click.version_option(package_name="ctxr")
def main() -> None:
    """ctxr: contextual-retrieval indexing and hybrid (dense + BM25) search."""
    _setup_logging()
    # Provider keys and base URLs in ./.env reach the SDKs as if exported; real environment
    # variables win over the file.
    load_dotenv(dotenv_path=Path.cwd() / ".env", override=False)


index_option = click.option(
    "--index", "index_dir", type=click.Path(path_type=Path), help="index directory [./.ctxr]"
)


@main.command("index")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@index_option
@click.option("--rebuild", is_flag=True, help="delete the index and build it anew")
@click.option("--prune/--no-prune", default=True, help="remove documents deleted from a folder")
@click.option("--context", type=click.Choice(["auto", "llm", "outline", "none"]), default=None)
@click.option("--chunk-tokens", type=int, default=None, help="chunk budget in tokens")
@click.option(
    "--chunking",
    type=click.Choice(["structure", "semantic", "parent"]),
    default=None,
    help="structure, semantic (topic breakpoints) or parent (parent-child) [CTXR_CHUNKING]",
)
@click.option("--strict", is_flag=True, help="exit 1 if any file could not be loaded")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--dry-run", is_flag=True, help="only estimate the cost; write nothing")
def index_command(
    paths: tuple[Path, ...],
    index_dir: Path | None,
    rebuild: bool,
    prune: bool,
    context: str | None,
    chunk_tokens: int | None,
    chunking: str | None,
    strict: bool,
    as_json: bool,
    dry_run: bool,
) -> None:
    """Index files and folders (Markdown, code, text) into a hybrid search index."""
    from ctxr.cli.progress import RichProgress
    from ctxr.enrich.situate.contexts import resolve_context
    from ctxr.pipeline.build import build_index
    from ctxr.progress import NullProgress, Progress

    settings = load_settings(
        index_dir=index_dir, context=context, chunk_tokens=chunk_tokens, chunking=chunking
    )
    plan = resolve_context(settings)
    if plan.kind == "llm" and not dry_run:
        logging.getLogger("ctxr").info(f"contexts written by {plan.provider} {plan.model}")
    elif settings.context == "auto":
        logging.getLogger("ctxr").info(
            "no LLM provider configured (ANTHROPIC_API_KEY, OPENAI_API_KEY or their *_BASE_URL): "
            "chunks get outline contexts (title, path, headings)"
        )
    if dry_run:
        from ctxr.pipeline.estimate import estimate_paths

        models = [plan.model] if plan.kind == "llm" and plan.model else []
        result = estimate_paths(paths, settings, models=models, ignore_manifest=rebuild)
        render.print_estimate(result, as_json)
        return
    bar: Progress = NullProgress() if as_json else RichProgress(err_console)
    if isinstance(bar, RichProgress):
        with bar:
            report = build_index(paths, settings, rebuild=rebuild, prune=prune, progress=bar)
    else:
        report = build_index(paths, settings, rebuild=rebuild, prune=prune, progress=bar)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        render.print_index_summary(report)
    if strict and report.failed:
        sys.exit(1)
    if report.contexts and report.contexts.get("failures"):
        sys.exit(1)  # some chunks have outline contexts in place of failed LLM ones


@main.command("estimate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@index_option
@click.option("--model", "models", multiple=True, help="model to price; repeat to compare")
@click.option("--output-tokens", type=click.IntRange(min=0), default=None,
              help="assumed output tokens per context [100]")  # fmt: skip
@click.option("--chunk-tokens", type=int, default=None, help="chunk budget in tokens")
@click.option("--exact", is_flag=True, help="count Claude tokens with Anthropic's count_tokens")
@click.option("--json", "as_json", is_flag=True, help="print the estimate as JSON")
def estimate_command(
    paths: tuple[Path, ...],
    index_dir: Path | None,
    models: tuple[str, ...],
    output_tokens: int | None,
    chunk_tokens: int | None,
    exact: bool,
    as_json: bool,
) -> None:
    """Estimate what indexing PATHS with LLM contexts would cost; calls no model."""
    from ctxr.pipeline.estimate import estimate_paths

    settings = load_settings(index_dir=index_dir, chunk_tokens=chunk_tokens)
    result = estimate_paths(
        paths, settings, models=models or None, output_tokens=output_tokens, exact=exact
    )
    render.print_estimate(result, as_json)


@main.command("search")
@click.argument("query", required=False)
@index_option
@click.option("-k", "k", type=int, default=10, show_default=True, help="hits to return")
@click.option("--mode", type=click.Choice(["hybrid", "dense", "bm25"]), default="hybrid")
@click.option("--candidates", type=int, default=None, help="top-N per retriever before fusion")
@click.option(
    "--fusion",
    type=click.Choice(["dbsf", "rrf", "weighted"]),
    default=None,
    help="hybrid fusion: distribution-based score fusion [dbsf], reciprocal rank, weighted rank",
)
@click.option("--rrf-k", type=int, default=None, help="reciprocal rank fusion constant [60]")
@click.option("--queries", type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help='JSONL file of {"id", "query"}; prints one JSON line per query')  # fmt: skip
@click.option(
    "--filter",
    "filter_exprs",
    multiple=True,
    metavar="KEY=VALUE",
    help="payload filter, repeatable: source=docs/, kind=markdown, token_count>=50",
)
@click.option("--merge", is_flag=True, help="merge adjacent hits of one document into passages")
@click.option(
    "--expand", is_flag=True, help="return each hit's parent section (CTXR_CHUNKING=parent)"
)
@click.option(
    "--rerank",
    type=click.Choice(["llm", "http", "cross-encoder", "none"]),
    default=None,
    help="rerank the top fused candidates [CTXR_RERANK, default off]",
)
@click.option("--json", "as_json", is_flag=True, help="print hits as JSON")
def search_command(
    query: str | None,
    index_dir: Path | None,
    k: int,
    mode: str,
    candidates: int | None,
    fusion: str | None,
    rrf_k: int | None,
    queries: Path | None,
    filter_exprs: tuple[str, ...],
    merge: bool,
    expand: bool,
    rerank: str | None,
    as_json: bool,
) -> None:
    """Search an index: dense and BM25 rankings fused (DBSF or reciprocal rank fusion)."""
    from ctxr.index.filters import filters_from_cli
    from ctxr.retrieve.service import SearchService

    filters = filters_from_cli(filter_exprs) if filter_exprs else None
    if (query is None) == (queries is None):
        raise click.UsageError("give either a QUERY or --queries FILE.jsonl")
    settings = load_settings(index_dir=index_dir, candidates=candidates, fusion=fusion, rrf_k=rrf_k)
    with SearchService(settings) as service:
        if queries is not None:
            batch = list(_read_queries(queries))
            results = service.search_many(
                [q for _, q in batch],
                k=k,
                mode=mode,
                filters=filters,
                merge=merge,
                rerank=rerank,
                expand=expand,
            )
            for (query_id, text), hits in zip(batch, results, strict=True):
                line = {"id": query_id, "query": text, "hits": [h.to_json() for h in hits]}
                click.echo(json.dumps(line, ensure_ascii=False))
            return
        assert query is not None
        hits = service.search(
            query, k=k, mode=mode, filters=filters, merge=merge, rerank=rerank, expand=expand
        )
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hits], indent=2, ensure_ascii=False))
    else:
        render.print_hits(query, hits)


def _read_queries(path: Path) -> Iterator[tuple[str, str]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            yield str(record["id"]), str(record["query"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f'{path}:{number}: expected a JSON object with "id" and "query" ({exc}); '
                "fix or remove that line"
            ) from exc


@main.command("serve")
@index_option
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
def serve_command(index_dir: Path | None, host: str, port: int) -> None:
    """Serve search over HTTP (POST /search, /health, /stats, /documents/ID, /docs)."""
    try:
        from ctxr.api.app import serve
    except ImportError as exc:
        raise ConfigError(
            f"`ctxr serve` needs FastAPI and uvicorn ({exc}); pip install 'ctxr[server]'"
        ) from exc
    settings = load_settings(index_dir=index_dir)
    if host not in ("127.0.0.1", "localhost", "::1") and settings.api_token is None:
        logging.getLogger("ctxr").warning(
            f"serving on {host} without CTXR_API_TOKEN: anyone who can reach it can search"
        )
    serve(settings, host=host, port=port)


@main.command("split")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--max-tokens", type=int, default=None, help="chunk budget in tokens [CTXR_CHUNK_TOKENS]"
)
@click.option("--json", "as_json", is_flag=True, help="print the chunks as JSON")
def split_command(file: Path, max_tokens: int | None, as_json: bool) -> None:
    """Show how one file is chunked (offsets, tokens, trail, pages), for tuning a corpus."""
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


main.add_command(eval_command, "eval")

if __name__ == "__main__":
    main()
