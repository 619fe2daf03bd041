"""How the CLI shows results: summary tables, hit tables, split listings and estimates.

Kept apart from the command modules so that the commands stay parsing and calling. Functions
here format or print (results to stdout, summaries to stderr); none computes anything.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import click
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from ctxr.types import Chunk, Document, Hit

if TYPE_CHECKING:
    from ctxr.enrich.split.inflation import LanguageBudget
    from ctxr.pipeline.estimate_report import Estimate
    from ctxr.pipeline.report import IndexReport

err_console = Console(stderr=True)
out_console = Console()


def _unchanged(report: IndexReport) -> str:
    # Most files of an update are passed over by their stamp; said, it is why it is quick.
    unread = report.documents_unread
    if not unread:
        return str(report.documents_unchanged)
    return f"{report.documents_unchanged} ({unread} not read: size and times as indexed)"


def print_index_summary(report: IndexReport, verbose: bool = False) -> None:
    rows: list[tuple[str, str]] = [
        ("index", str(report.index_dir)),  # folded below, once the column's width is known
        ("files seen", str(report.files_seen)),
        ("documents indexed", str(report.documents_indexed)),
        ("documents unchanged", _unchanged(report)),
        ("documents removed", str(report.documents_removed)),
        ("chunks written", str(report.chunks_written)),
    ]
    for kind, sizes in report.chunk_sizes.items():
        rows.append((f"  {kind} chunk tokens", size_line(sizes)))
    # How much more the embedder read than the documents hold (contexts, prefixes, overlap):
    # a tuning figure, not news for a first run, so only with --verbose (always in --json).
    if verbose and (amplification := report.amplification()):
        parts = ", ".join(f"{kind} {ratio:.2f}x" for kind, ratio in amplification.items())
        rows.append(("embedded per document word piece", parts))
    rows.append(("points in index", str(report.points_total)))
    rows.append(("contexts", report.context_kind))
    if report.executor != "local":
        rows.append(("split and embedded on", report.executor))
    if report.points_written_by_workers:
        rows.append(("written by the workers", f"{report.points_written_by_workers} points"))
    if report.contexts:
        c = report.contexts
        dollars = c.dollars
        rows.append(("LLM", f"{c.provider} {c.model}"))
        rows.append((
            "LLM requests",
            f"{c.requests} ({c.retries} retries, {c.failures} failed, {c.flagged} not a "
            f"context, {c.response_cache_hits} answered from cache)",
        ))  # fmt: skip
        hour = f" (+{c.cache_write_1h_tokens:,} for 1 h)" if c.cache_write_1h_tokens else ""
        rows.append((
            "LLM tokens",
            f"{c.input_tokens:,} in, {c.cache_write_tokens:,} cache write{hour}, "
            f"{c.cache_read_tokens:,} cache read ({c.cache_read_share:.0%} of prompt), "
            f"{c.output_tokens:,} out",
        ))  # fmt: skip
        if (b := c.batch) is not None:
            rows.append((
                "batches",
                f"{b.submitted} submitted, {b.resumed} resumed, {b.ended} ended; requests "
                f"{b.succeeded} answered, {b.errored} errored, {b.expired} expired, "
                f"{b.canceled} canceled, {b.reused} reused",
            ))  # fmt: skip
        rows.append(("cache writes", f"{c.cache_writes} for {c.documents} documents"))
        rows.append(("cost", "unknown" if dollars is None else f"${dollars:.4f}"))
    rates = report.rates()
    rows.append((
        "throughput",
        f"{rates['documents_per_second']:,.2f} documents/s, "
        f"{rates['chunks_per_second']:,.1f} chunks/s",
    ))  # fmt: skip
    rows.append(("time", f"{report.seconds:.1f} s"))
    rows.append(("  where it went", stage_line(report.stages())))
    if report.optimize_seconds:
        rows.append(("HNSW build", f"{report.optimize_seconds:.1f} s"))
    # Two columns, three rules and a space either side of each cell: what is left is the
    # value column, and the index path folds to it at its separators.
    label_width = max(len(label) for label, _ in rows)
    value_width = max(16, err_console.width - label_width - 7)
    rows[0] = ("index", fold_path(rows[0][1], value_width))
    table = Table(title="ctxr index", show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, value)
    err_console.print(table)
    if report.skipped:
        from ctxr.enrich.load.kinds import summarize_skips

        if verbose:
            for skipped in report.skipped:
                err_console.print(f"skipped: {skipped.path}: {skipped.reason}", highlight=False)
        err_console.print(summarize_skips(s.reason for s in report.skipped), highlight=False)
    for path, reason in report.failed:
        err_console.print(f"[yellow]not indexed:[/] {path}: {reason}", highlight=False)
    for notice in report.notices:
        err_console.print(f"[yellow]note:[/] {notice}", highlight=False)


def stage_line(stages: dict[str, float]) -> str:
    """Where a run's time went: `split 0.4 s (3%), contexts 0.0 s (0%), embed 12.1 s (81%)`."""
    total = sum(stages.values())
    parts = []
    for stage, seconds in stages.items():
        share = f" ({seconds / total:.0%})" if total > 0 else ""
        parts.append(f"{stage} {seconds:.1f} s{share}")
    return ", ".join(parts)


