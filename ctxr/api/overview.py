"""`GET /overview`: how the served index was built, from what the index directory records.

The page at `/` shows it; any client may read it. It gathers three records, none of them
written for it:

- the points themselves (`Store.payload_fields`: kind, languages, context kind and token count
  of every chunk, no text, no vectors): documents and chunks by kind and language, contexts by
  kind, and the distribution of chunk sizes as a histogram;
- the runs' reports (`ctxr.pipeline.reports`): what the latest run skipped and why, what
  failed, its notices, and the recent runs;
- the LLM ledgers (`<index>/ledgers/contexts-*.json`, `ctxr.enrich.situate.ledger`): requests,
  tokens by kind, dollars and the share of prompt tokens read from the provider cache, per
  run and in all.

Reading every point costs a scroll of the whole index, so the answer is kept until the index
changes (its manifest, reports or ledgers): one scroll per version of the index, not per view.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from ctxr.api.holder import ServiceHolder
from ctxr.api.models import ErrorResponse
from ctxr.enrich.situate.ledger import LEDGER_DIR
from ctxr.pipeline.chunk_sizes import summary
from ctxr.pipeline.reports import REPORTS_DIR, recent_reports
from ctxr.retrieve.service import SearchService

PATH = "/overview"
RUNS_SHOWN = 10  # recent runs listed; the totals count every ledger kept
MAX_BINS = 24
_FIELDS = ("doc_id", "kind", "language", "natural_language", "context_kind", "token_count")
_TOKEN_KINDS = ("input", "cache_write", "cache_write_1h", "cache_read", "output")


class Group(BaseModel):
    name: str = Field(description='a kind, a language or a context kind; "unknown" when unset')
    documents: int
    chunks: int
    tokens: int = Field(description="tokens of the chunks' own text (prefix and context apart)")


class SizeBin(BaseModel):
    low: int = Field(description="tokens, inclusive")
    high: int = Field(description="tokens, exclusive")
    chunks: int


class ChunkSizes(BaseModel):
    chunks: int
    min: int
    p10: float
    median: float
    p90: float
    max: int
    mean: float
    bins: list[SizeBin] = Field(description="the histogram: equal widths from 0 to the maximum")


class Passed(BaseModel):
    path: str
    reason: str


class Run(BaseModel):
    finished_at: str | None
    context_kind: str | None
    files_seen: int
    documents_indexed: int
    documents_unchanged: int
    documents_removed: int
    chunks_written: int
    chunks_removed: int
    skipped: int
    failed: int
    seconds: float
    interrupted: bool


class LastRun(Run):
    skipped_files: list[Passed] = Field(description="files the run passed over, and why")
    failed_files: list[Passed] = Field(description="files that failed to load or split")
    notices: list[str]


class Tokens(BaseModel):
    input: int = Field(description="prompt tokens neither written to nor read from the cache")
    cache_write: int = Field(description="prompt tokens written to the provider cache (5 min)")
    cache_write_1h: int = Field(description="prompt tokens written to the cache for 1 hour")
    cache_read: int = Field(description="prompt tokens read from the provider cache")
    output: int


class LedgerRun(BaseModel):
    started_at: str | None
    provider: str
    model: str
    requests: int
    tokens: Tokens
    cache_read_share: float = Field(description="cache-read tokens over all prompt tokens")
    dollars: float | None = Field(description="null where the model has no price")
    seconds: float
    batch: bool = Field(description="sent through the provider's batch API")
    failures: int
    interrupted: bool


class LedgerTotals(BaseModel):
    runs: int
    requests: int
    tokens: Tokens
    cache_read_share: float
    dollars: float = Field(description="the priced runs' dollars")
    unpriced_runs: int = Field(description="runs whose model has no price (not in `dollars`)")


class OverviewResponse(BaseModel):
    documents: int
    chunks: int
    tokens: int = Field(description="tokens of all chunks' own text")
    created_at: str
    updated_at: str
    settings: dict[str, Any] = Field(description="what the stored vectors were made with")
    kinds: list[Group] = Field(description="by document kind (markdown, code, text, pdf, ...)")
    languages: list[Group] = Field(description="code documents by programming language")
    natural_languages: list[Group] = Field(description="prose documents by detected language")
    contexts: list[Group] = Field(description="chunks by context kind (llm, outline, ...)")
    sizes: ChunkSizes | None = Field(description="chunk sizes in tokens; null when empty")
    last_run: LastRun | None = Field(description="the newest report the index keeps")
    runs: list[Run] = Field(description=f"the newest {RUNS_SHOWN} runs, newest first")
    llm: LedgerTotals = Field(description="every LLM ledger the index keeps, summed")
    llm_runs: list[LedgerRun] = Field(description=f"the newest {RUNS_SHOWN}, newest first")


class _Kept:
    """The last answer, and what the index looked like when it was made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple[Any, ...] | None = None
        self.answer: OverviewResponse | None = None


