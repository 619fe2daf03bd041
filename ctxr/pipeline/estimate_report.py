"""The result of a cost estimate (`ctxr.pipeline.estimate`), as JSON and as one side-by-side table.

Every dollar figure is `PriceTable.cost` of a token count, the same arithmetic as the ledger of
a real run; the line items here only split it by token kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from ctxr.enrich.load.kinds import summarize_skips
from ctxr.enrich.load.walk import Skipped
from ctxr.llm.base import Usage
from ctxr.llm.pricing import PER_MILLION, ModelPrice
from ctxr.pipeline.estimate_plain import PlainRun

TOKEN_KINDS = ("input", "cache_write", "cache_write_1h", "cache_read", "output")
_LABELS = {
    "input": "uncached input",
    "cache_write": "cache write",
    "cache_write_1h": "cache write (1 h)",
    "cache_read": "cache read",
    "output": "output",
}


@dataclass(slots=True)
class DocumentCost:
    source: str
    chunks: int = 0  # chunks to send
    requests: int = 0
    prefixes: int = 0
    cached: bool = True  # every prefix at or above the minimum cacheable size
    document_tokens: int = 0
    usage: Usage = field(default_factory=Usage)
    dollars: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "chunks": self.chunks,
            "requests": self.requests,
            "prefixes": self.prefixes,
            "cached": self.cached,
            "document_tokens": self.document_tokens,
            "tokens": _tokens(self.usage),
            "dollars": round(self.dollars, 6),
        }


@dataclass(slots=True)
class ModelEstimate:
    model: str
    provider: str
    encoding: str
    tokens_exact: bool
    token_note: str
    min_cacheable_tokens: int
    price: ModelPrice
    documents_unchanged: int = 0  # by the manifest: cost nothing
    chunks: int = 0  # of the documents to (re)index
    chunks_answered: int = 0  # in the response cache already
    chunks_deduplicated: int = 0  # identical to another chunk of their document: no request
    requests: int = 0
    prefixes: int = 0
    cached_prefixes: int = 0
    usage: Usage = field(default_factory=Usage)
    embedding_tokens: int = 0
    embedding_dollars: float | None = 0.0
    documents: list[DocumentCost] = field(default_factory=list)
    batch_run: bool = False  # --batch: priced with the Batch API discount, 1-hour cache writes

    @property
    def documents_to_send(self) -> int:
        return sum(1 for d in self.documents if d.chunks)

    @property
    def document_tokens(self) -> int:
        return sum(d.document_tokens for d in self.documents if d.chunks)

    def dollars(self, batch: bool | None = None) -> float:
        """The run's price: batch-priced for a --batch run unless `batch` says otherwise."""
        return self.price.cost(self.usage, self.batch_run if batch is None else batch)

    def line_items(self) -> dict[str, float]:
        counts = _tokens(self.usage)
        share = 1.0 - self.price.batch_discount if self.batch_run else 1.0
        return {k: counts[k] * _rate(self.price, k) * share / PER_MILLION for k in TOKEN_KINDS}

    def without_caching(self) -> float:
        """Every prompt token billed as plain input: the same requests with no prompt cache."""
        u = self.usage
        plain = Usage(input_tokens=u.prompt_tokens, output_tokens=u.output_tokens)
        return self.price.cost(plain, self.batch_run)

    def batch(self) -> float | None:
        """With the provider's Batch API discount on every line item; None where there is none."""
        return self.dollars(batch=True) if self.price.batch_discount > 0 else None

    def per_million_document_tokens(self) -> float | None:
        tokens = self.document_tokens
        return self.dollars() * PER_MILLION / tokens if tokens else None

    def largest(self, n: int = 10) -> list[DocumentCost]:
        return sorted((d for d in self.documents if d.chunks), key=lambda d: -d.dollars)[:n]

    def to_json(self, top: int = 10) -> dict[str, Any]:
        per_million = self.per_million_document_tokens()
        batch = self.batch()
        return {
            "model": self.model,
            "provider": self.provider,
            "token_count": {
                "encoding": self.encoding,
                "exact": self.tokens_exact,
                "note": self.token_note,
            },
            "min_cacheable_tokens": self.min_cacheable_tokens,
            "documents": self.documents_to_send,
            "documents_unchanged": self.documents_unchanged,
            "uncached_documents": sum(1 for d in self.documents if d.chunks and not d.cached),
            "chunks": self.chunks,
            "chunks_answered": self.chunks_answered,
            "chunks_deduplicated": self.chunks_deduplicated,
            "requests": self.requests,
            "prefixes": self.prefixes,
            "cached_prefixes": self.cached_prefixes,
            "tokens": {
                **_tokens(self.usage),
                "document": self.document_tokens,
                "embedding": self.embedding_tokens,
            },
            "dollars": {
                **{k: round(v, 6) for k, v in self.line_items().items()},
                "embedding": self.embedding_dollars,
                "total": round(self.dollars(), 6),
                "total_without_caching": round(self.without_caching(), 6),
                "total_batch": None if batch is None else round(batch, 6),
                "per_million_document_tokens": None
                if per_million is None
                else round(per_million, 4),
            },
            "mode": "batch" if self.batch_run else "standard",
            "prices_per_million": {k: _rate(self.price, k) for k in TOKEN_KINDS},
            "batch_discount": self.price.batch_discount,
            "largest_documents": [d.to_json() for d in self.largest(top)],
        }