def print_interrupted(report: IndexReport, resume: str) -> None:
    """What a run stopped by Ctrl-C kept, and the command that carries on from there."""
    err_console.print("[bold yellow]interrupted[/]: stopped by Ctrl-C", highlight=False)
    err_console.print(
        f"kept: {report.documents_indexed} documents indexed in {report.index_dir} "
        f"({report.chunks_written} chunks written; a document cut off midway is redone by the "
        "next run, its embeddings from the cache)",
        highlight=False,
    )
    if (c := report.contexts) is not None:
        paid = "" if c.dollars is None else f", ${c.dollars:.4f}"
        err_console.print(
            f"kept: {c.requests} LLM requests answered{paid}, each answer in the response "
            f"cache ({c.response_cache_hits} more came from it): the next run does not pay "
            "for them again",
            highlight=False,
        )
    err_console.print(
        "lost: the batch being written when you pressed Ctrl-C (what it had embedded is in "
        "the embedding cache) and any LLM requests in flight",
        highlight=False,
    )
    # soft_wrap: one line to copy, whatever the terminal width.
    err_console.print(f"resume with: {resume}", highlight=False, markup=False, soft_wrap=True)


def print_estimate(result: Estimate, as_json: bool, verbose: bool = False) -> None:
    from ctxr.pipeline.estimate_report import render

    if verbose and not as_json:
        for skipped in result.skipped:
            err_console.print(f"skipped: {skipped.path}: {skipped.reason}", highlight=False)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        render(result, out_console)


def print_hits(query: str, hits: list[Hit]) -> None:
    if not hits:
        out_console.print(f"no hits for {query!r}", highlight=False)
        return
    # Widths fixed here rather than by rich's ratios, so that a source path can be folded at
    # its separators to exactly its column: four columns take five rules and two spaces each.
    rank_width = len(str(max(hit.rank for hit in hits)))
    score_width = 18
    rest = max(out_console.width - 13 - rank_width - score_width, 32)
    source_width = max(rest * 2 // 5, 14)
    table = Table(title=f"{len(hits)} hits for {query!r}", show_lines=True)
    table.add_column("#", justify="right", width=rank_width)
    table.add_column("source / section", overflow="fold", width=source_width)
    table.add_column("snippet", overflow="fold", width=rest - source_width)
    table.add_column("score (dense, bm25 ranks)", width=score_width)
    for hit in hits:
        where = fold_path(hit.source, source_width)
        where += f" (p. {', '.join(map(str, hit.pages))})" if hit.pages else ""
        where += ("\n" + " > ".join(hit.heading_path)) if hit.heading_path else ""
        snippet = " ".join(hit.text.split())
        snippet = snippet[:200] + ("…" if len(snippet) > 200 else "")
        ranks = ", ".join(f"{name} #{s.rank}" for name, s in hit.scores.items())
        table.add_row(str(hit.rank), where, snippet, f"{hit.score:.4f}\n{ranks}")
    out_console.print(table, highlight=False)


def fold_path(path: str, width: int) -> str:
    """`path` on lines of at most `width` cells, broken after its separators so that no
    name is cut (`examples/docs/` / `backup-restore.md`); only a name longer than the width
    itself is left for the table to fold."""
    lines: list[str] = []
    line = ""
    for part in re.split(r"(?<=[/\\])", path):
        if line and cell_len(line + part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])


