"""`ctxr eval`: the click command; parsing and printing only, the work is in `ctxr.eval`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ctxr.errors import ConfigError, CtxrError
from ctxr.eval.datasets import default_data_dir
from ctxr.eval.rows import DEFAULT_ROWS, ChunkSource, DatasetKind, parse_rows

_DATASETS = ("anthropic-codebase", "beir")


def parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated integers, got {text!r}") from exc
    if not ks or ks[0] < 1:
        raise click.BadParameter("k values must be integers >= 1, e.g. 5,10,20")
    return ks


def resolve_dataset(dataset: str, data: Path | None) -> tuple[DatasetKind, Path]:
    """DATASET is a name or a path; a path is an anthropic-codebase folder if it holds
    ``codebase_chunks.json``, else a BEIR folder."""
    if dataset == "anthropic-codebase":
        return "anthropic-codebase", data or default_data_dir() / "anthropic-codebase"
    if dataset == "beir":
        return "beir", data or default_data_dir() / "scifact"
    path = Path(dataset)
    if data is not None or not path.exists():
        raise ConfigError(
            f"unknown data set {dataset!r}; use one of {', '.join(_DATASETS)} (with --data DIR) "
            "or the path of a data set folder"
        )
    kind: DatasetKind = (
        "anthropic-codebase" if (path / "codebase_chunks.json").is_file() else "beir"
    )
    return kind, path


@click.command("eval")
@click.argument("dataset")
@click.option("--data", type=click.Path(path_type=Path), help="data set folder [shared/data/…]")
@click.option(
    "--chunks",
    type=click.Choice(["given", "ours"]),
    default="given",
    show_default=True,
    help="anthropic-codebase: index its chunks or ctxr's splits",
)
@click.option(
    "--modes",
    default=",".join(DEFAULT_ROWS),
    show_default=True,
    help="ablation rows, MODE[:CONTEXT[:FUSION]]; MODE dense|bm25|bm25-doc|hybrid|rerank, "
    "CONTEXT none|outline, FUSION dbsf|rrf",
)
@click.option("--k", "ks", default=None, help="k values [5,10,20; BEIR: 10,100]")
@click.option("--candidates", type=int, default=None, help="top-N per retriever before fusion")
@click.option(
    "--index-dir",
    type=click.Path(path_type=Path),
    help="keep the evaluation indexes here (default: a temporary folder)",
)
@click.option("--limit-queries", type=int, default=None, help="only the first N queries")
@click.option(
    "--split",
    type=click.Choice(["test", "dev", "train"]),
    default="test",
    show_default=True,
    help="BEIR: the judged queries to score, qrels/SPLIT.tsv (tune on train or dev, report test)",
)
@click.option(
    "--language",
    default=None,
    help="BEIR: the corpus is source code in this language (e.g. python for CoSQA), indexed "
    "as ctxr indexes such files",
)
@click.option(
    "--own-documents",
    type=click.Choice(["drop", "leave-out"]),
    default="drop",
    show_default=True,
    help="BEIR: a query that is itself a corpus document (ArguAna) has that document dropped "
    "from its hits (BEIR's rule), or is searched as if the corpus lacked it (leave-out)",
)
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option("--markdown", "as_markdown", is_flag=True, help="print a Markdown table")
@click.option(
    "--plot",
    type=click.Path(path_type=Path, dir_okay=False),
    help="write recall against k per row to FILE.png (needs ctxr[plot])",
)
def eval_command(
    dataset: str,
    data: Path | None,
    chunks: str,
    modes: str,
    ks: str | None,
    candidates: int | None,
    index_dir: Path | None,
    limit_queries: int | None,
    split: str,
    language: str | None,
    own_documents: str,
    as_json: bool,
    as_markdown: bool,
    plot: Path | None,
) -> None:
    """Measure retrieval quality on a judged data set: anthropic-codebase or beir (SciFact)."""
    from rich.console import Console

    from ctxr.cli.progress import RichProgress
    from ctxr.eval.report import plot_recall, print_report, to_json, to_markdown
    from ctxr.eval.runner import run_eval
    from ctxr.progress import NullProgress, Progress

    err = Console(stderr=True)
    try:
        kind, path = resolve_dataset(dataset, data)
        k_values = parse_ks(ks) if ks else ([10, 100] if kind == "beir" else [5, 10, 20])
        rows = parse_rows(modes)
        if plot is not None:
            _check_plot_available()
        bar: Progress = NullProgress() if as_json or as_markdown else RichProgress(err)
        chunk_source: ChunkSource = "ours" if chunks == "ours" else "given"
        kwargs: dict[str, Any] = {
            "chunks": chunk_source, "rows": rows, "ks": k_values, "index_dir": index_dir,
            "limit_queries": limit_queries, "candidates": candidates, "progress": bar,
            "split": split, "language": language, "leave_own_out": own_documents == "leave-out",
        }  # fmt: skip
        if isinstance(bar, RichProgress):
            with bar:
                result = run_eval(kind, path, **kwargs)
        else:
            result = run_eval(kind, path, **kwargs)
        if plot is not None:
            plot_recall(result, plot)
    except CtxrError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(to_json(result), indent=2))
    elif as_markdown:
        click.echo(to_markdown(result), nl=False)
    else:
        # A pipe gets rich's 80 columns by default: too narrow for the published column.
        print_report(result, Console(width=None if sys.stdout.isatty() else 160))
    if plot is not None and not (as_json or as_markdown):
        err.print(f"plot written to {plot}", highlight=False)


def _check_plot_available() -> None:
    """Fail before indexing, not after, when --plot cannot be honoured."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "--plot needs matplotlib, an optional extra: pip install 'ctxr[plot]'"
        ) from exc
