"""`ctxr search`: one query, or a JSONL file of them, against an index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click

from ctxr.cli.options import flags_for, index_option
from ctxr.config import FUSIONS, RERANK_OFF, RERANKERS, SEARCH_MODES, load_settings
from ctxr.errors import ConfigError


@click.command("search")
@click.argument("query", required=False)
@index_option
@click.option("-k", "k", type=int, default=10, show_default=True, help="hits to return")
@click.option("--mode", type=click.Choice(SEARCH_MODES), default="hybrid")
@click.option("--candidates", type=int, default=None, help="top-N per retriever before fusion")
@click.option(
    "--fusion",
    type=click.Choice(FUSIONS),
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
    help="payload filter, repeatable: source=docs/, kind=markdown, token_count>=50, "
    "meta.tags=api (front matter), source!=tests/ (none of)",
)
@click.option("--merge", is_flag=True, help="merge adjacent hits of one document into passages")
@click.option(
    "--expand", is_flag=True, help="return each hit's parent section (CTXR_CHUNKING=parent)"
)
@click.option(
    "--rerank",
    type=click.Choice((*RERANKERS, RERANK_OFF)),
    default=None,
    help="rerank the top fused candidates [CTXR_RERANK, default off]",
)
@click.option("--json", "as_json", is_flag=True, help="print the hits as JSON (ctxr.hits/1)")
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
    from ctxr.cli import render
    from ctxr.client import Client  # the index, or the server that owns it
    from ctxr.index.filters import filters_from_cli
    from ctxr.retrieve.hits import Asked, hits_result, result_json
    from ctxr.retrieve.searcher import SearchOptions

    filters = filters_from_cli(filter_exprs) if filter_exprs else None
    if (query is None) == (queries is None):
        raise click.UsageError("give either a QUERY or --queries FILE.jsonl")
    settings = load_settings(
        flags=flags_for("index_dir", "candidates", "fusion", "rrf_k"),
        index_dir=index_dir, candidates=candidates, fusion=fusion, rrf_k=rrf_k,
    )  # fmt: skip
    # --candidates and --fusion are in the settings of a local index, and sent to a server.
    options = SearchOptions.given(
        k=k, mode=mode, filters=filters, merge=merge, rerank=rerank, expand=expand
    )
    # How the hits were searched, as every answer of the hit schema says (ctxr.retrieve.hits).
    asked = Asked(mode, settings.search.fusion, k, merge, expand)
    with Client.for_index(settings, candidates=candidates, fusion=fusion, rrf_k=rrf_k) as client:
        if queries is not None:
            batch = list(_read_queries(queries))
            results = client.search_many([q for _, q in batch], options)
            warnings: list[str] = []
            for (query_id, text), hits in zip(batch, results, strict=True):
                line = hits_result(text, hits, asked, query_id)
                warnings += line.warnings
                click.echo(json.dumps(result_json(line), ensure_ascii=False))
            render.print_warnings(warnings)
            return
        assert query is not None
        hits = client.search(query, options)
    result = hits_result(query, hits, asked)
    if as_json:
        click.echo(json.dumps(result_json(result), indent=2, ensure_ascii=False))
    else:
        render.print_hits(query, hits)
    render.print_warnings(result.warnings)


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