def print_warnings(warnings: list[str]) -> None:
    """What concerns a search's answer (a flag of its hits), once each, on stderr: a `--json`
    reader gets clean output and a person still sees why hits are not as asked."""
    for warning in dict.fromkeys(warnings):
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def split_json(
    doc: Document, chunks: list[Chunk], budget: int, language: LanguageBudget | None = None
) -> dict[str, Any]:
    """One file's chunks. `language` is the prose budget's detected language: then
    `max_tokens` is the budget scaled by its `token_inflation` and `plain_max_tokens` the
    kind's budget before scaling (`language` itself is a code file's programming language)."""
    from ctxr.enrich.split.inflation import plain_budget

    scaled = language or plain_budget(budget)
    return {
        "source": doc.source,
        "kind": doc.kind,
        "title": doc.title,
        "language": doc.language,
        "natural_language": scaled.language,
        "token_inflation": scaled.inflation,
        "chars": len(doc.text),
        "max_tokens": scaled.max_tokens,
        "plain_max_tokens": budget,
        "chunks": [
            {
                "index": c.index,
                "chunk_id": c.chunk_id,
                "start": c.start,
                "end": c.end,
                "tokens": c.token_count,
                "heading_path": list(c.heading_path),
                "pages": list(c.pages),
                "prefix": c.prefix,
                "parent_start": c.parent_start,
                "parent_end": c.parent_end,
                "text": c.text,
            }
            for c in chunks
        ],
    }


def size_line(sizes: dict[str, object]) -> str:
    """One kind's chunk-size distribution (``ctxr.pipeline.chunk_sizes.summary``) on a line."""
    under = sizes["share_under_40"]
    share = f"{under:.0%}" if isinstance(under, float) else str(under)
    return (
        f"{sizes['chunks']} chunks, median {sizes['median']} (p10 {sizes['p10']}, "
        f"p90 {sizes['p90']}, max {sizes['max']}), {share} under 40"
    )


def print_split(
    doc: Document, chunks: list[Chunk], budget: int, language: LanguageBudget | None = None
) -> None:
    from rich.text import Text

    def snippet(text: str, width: int) -> Text:  # Text: "[12:01]" must not be read as markup
        flat = " ".join(text.split())
        return Text(flat if len(flat) <= width else flat[: width - 1] + "…")

    title = f"{doc.source} ({doc.kind}): {len(chunks)} chunks, budget {budget} tokens"
    if language is not None and language.inflation != 1.0:
        title += f" x {language.inflation:g} for {language.language} = {language.max_tokens}"
    elif language is not None and language.language is not None:
        title += f" ({language.language})"
    table = Table(title=Text(title), title_justify="left")
    for name in ("#", "start-end", "tokens", "trail", "pages", "prefix", "snippet"):
        table.add_column(name, overflow="fold")
    for c in chunks:
        table.add_row(
            str(c.index),
            f"{c.start}-{c.end}",
            str(c.token_count),
            Text(" > ".join(c.heading_path)),
            ",".join(map(str, c.pages)),
            snippet(c.prefix, 24),
            snippet(c.text, 60),
        )
    out_console.print(table)
