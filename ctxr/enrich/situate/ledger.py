"""The usage ledger of one context run: what was asked, what it cost, what went wrong.

Counted per run: requests sent (`sent`) and answered (`requests`: a refusal, a timeout or a
dropped connection is no answer), retries, failures (chunk id and error), flagged chunks,
response-cache hits, every token kind, and per document the cache-write and cache-read tokens
and how many responses wrote the provider cache (the goal is one per cached prefix). Dollars
come from a `cost(usage)` callable (the pricing table), when one is given. The queue writes the
ledger as JSON in a `finally`, so a run that is interrupted still leaves its account behind.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ctxr.atomic_write import write_atomically
from ctxr.disk import refusal, storage_error
from ctxr.llm.base import Usage

LEDGER_DIR = "ledgers"


def ledger_path(index_dir: str | Path, when: datetime | None = None) -> Path:
    """Where a run's ledger goes: `<index>/ledgers/contexts-<UTC time>.json`."""
    moment = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return Path(index_dir) / LEDGER_DIR / f"contexts-{moment}.json"


def _usage_json(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cache_write_1h_tokens": usage.cache_write_1h_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }


def cache_read_share(usage: Usage) -> float:
    """Share of prompt tokens read from the provider cache."""
    prompt = usage.prompt_tokens
    return usage.cache_read_tokens / prompt if prompt else 0.0


@dataclass
class BatchTally:
    """A batch run's account (`ctxr index --batch`): batches and how their requests ended."""

    submitted: int = 0  # batches submitted by this run
    resumed: int = 0  # batches an earlier, interrupted run submitted, collected by this one
    ended: int = 0
    succeeded: int = 0
    errored: int = 0  # retried in a later batch where the error allows it
    expired: int = 0  # retried in a later batch
    canceled: int = 0  # reported, not retried: someone canceled the batch
    reused: int = 0  # answers an earlier run collected and journaled, used again at no cost


@dataclass
class DocumentAccount:
    source: str
    chunks: int = 0
    prefixes: int = 0  # cached prefixes: 1, or one per window block
    uncached_prefixes: int = 0  # below the model's minimum: sent without a cache marker
    prefix_tokens: int = 0
    requests: int = 0
    cache_writes: int = 0  # responses that wrote the provider cache
    response_cache_hits: int = 0
    usage: Usage = field(default_factory=Usage)

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "chunks": self.chunks,
            "prefixes": self.prefixes,
            "uncached_prefixes": self.uncached_prefixes,
            "cached": self.uncached_prefixes == 0,
            "prefix_tokens": self.prefix_tokens,
            "requests": self.requests,
            "cache_writes": self.cache_writes,
            "response_cache_hits": self.response_cache_hits,
            **_usage_json(self.usage),
        }


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """A run's LLM account on one screen: what `ctxr index --json` prints under "contexts"."""

    provider: str
    model: str
    prompt_version: str
    started_at: str | None
    wall_seconds: float
    interrupted: bool
    documents: int
    uncached_documents: int  # documents with a prefix below the model's cacheable minimum
    prefixes: int
    cache_writes: int
    requests: int
    retries: int
    failures: int
    flagged: int
    response_cache_hits: int
    input_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    cache_read_tokens: int
    output_tokens: int
    cache_read_share: float
    dollars: float | None
    batch: BatchTally | None = None  # None: requests were sent one by one
    sent: int = 0  # requests sent, answered or not (`requests` counts the answered ones)
    contexts: int = 0  # LLM contexts accepted in this run (cache hits not counted)
    server: str | None = None  # where the model was asked (a base URL), when known
    first_flag: str | None = None  # what was wrong with the first answer that was no context

    @property
    def unusable(self) -> bool:
        """At least as many chunks got answers that were no context as got contexts (from
        this run's answers or the response cache): the model or server is not writing
        contexts, and the run is a failure (`ctxr index` exits 1). A few rejected answers
        among many good ones are not: those chunks are asked again by the next run, which
        then also finds their documents' other contexts in the response cache."""
        return self.flagged > 0 and self.flagged >= self.contexts + self.response_cache_hits

    def unusable_notice(self) -> str:
        """Why the run failed, naming the model and server and what came back."""
        where = f"{self.provider} {self.model}" + (f" at {self.server}" if self.server else "")
        what = f" (first: {self.first_flag})" if self.first_flag else ""
        return (
            f"{where} answered {self.flagged} of the {self.flagged + self.contexts} chunks "
            f"asked with no context{what}; outline contexts are used and nothing was cached: "
            "check the model and server (CTXR_LLM_MODEL, *_BASE_URL); the next run asks again"
        )

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class Ledger:
    def __init__(
        self,
        path: str | Path | None = None,
        *,
        cost: Callable[[Usage], float] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._cost = cost
        self._clock = clock
        self._t0: float | None = None
        self._t1: float | None = None
        self.started_at: str | None = None
        self.provider = self.model = self.prompt_version = ""
        self.requests = 0  # answered
        self.sent = 0  # sent, answered or not
        self.retries: list[tuple[str, str]] = []
        self.failures: list[tuple[str, str]] = []
        self.flagged: list[tuple[str, str]] = []
        self.flag_details: list[str] = []  # what was wrong with each flagged answer
        self.contexts = 0  # LLM contexts accepted in this run (cache hits not counted)
        self.server: str | None = None
        self.response_cache_hits = 0
        self.usage = Usage()
        self.documents: dict[str, DocumentAccount] = {}
        self.interrupted = False
        self.batch: BatchTally | None = None

    # -- recording -------------------------------------------------------------------------

    def begin(
        self, provider: str, model: str, prompt_version: str, server: str | None = None
    ) -> None:
        self.provider, self.model, self.prompt_version = provider, model, prompt_version
        self.server = server
        if self._t0 is None:  # a run situating several windows begins once: its clock runs on
            self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
            self._t0 = self._clock()
        self._t1 = None
        # Until `finish` says otherwise: a snapshot written mid-run, the last one a killed run
        # leaves behind, reads as interrupted.
        self.interrupted = True

    def finish(self, *, interrupted: bool = False) -> None:
        self._t1 = self._clock()
        self.interrupted = interrupted

    def document(self, doc_id: str, source: str = "") -> DocumentAccount:
        account = self.documents.get(doc_id)
        if account is None:
            account = self.documents[doc_id] = DocumentAccount(source or doc_id)
        return account

    def add_prefix(
        self, doc_id: str, source: str, *, chunks: int, tokens: int, cached: bool
    ) -> None:
        account = self.document(doc_id, source)
        account.chunks += chunks
        account.prefixes += 1
        account.prefix_tokens += tokens
        if not cached:
            account.uncached_prefixes += 1

    def record_sent(self, doc_id: str) -> None:
        """A request went out; `record_request` follows if it is answered."""
        self.sent += 1

    def record_request(self, doc_id: str) -> None:
        """A request was answered (what a provider bills)."""
        self.requests += 1
        self.document(doc_id).requests += 1

    def record_usage(self, doc_id: str, usage: Usage) -> None:
        self.usage = self.usage + usage
        account = self.document(doc_id)
        account.usage = account.usage + usage
        if usage.cache_write_tokens > 0 or usage.cache_write_1h_tokens > 0:
            account.cache_writes += 1

    def record_retry(self, chunk_id: str, error: str) -> None:
        self.retries.append((chunk_id, error))

    def record_failure(self, chunk_id: str, error: str) -> None:
        self.failures.append((chunk_id, error))

    def record_flag(self, chunk_id: str, reason: str, detail: str = "") -> None:
        """An answer that was no context, twice: the chunk got its outline instead."""
        self.flagged.append((chunk_id, reason))
        self.flag_details.append(f"{reason}: {detail}" if detail else reason)

    def record_context(self) -> None:
        """A chunk got an LLM context from an answer of this run."""
        self.contexts += 1

    def record_response_cache_hit(self, doc_id: str) -> None:
        self.response_cache_hits += 1
        self.document(doc_id).response_cache_hits += 1

    # -- reading ---------------------------------------------------------------------------

    @property
    def dollars(self) -> float | None:
        return None if self._cost is None else self._cost(self.usage)

    @property
    def wall_seconds(self) -> float:
        if self._t0 is None:
            return 0.0
        return (self._t1 if self._t1 is not None else self._clock()) - self._t0

    def progress_line(self, documents_done: int, documents: int, chunks_done: int) -> str:
        """One line for `Progress.note`: documents, chunks, cache-read share, dollars so far."""
        line = (
            f"contexts: {documents_done}/{documents} documents, {chunks_done} chunks, "
            f"{self.requests} requests, cache reads {cache_read_share(self.usage):.0%} "
            "of prompt tokens"
        )
        if (b := self.batch) is not None:
            running = b.submitted + b.resumed - b.ended
            line += (
                f"; batches: {b.submitted + b.resumed} submitted, {running} in progress, "
                f"{b.ended} ended"
            )
        dollars = self.dollars
        return line if dollars is None else f"{line}, ${dollars:.4f}"

    def summary(self) -> LedgerSummary:
        docs = self.documents.values()
        return LedgerSummary(
            provider=self.provider,
            model=self.model,
            prompt_version=self.prompt_version,
            started_at=self.started_at,
            wall_seconds=round(self.wall_seconds, 3),
            interrupted=self.interrupted,
            documents=len(self.documents),
            uncached_documents=sum(1 for d in docs if d.uncached_prefixes),
            prefixes=sum(d.prefixes for d in docs),
            cache_writes=sum(d.cache_writes for d in docs),
            requests=self.requests,
            retries=len(self.retries),
            failures=len(self.failures),
            flagged=len(self.flagged),
            response_cache_hits=self.response_cache_hits,
            input_tokens=self.usage.input_tokens,
            cache_write_tokens=self.usage.cache_write_tokens,
            cache_write_1h_tokens=self.usage.cache_write_1h_tokens,
            cache_read_tokens=self.usage.cache_read_tokens,
            output_tokens=self.usage.output_tokens,
            cache_read_share=round(cache_read_share(self.usage), 4),
            dollars=self.dollars,
            batch=None if self.batch is None else dataclasses.replace(self.batch),
            sent=self.sent,
            contexts=self.contexts,
            server=self.server,
            first_flag=self.flag_details[0] if self.flag_details else None,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "summary": self.summary().to_json(),
            "failures": [{"chunk_id": c, "error": e} for c, e in self.failures],
            "flagged": [{"chunk_id": c, "reason": r} for c, r in self.flagged],
            "retries": [{"chunk_id": c, "error": e} for c, e in self.retries],
            "documents": {doc_id: d.to_json() for doc_id, d in self.documents.items()},
        }

    def write(self, path: str | Path | None = None) -> Path | None:
        """Write the ledger atomically (temp file, then rename); None when it has no path."""
        target = Path(path) if path is not None else self.path
        if target is None:
            return None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(
                target, json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"
            )
        except OSError as exc:
            # A disk that refuses the ledger is named as such; the old ledger stands and the
            # answers are in the response cache already, so nothing paid for is lost.
            kind = refusal(exc)
            if kind is None:
                raise
            raise storage_error(target, "LLM ledger", kind, detail=str(exc)) from exc
        return target
