"""What an indexing run reports: counts, skips, failures, notices and the LLM ledger's summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ctxr.enrich.load.walk import Skipped
from ctxr.enrich.situate.ledger import LedgerSummary


@dataclass(slots=True)
class IndexReport:
    index_dir: str
    context_kind: str
    files_seen: int = 0
    documents_indexed: int = 0
    documents_unchanged: int = 0
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
    optimize_seconds: float = 0.0  # building the HNSW index after the run (0 when skipped)
    # Token counts of the chunks written this run, per kind (see `ctxr.pipeline.chunk_sizes`).
    chunk_sizes: dict[str, dict[str, object]] = field(default_factory=dict)
    # Embedder word pieces: of the texts embedded this run, and of their documents, per kind.
    embedded_pieces: dict[str, int] = field(default_factory=dict)
    document_pieces: dict[str, int] = field(default_factory=dict)

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
        body["skipped"] = [{"path": s.path, "reason": s.reason} for s in self.skipped]
        body["failed"] = [{"path": path, "reason": reason} for path, reason in self.failed]
        return body
