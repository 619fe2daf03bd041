"""Sending the situating requests through a provider's Batch API, at half the price.

`BatchSender` has the single-request `Sender`'s `send`, so the queue, its grouping, validation,
fallbacks and response cache are the same in both modes; only the transport differs. Requests
collect while the queue builds them; once none has arrived for a moment, they go out as one
batch (split at the provider's request and byte limits). The queue's order becomes a sequence
of batches: the first holds the first request of every cached document (which writes its cache
entry, with a 1-hour TTL in batch runs) and every uncached document's requests; the next holds
the follow-ups, which read that entry, and any request asked again. Results are matched to
requests by `custom_id`, never by order.

Resumable: each batch is journaled (`batch_journal.py`) the moment it has an id. A run started
again finds its requests' custom ids in the journal and waits for, or reuses, what an earlier
run paid for. An errored or expired request is asked again in a later batch (up to
`max_attempts`); a canceled one is reported and falls back to its outline, flagged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctxr.enrich.situate.batch_journal import BatchJournal, JournalBatch
from ctxr.enrich.situate.ledger import BatchTally, Ledger
from ctxr.enrich.situate.results import describe
from ctxr.enrich.situate.window import Prefix
from ctxr.errors import ConfigError, ProviderError
from ctxr.llm.base import LLM, Completion, CompletionRequest, Usage
from ctxr.llm.batch import (
    BatchItem,
    BatchLLM,
    BatchOutcome,
    BatchRequestError,
    custom_id_for,
    outcome_error,
)
from ctxr.llm.ratelimit import Priority
from ctxr.types import Chunk

# Event-loop turns without a new request before a batch goes out: the queue's tasks have all
# reached their `send` by then (each step between two sends is synchronous work).
SETTLE_TURNS = 5


@dataclass(frozen=True, slots=True)
class BatchOptions:
    journal_dir: Path | None  # <index>/batches; None journals nothing
    poll_seconds: float = 30.0  # between status checks of the batches in progress
    linger_seconds: float = 0.5  # quiet time before the collected requests go out
    max_attempts: int = 3  # batches a request may be in before it falls back
    max_requests: int | None = None  # fewer requests a batch than the provider allows


def batch_llm(llm: LLM) -> BatchLLM:
    """`llm` as a provider with a Batch API, or a `ConfigError` saying what to do instead."""
    if not isinstance(llm, BatchLLM):
        raise ConfigError(
            f"--batch: the {llm.provider} provider ({type(llm).__name__}) has no batch API; "
            "leave --batch (CTXR_LLM_BATCH) out"
        )
    return llm


@dataclass(eq=False)
class _Waiting:
    item: BatchItem
    doc_id: str
    future: asyncio.Future[BatchOutcome]


@dataclass(eq=False)
class _Open:
    journal: JournalBatch
    waiting: dict[str, asyncio.Future[BatchOutcome]] = field(default_factory=dict)


@dataclass(eq=False)
class BatchSender:
    llm: BatchLLM
    ledger: Ledger
    options: BatchOptions
    on_change: Callable[[], None] = lambda: None
    note: Callable[[str], None] = lambda _: None
    _journal: BatchJournal = field(init=False)
    _pending: list[_Waiting] = field(default_factory=list)
    _open: dict[str, _Open] = field(default_factory=dict)  # batch id -> its requests
    _held_by: dict[str, str] = field(default_factory=dict)  # custom id -> open batch id
    _answers: dict[str, BatchOutcome] = field(default_factory=dict)  # ended, not yet asked for
    _asked: Counter[str] = field(default_factory=Counter)
    _pump: asyncio.Task[None] | None = None
    _arrived: float = 0.0

    def __post_init__(self) -> None:
        self.ledger.batch = self.ledger.batch or BatchTally()
        self._journal = BatchJournal(
            self.options.journal_dir, self.llm.provider, self.llm.model, self.note
        )
        for batch in self._journal.load():  # what an earlier run of this index submitted
            if batch.ended:
                self._answers.update(batch.outcomes)
                continue
            self._open[batch.batch_id] = _Open(batch)
            self._held_by.update((cid, batch.batch_id) for cid in batch.documents)
            self.tally.resumed += 1

    @property
    def tally(self) -> BatchTally:
        assert self.ledger.batch is not None
        return self.ledger.batch

    async def send(
        self,
        prefix: Prefix,
        request: CompletionRequest,
        chunk: Chunk,
        priority: Priority,
        tokens_in: int,
    ) -> Completion:
        """`request`'s answer, through as many batches as `max_attempts` allows; raises the
        `ProviderError` of the last attempt. (`priority`, `tokens_in`: unused; a batch has
        no order and its own limits.)"""
        body = self.llm.request_body(request)
        first = custom_id_for(body)
        self._asked[first] += 1  # a validation retry asks the same body again, as a new id
        custom_id = custom_id_for(body, self._asked[first])
        item = BatchItem(custom_id, request)
        outcome: BatchOutcome | None = None
        for attempt in range(self.options.max_attempts):
            outcome = await self._outcome(item, prefix.document.doc_id)
            if isinstance(outcome, Completion):
                return outcome
            if not outcome.retryable or attempt + 1 == self.options.max_attempts:
                break
            self.ledger.record_retry(chunk.chunk_id, describe(outcome))
        assert isinstance(outcome, ProviderError)
        raise outcome

    async def _outcome(self, item: BatchItem, doc_id: str) -> BatchOutcome:
        custom_id = item.custom_id
        if custom_id in self._answers:  # paid, and accounted, when its batch ended
            answer = self._answers.pop(custom_id)
            if isinstance(answer, Completion):
                self.tally.reused += 1
                return dataclasses.replace(answer, usage=Usage())
            return answer
        future: asyncio.Future[BatchOutcome] = asyncio.get_running_loop().create_future()
        batch_id = self._held_by.pop(custom_id, None)
        if batch_id is not None and batch_id in self._open:
            self._open[batch_id].waiting[custom_id] = future
        else:
            self._pending.append(_Waiting(item, doc_id, future))
            self._arrived = time.monotonic()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._pending or self._open:
                if self._pending:
                    await self._settle()
                    await self._submit(self._pending)
                ended = await self._poll() if self._open else False
                if self._open and not ended and not self._pending:
                    await asyncio.sleep(self.options.poll_seconds)
        except Exception as exc:  # a bug or an unforeseen SDK error: fail the waiters, not hang
            why = ProviderError(f"batch run failed: {describe(exc)}", retryable=False)
            for waiting in self._pending:
                waiting.future.set_result(why)
            for open_ in self._open.values():
                for future in open_.waiting.values():
                    if not future.done():
                        future.set_result(why)
            self._pending, self._open = [], {}

    async def _settle(self) -> None:
        quiet = 0
        while quiet < SETTLE_TURNS:
            count = len(self._pending)
            wait = self.options.linger_seconds - (time.monotonic() - self._arrived)
            await asyncio.sleep(max(0.0, wait))
            quiet = quiet + 1 if len(self._pending) == count else 0

    async def _submit(self, pending: list[_Waiting]) -> None:
        self._pending = []
        for part in self._split(pending):
            try:
                batch_id = await self._create(part)
            except ProviderError as exc:
                if exc.status == 404:  # an OpenAI-compatible server without /v1/batches
                    exc = ProviderError(
                        f"{self.llm.provider}: this server has no batch API ({exc}); leave "
                        "--batch (CTXR_LLM_BATCH) out",
                        retryable=False,
                        status=404,
                    )
                for waiting in part:
                    waiting.future.set_result(exc)
                continue
            documents = {w.item.custom_id: w.doc_id for w in part}
            journal = JournalBatch(batch_id, self.llm.provider, self.llm.model, documents)
            self._journal.record(journal)  # before anything else: a kill now loses nothing
            self._open[batch_id] = _Open(journal, {w.item.custom_id: w.future for w in part})
            self.tally.submitted += 1
            for waiting in part:
                self.ledger.record_sent(waiting.doc_id)
            self.on_change()

    def _split(self, pending: Sequence[_Waiting]) -> list[list[_Waiting]]:
        limits = self.llm.batch_limits
        most = min(limits.max_requests, self.options.max_requests or limits.max_requests)
        parts: list[list[_Waiting]] = [[]]
        size = 0
        for waiting in pending:
            n = self.llm.batch_item_bytes(waiting.item)
            full = len(parts[-1]) >= most or size + n > limits.max_bytes
            if parts[-1] and full:
                parts.append([])
                size = 0
            parts[-1].append(waiting)
            size += n
        return [p for p in parts if p]

    async def _create(self, part: list[_Waiting]) -> str:
        for attempt in range(self.options.max_attempts):
            try:
                return await self.llm.submit_batch([w.item for w in part])
            except ProviderError as exc:
                if not exc.retryable or attempt + 1 == self.options.max_attempts:
                    raise
                await asyncio.sleep(max(exc.retry_after or 0.0, min(60.0, 2.0**attempt)))
        raise AssertionError("unreachable")

    async def _poll(self) -> bool:
        """Check every batch in progress; collect those that ended. Whether any did."""
        ended = False
        for batch_id, open_ in list(self._open.items()):
            try:
                status = await self.llm.batch_status(batch_id)
                if not status.ended:
                    continue
                outcomes = await self.llm.batch_results(batch_id)
            except ProviderError as exc:
                if exc.retryable:
                    continue  # ask again at the next poll
                # The provider refuses this batch (unknown id, another account): its
                # requests are asked again in a new batch.
                self.note(f"batch {batch_id} cannot be read ({exc}); its requests are re-sent")
                why = outcome_error(self.llm.provider, "missing", str(exc), retryable=True)
                outcomes = {cid: why for cid in open_.journal.documents}
            self._close(batch_id, open_, outcomes)
            ended = True
        return ended

    def _close(self, batch_id: str, open_: _Open, outcomes: dict[str, BatchOutcome]) -> None:
        journal = open_.journal
        missing = outcome_error(
            self.llm.provider, "missing", "absent from the batch results", retryable=True
        )
        journal.outcomes = {cid: outcomes.get(cid, missing) for cid in journal.documents}
        journal.ended = True
        self._journal.record(journal)
        del self._open[batch_id]
        self.tally.ended += 1
        for custom_id, outcome in journal.outcomes.items():
            self._count(outcome)
            if isinstance(outcome, Completion):
                self.ledger.record_request(journal.documents[custom_id])  # answered
            future = open_.waiting.pop(custom_id, None)
            if future is not None and not future.done():
                future.set_result(outcome)
            elif isinstance(outcome, Completion):  # paid; nobody waits yet: on record now
                self.ledger.record_usage(journal.documents[custom_id], outcome.usage)
                self._answers[custom_id] = dataclasses.replace(outcome, usage=Usage())
            else:
                self._answers[custom_id] = outcome
        self.on_change()

    def _count(self, outcome: BatchOutcome) -> None:
        if isinstance(outcome, Completion):
            self.tally.succeeded += 1
            return
        kind = outcome.kind if isinstance(outcome, BatchRequestError) else "errored"
        if kind in ("expired", "canceled"):
            setattr(self.tally, kind, getattr(self.tally, kind) + 1)
        else:
            self.tally.errored += 1

    async def aclose(self, *, finished: bool) -> None:
        """Stop polling. A finished run removes the ended batches' journal files (their
        answers are in the response cache); an interrupted one keeps all of them."""
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        if finished:
            for batch in self._journal.load():
                if batch.ended:
                    self._journal.forget(batch.batch_id)