def add_overview_route(app: FastAPI, holder: ServiceHolder) -> None:
    kept = _Kept()

    @app.get(
        PATH,
        responses={503: {"model": ErrorResponse, "description": "the index cannot be used"}},
    )
    async def overview() -> OverviewResponse:
        """How the index was built: documents and chunks by kind and language, chunk sizes,
        what the last run skipped and why, and the LLM ledger of the runs that built it."""
        return await run_in_threadpool(_answer, holder, kept)


def _answer(holder: ServiceHolder, kept: _Kept) -> OverviewResponse:
    with holder.lease() as service, kept.lock:
        key = (id(service), *_version(service))
        if kept.key != key or kept.answer is None:
            kept.answer, kept.key = index_overview(service), key
        return kept.answer


def _version(service: SearchService) -> tuple[Any, ...]:
    """What changes when the overview would: the manifest, the reports, the ledgers."""
    manifest = service.manifest
    marks: list[Any] = [manifest.updated_at, len(manifest.documents)]
    for name in (REPORTS_DIR, LEDGER_DIR):
        try:
            marks.append((service.index_dir / name).stat().st_mtime_ns)
        except OSError:
            marks.append(None)
    return tuple(marks)


def index_overview(service: SearchService) -> OverviewResponse:
    """The overview of the index `service` serves (reads every point's payload fields)."""
    points = [row for page in service.store.payload_fields(_FIELDS) for row in page]
    manifest = service.manifest
    sizes = [int(p.get("token_count") or 0) for p in points]
    non_code = [p for p in points if p.get("kind") != "code"]
    reports = recent_reports(service.index_dir, RUNS_SHOWN)
    ledgers = _ledgers(service.index_dir)
    return OverviewResponse(
        documents=len({p.get("doc_id") for p in points}),
        chunks=len(points),
        tokens=sum(sizes),
        created_at=manifest.created_at,
        updated_at=manifest.updated_at,
        settings=asdict(manifest.settings),
        kinds=_groups(points, "kind"),
        languages=_groups([p for p in points if p.get("kind") == "code"], "language"),
        natural_languages=_groups(non_code, "natural_language"),
        contexts=_groups(points, "context_kind"),
        sizes=_sizes(sizes),
        last_run=_last_run(reports[0]) if reports else None,
        runs=[_run(r) for r in reports],
        llm=_totals(ledgers),
        llm_runs=[_ledger_run(s) for s in ledgers[:RUNS_SHOWN]],
    )


def _groups(points: Iterable[dict[str, Any]], key: str) -> list[Group]:
    """Documents, chunks and tokens per value of `key`, most chunks first."""
    documents: dict[str, set[Any]] = {}
    chunks: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    for point in points:
        name = str(point.get(key) or "unknown")
        documents.setdefault(name, set()).add(point.get("doc_id"))
        chunks[name] += 1
        tokens[name] += int(point.get("token_count") or 0)
    return [
        Group(name=name, documents=len(documents[name]), chunks=count, tokens=tokens[name])
        for name, count in sorted(chunks.items(), key=lambda item: (-item[1], item[0]))
    ]


