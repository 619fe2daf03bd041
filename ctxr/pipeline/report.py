"""What an indexing run reports: counts, skips, failures, notices, the LLM ledger's summary, and
where the time went (`stage_seconds`: open, load, split, contexts, embed, write, check)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from ctxr.enrich.load.walk import Skipped
from ctxr.enrich.situate.ledger import LedgerSummary

# The stages of a run, in order: opening the index (and loading the embedder), walking and
# loading files, splitting, writing contexts, embedding, writing points (BM25 terms, upserts,
# flushes, the manifest), building HNSW (large indexes only) and reading the points back.
STAGES = ("open", "load", "split", "contexts", "embed", "write", "optimize", "check")


@dataclass(slots=True)
class IndexReport:
    index_dir: str
    context_kind: str
    executor: str = "local"  # where splitting and embedding ran (`ctxr.pipeline.executors`)
    # Points the executor's workers embedded and wrote to the store themselves (Ray actors to
    # a Qdrant server); the driver wrote the rest.
    points_written_by_workers: int = 0
    files_seen: int = 0
    documents_indexed: int = 0
    documents_unchanged: int = 0
    # Of the unchanged: passed over unread, their files' stamps as indexed (`ctxr.file_stamp`).
    documents_unread: int = 0
    documents_removed: int = 0
    chunks_written: int = 0
    chunks_removed: int = 0  # old points deleted: of removed documents and of replaced ones
    chunks_truncated: int = 0
    points_total: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    contexts: LedgerSummary | None = None  # the LLM ledger's summary, when one ran
    seconds: float = 0.0
    interrupted: bool = False  # Ctrl-C: the counts are what was kept (see IndexInterrupted)
    optimize_seconds: float = 0.0  # building HNSW indexes: closed segments, then the last
    segments_closed: int = 0  # segments closed during the run (`CTXR_SEGMENT_POINTS`)
    # Token counts of the chunks written this run, per kind (see `ctxr.pipeline.chunk_sizes`).
    chunk_sizes: dict[str, dict[str, object]] = field(default_factory=dict)
    # Embedder word pieces: of the texts embedded this run, and of their documents, per kind.
    embedded_pieces: dict[str, int] = field(default_factory=dict)
    document_pieces: dict[str, int] = field(default_factory=dict)
    # Wall seconds per stage, in the order the run meets them (see STAGES).
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # Chunks the embedder truncates, per source (see `truncation_notice`).
    truncated_sources: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the time spent in the block to `stage` (a stage may be entered many times)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - started
            self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + spent

    def stages(self) -> dict[str, float]:
        """Seconds per stage, in the run's order (STAGES), only the stages the run met."""
        return {stage: self.stage_seconds[stage] for stage in STAGES if stage in self.stage_seconds}

    def rates(self) -> dict[str, float]:
        """Documents and chunks written per second of the whole run (0 before it ends)."""
        if self.seconds <= 0:
            return {"documents_per_second": 0.0, "chunks_per_second": 0.0}
        return {
            "documents_per_second": round(self.documents_indexed / self.seconds, 2),
            "chunks_per_second": round(self.chunks_written / self.seconds, 2),
        }

    def amplification(self) -> dict[str, float]:
        """Word pieces embedded per word piece of the documents, per kind (1.0: each once)."""
        return {
            kind: round(self.embedded_pieces[kind] / n, 3)
            for kind, n in sorted(self.document_pieces.items())
            if n and kind in self.embedded_pieces
        }

    def to_json(self) -> dict[str, object]:
        body = asdict(self)
        body["amplification"] = self.amplification()
        body["stage_seconds"] = {k: round(v, 3) for k, v in self.stages().items()}
        body.update(self.rates())
        body["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        body["failed"] = [{"path": path, "reason": reason} for path, reason in self.failed]
        return body


class IndexInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run, with what the run kept: `report` counts what was written (flushed
    and in the manifest) and, under `contexts`, the LLM contexts paid for and cached so far.

    A KeyboardInterrupt still, so a caller that does not know it stops as before."""

    def __init__(self, report: IndexReport) -> None:
        super().__init__("indexing interrupted")
        self.report = report
