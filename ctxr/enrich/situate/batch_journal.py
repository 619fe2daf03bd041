"""The batch journal: which batches a run submitted, so that a killed run pays for none twice.

One JSON file per batch under `<index>/batches/`, written (atomically) the moment the provider
gives the batch its id, and again with every outcome once the batch has ended. A run started
again loads the journal of its provider and model: requests still in a submitted batch wait for
that batch instead of being sent again, and answers an ended batch holds are used as they are.
Custom ids come from the request bodies (`ctxr.llm.batch.custom_id_for`), so the same request
in a later run finds its batch. A run that finishes removes the ended batches' files: their
answers are in the response cache by then. A damaged file is moved aside, named, and its batch
is not resumed (its requests may be paid again: the note says so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxr.atomic_write import write_atomically
from ctxr.llm.base import Completion, Usage
from ctxr.llm.batch import BatchOutcome, BatchRequestError

JOURNAL_DIR = "batches"
_USAGE_FIELDS = (
    "input_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "output_tokens",
    "cache_write_1h_tokens",
)


@dataclass
class JournalBatch:
    batch_id: str
    provider: str
    model: str
    documents: dict[str, str]  # custom id -> document id (for the ledger)
    submitted_at: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds")
    )
    ended: bool = False
    outcomes: dict[str, BatchOutcome] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "provider": self.provider,
            "model": self.model,
            "submitted_at": self.submitted_at,
            "ended": self.ended,
            "documents": self.documents,
            "outcomes": {cid: _outcome_json(o) for cid, o in self.outcomes.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JournalBatch:
        outcomes = {str(cid): _outcome(raw) for cid, raw in dict(data["outcomes"]).items()}
        return cls(
            batch_id=str(data["batch_id"]),
            provider=str(data["provider"]),
            model=str(data["model"]),
            documents={str(k): str(v) for k, v in dict(data["documents"]).items()},
            submitted_at=str(data["submitted_at"]),
            ended=bool(data["ended"]),
            outcomes=outcomes,
        )


def _outcome_json(outcome: BatchOutcome) -> dict[str, Any]:
    if isinstance(outcome, Completion):
        usage = {name: getattr(outcome.usage, name) for name in _USAGE_FIELDS}
        return {"text": outcome.text, "model": outcome.model, "usage": usage}
    kind = outcome.kind if isinstance(outcome, BatchRequestError) else "errored"
    return {"error": str(outcome), "kind": kind, "retryable": outcome.retryable}


def _outcome(raw: Mapping[str, Any]) -> BatchOutcome:
    if "error" in raw:
        kind, retryable = str(raw.get("kind", "errored")), bool(raw["retryable"])
        return BatchRequestError(str(raw["error"]), kind=kind, retryable=retryable)
    usage = Usage(**{name: int(raw["usage"].get(name, 0)) for name in _USAGE_FIELDS})
    return Completion(str(raw["text"]), usage, str(raw["model"]))


class BatchJournal:
    """The journal of one provider and model; `directory=None` keeps nothing (a run without an
    index directory, such as an evaluation)."""

    def __init__(
        self,
        directory: Path | None,
        provider: str,
        model: str,
        note: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.directory, self.provider, self.model, self._note = directory, provider, model, note

    def load(self) -> list[JournalBatch]:
        """This provider and model's batches, oldest first."""
        if self.directory is None or not self.directory.is_dir():
            return []
        batches = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                batch = JournalBatch.from_json(json.loads(path.read_text("utf-8")))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                self._set_aside(path, exc)
                continue
            if (batch.provider, batch.model) == (self.provider, self.model):
                batches.append(batch)
        return sorted(batches, key=lambda b: b.submitted_at)

    def record(self, batch: JournalBatch) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        write_atomically(
            self._path(batch.batch_id), json.dumps(batch.to_json(), ensure_ascii=False) + "\n"
        )

    def forget(self, batch_id: str) -> None:
        if self.directory is not None:
            self._path(batch_id).unlink(missing_ok=True)

    def _path(self, batch_id: str) -> Path:
        assert self.directory is not None
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in batch_id)
        return self.directory / f"{safe}.json"

    def _set_aside(self, path: Path, exc: BaseException) -> None:
        aside = path.with_name(path.name + ".damaged")
        try:
            os.replace(path, aside)
        except OSError:
            aside = path
        self._note(
            f"batch journal {path} is unreadable ({type(exc).__name__}); kept as {aside}. Its "
            "batch is not collected: requests it held are asked again (and paid again)"
        )