def _sizes(tokens: list[int]) -> ChunkSizes | None:
    if not tokens:
        return None
    stats = summary(tokens)
    width = _bin_width(max(tokens) + 1)
    counts = Counter(t // width for t in tokens)
    bins = [
        SizeBin(low=i * width, high=(i + 1) * width, chunks=counts.get(i, 0))
        for i in range(max(counts) + 1)
    ]
    return ChunkSizes.model_validate({**stats, "bins": bins})


def _bin_width(span: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that cuts `span` into at most `MAX_BINS` bins."""
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if math.ceil(span / (step * magnitude)) <= MAX_BINS:
                return step * magnitude
        magnitude *= 10


def _count(value: Any) -> int:
    return len(value) if isinstance(value, list) else int(value or 0)


def _run(report: dict[str, Any]) -> Run:
    return Run(
        finished_at=report.get("finished_at"),
        context_kind=report.get("context_kind"),
        skipped=_count(report.get("skipped")),
        failed=_count(report.get("failed")),
        seconds=round(float(report.get("seconds") or 0.0), 2),
        interrupted=bool(report.get("interrupted")),
        **{key: int(report.get(key) or 0) for key in (
            "files_seen", "documents_indexed", "documents_unchanged", "documents_removed",
            "chunks_written", "chunks_removed")},
    )  # fmt: skip


def _passed(entries: Any) -> list[Passed]:
    return [
        Passed(path=str(e.get("path", "")), reason=str(e.get("reason", "")))
        for e in (entries if isinstance(entries, list) else [])
        if isinstance(e, dict)
    ]


def _last_run(report: dict[str, Any]) -> LastRun:
    notices = report.get("notices")
    return LastRun(
        **_run(report).model_dump(),
        skipped_files=_passed(report.get("skipped")),
        failed_files=_passed(report.get("failed")),
        notices=[str(n) for n in notices] if isinstance(notices, list) else [],
    )


def _ledgers(index_dir: Path) -> list[dict[str, Any]]:
    """Every kept ledger's summary, newest first (names sort by time); unreadable ones passed
    over (a run still writing its ledger renames it into place, so none is half-written)."""
    found = []
    for path in sorted((index_dir / LEDGER_DIR).glob("contexts-*.json"), reverse=True):
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(body, dict) and isinstance(body.get("summary"), dict):
            found.append(body["summary"])
    return found


def _tokens(summaries: Iterable[dict[str, Any]]) -> Tokens:
    rows = list(summaries)
    return Tokens(**{k: sum(int(s.get(f"{k}_tokens") or 0) for s in rows) for k in _TOKEN_KINDS})


def _share(tokens: Tokens) -> float:
    prompt = tokens.input + tokens.cache_write + tokens.cache_write_1h + tokens.cache_read
    return round(tokens.cache_read / prompt, 4) if prompt else 0.0


def _ledger_run(s: dict[str, Any]) -> LedgerRun:
    tokens = _tokens([s])
    dollars = s.get("dollars")
    return LedgerRun(
        started_at=s.get("started_at"),
        provider=str(s.get("provider") or ""),
        model=str(s.get("model") or ""),
        requests=int(s.get("requests") or 0),
        tokens=tokens,
        cache_read_share=_share(tokens),
        dollars=None if dollars is None else float(dollars),
        seconds=round(float(s.get("wall_seconds") or 0.0), 2),
        batch=s.get("batch") is not None,
        failures=int(s.get("failures") or 0),
        interrupted=bool(s.get("interrupted")),
    )


def _totals(summaries: list[dict[str, Any]]) -> LedgerTotals:
    tokens = _tokens(summaries)
    priced = [float(s["dollars"]) for s in summaries if s.get("dollars") is not None]
    return LedgerTotals(
        runs=len(summaries),
        requests=sum(int(s.get("requests") or 0) for s in summaries),
        tokens=tokens,
        cache_read_share=_share(tokens),
        dollars=round(sum(priced), 6),
        unpriced_runs=len(summaries) - len(priced),
    )