@dataclass(slots=True)
class Estimate:
    output_tokens: int
    output_source: str
    embedder: str
    prices_read: str
    files_seen: int = 0
    documents: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    models: list[ModelEstimate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plain: PlainRun | None = None  # no model priced: the run without an LLM

    def to_json(self) -> dict[str, Any]:
        return {
            "files_seen": self.files_seen,
            "documents": self.documents,
            "skipped": len(self.skipped),
            "failed": [{"path": path, "reason": reason} for path, reason in self.failed],
            "assumptions": {
                "output_tokens_per_context": self.output_tokens,
                "source": self.output_source,
            },
            "embedder": self.embedder,
            "prices_read": self.prices_read,
            "models": [m.to_json() for m in self.models],
            "run_without_llm": None if self.plain is None else self.plain.to_json(),
            "notes": self.notes,
        }


def _rate(price: ModelPrice, kind: str) -> float:
    rate = getattr(price, kind)
    return price.cache_write if rate is None else float(rate)  # no 1-hour TTL: 5-minute rate


def _tokens(usage: Usage) -> dict[str, int]:
    return {
        "input": usage.input_tokens,
        "cache_write": usage.cache_write_tokens,
        "cache_write_1h": usage.cache_write_1h_tokens,
        "cache_read": usage.cache_read_tokens,
        "output": usage.output_tokens,
    }


def _money(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def render(estimate: Estimate, console: Console, top: int = 5) -> None:
    """One table, a column per model; then the costliest documents; then the assumptions.
    With no model priced, the run without an LLM instead."""
    models = estimate.models
    if not models:
        _render_plain(estimate, console)
        return
    table = Table(title="ctxr estimate (no model was called)")
    table.add_column("")
    for m in models:
        table.add_column(m.model, justify="right")
    rows: list[tuple[str, list[str]]] = [
        ("provider", [m.provider for m in models]),
        ("tokens counted", [m.token_note for m in models]),
        ("documents to do", [f"{m.documents_to_send:,}" for m in models]),
        ("  unchanged (free)", [f"{m.documents_unchanged:,}" for m in models]),
        ("chunks", [f"{m.chunks:,}" for m in models]),
        ("  answered in cache", [f"{m.chunks_answered:,}" for m in models]),
        ("requests", [f"{m.requests:,}" for m in models]),
        (
            "cached prefixes",
            [
                f"{m.cached_prefixes:,}/{m.prefixes:,} (min {m.min_cacheable_tokens:,})"
                for m in models
            ],
        ),
    ]
    for kind in TOKEN_KINDS:
        label = _LABELS[kind] + (" (assumed)" if kind == "output" else "")
        cells = []
        for m in models:
            count = _tokens(m.usage)[kind]
            cells.append(f"{count:,} tok  {_money(m.line_items()[kind])}")
        rows.append((label, cells))
    rows += [
        (
            "embedding",
            [f"{m.embedding_tokens:,} tok  {_money(m.embedding_dollars)}" for m in models],
        ),
        (
            "total with caching" + (" (batch)" if any(m.batch_run for m in models) else ""),
            [_money(m.dollars()) for m in models],
        ),
        ("total without caching", [_money(m.without_caching()) for m in models]),
        ("total with batch API", [_money(m.batch()) for m in models]),
        ("document tokens", [f"{m.document_tokens:,}" for m in models]),
        ("$ per M document tokens", [_money(m.per_million_document_tokens()) for m in models]),
    ]
    for label, cells in rows:
        table.add_row(label, *cells)
    console.print(table)
    if models and models[0].largest(top):
        first = models[0]
        costly = Table(title=f"costliest documents (by {first.model})")
        costly.add_column("document")
        costly.add_column("requests", justify="right")
        costly.add_column("cached")
        for m in models:
            costly.add_column(m.model, justify="right")
        costs = [{d.source: d.dollars for d in m.documents} for m in models]
        for doc in first.largest(top):
            dollars = [_money(c.get(doc.source)) for c in costs]
            costly.add_row(doc.source, str(doc.requests), "yes" if doc.cached else "no", *dollars)
        console.print(costly)
    _footer(
        estimate,
        console,
        f"output: {estimate.output_tokens} tokens per context, {estimate.output_source}; "
        f"embedder {estimate.embedder}; prices read {estimate.prices_read}.",
    )


def _render_plain(estimate: Estimate, console: Console) -> None:
    run = estimate.plain
    table = Table(title="ctxr estimate (no model was called)", show_header=False)
    if run is not None:
        table.add_row("contexts", f"{run.context} (no LLM): $0")
        table.add_row("documents to do", f"{run.documents:,}")
        table.add_row("  unchanged (free)", f"{run.documents_unchanged:,}")
        table.add_row("chunks", f"{run.chunks:,}")
        table.add_row("embedding", f"{run.embedding_tokens:,} tok  {_money(run.embedding_dollars)}")
    console.print(table)
    _footer(estimate, console, f"embedder {estimate.embedder}.")


def _footer(estimate: Estimate, console: Console, settings_said: str) -> None:
    """What every estimate ends with: the documents and files, the skips, the notes."""
    console.print(
        f"{estimate.documents} documents from {estimate.files_seen} files "
        f"({len(estimate.skipped)} skipped, {len(estimate.failed)} failed to load); "
        + settings_said,
        highlight=False,
    )
    if estimate.skipped:
        console.print(summarize_skips(s.reason for s in estimate.skipped), highlight=False)
    for note in estimate.notes:
        console.print(f"note: {note}", highlight=False)
