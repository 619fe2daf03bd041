"""The situating queue: every chunk gets its context, each document's prefix is cached once.

Anthropic's reference run wrote the same documents to the prompt cache again and again because
a document's chunks were sent together, before the first cache write had finished. Here, per
cached prefix (a document, or one block of a long document's windows, see `window.py`), the
FIRST unanswered chunk is sent alone and must complete, which writes the provider's cache; only
then are the prefix's other chunks sent, concurrently, and they all read it. Many prefixes are
in flight at once: `concurrency` bounds requests in flight, not documents. A prefix below the
model's minimum cacheable size is sent without a cache marker and its chunks go at once.

Slots are handed out by priority: the follow-ups of a prefix already written go before the
first request of a new one, so a prefix is finished while it is still in the provider's cache
(its TTL is minutes) and few documents are half done at any moment.

Around every request: the response cache (answered chunks are never sent again), the rate
limiter (shared buckets and cooldowns), tenacity retries on retryable `ProviderError`s with
exponential backoff and jitter that waits at least `retry_after`, and validation (a response
that is not a context is retried once). A chunk that still fails gets its outline context,
flagged, and the run goes on. The ledger is written in a `finally`, interrupted or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.outline import outline_context
from ctxr.enrich.situate.prompt import SituateRequest
from ctxr.enrich.situate.response_cache import ResponseCache, cache_key
from ctxr.enrich.situate.validate import DEFAULT_MAX_TOKENS, check_context
from ctxr.enrich.situate.window import Prefix, plan_prefixes
from ctxr.errors import ProviderError
from ctxr.llm.base import LLM, Completion
from ctxr.llm.ratelimit import Priority, PrioritySlots, RateLimiter, RateLimits
from ctxr.progress import NullProgress, Progress
from ctxr.types import Chunk, ContextualChunk, Document

PHASE = "contexts"
# The instruction and chunk framing around the document, for rate-limit estimates only.
PROMPT_OVERHEAD_TOKENS = 100
NOTE_EVERY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SituateResult:
    """A chunk's context. `flagged` says why it is an outline fallback ("empty response", "too
    long", "not a context", "failed: <error>"); `error` holds the detail."""

    chunk_id: str
    context: str
    kind: Literal["llm", "outline"]
    flagged: str | None = None
    error: str | None = None
    from_cache: bool = False  # answered by the response cache, no request sent

    def contextual(self, chunk: Chunk) -> ContextualChunk:
        return ContextualChunk(chunk, self.context, self.kind)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter, in seconds; a `retry_after` is a floor on it."""

    initial: float = 1.0
    maximum: float = 60.0


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ProviderError):
        return f"{exc.status} {exc}" if exc.status else str(exc)
    return f"{type(exc).__name__}: {exc}"


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retryable


@dataclass(eq=False)
class _Run:
    llm: LLM
    cache: ResponseCache | None
    limiter: RateLimiter
    slots: PrioritySlots
    ledger: Ledger
    progress: Progress
    prompt_version: str
    count_tokens: Callable[[str], int]
    max_attempts: int
    backoff: Backoff
    max_context_tokens: int
    sleep: Callable[[float], Awaitable[None]]
    results: dict[str, SituateResult] = field(default_factory=dict)
    readable: set[int] = field(default_factory=set)  # prefixes whose cache write has returned
    left: dict[str, int] = field(default_factory=dict)  # chunks still to do per document
    last_note: float = field(default_factory=time.monotonic)

    def _key(self, document: Document, chunk: Chunk) -> str:
        return cache_key(
            provider=self.llm.provider,
            model=self.llm.model,
            prompt_version=self.prompt_version,
            document_sha256=document.sha256,
            chunk_text=chunk.text,
            heading_path=chunk.heading_path,
        )

    async def run_prefix(self, prefix: Prefix) -> None:
        document = prefix.document
        pending: list[Chunk] = []
        for chunk in prefix.window.chunks:
            hit = self.cache.get(self._key(document, chunk)) if self.cache is not None else None
            if hit is None:
                pending.append(chunk)
                continue
            self.ledger.record_response_cache_hit(document.doc_id)
            if hit.flagged is None:
                result = SituateResult(chunk.chunk_id, hit.context, "llm", from_cache=True)
            else:
                outline = outline_context(document, chunk)
                result = SituateResult(chunk.chunk_id, outline, "outline", hit.flagged, None, True)
            self.finish(document, result)
        if not pending:
            return
        later: Priority = (1, prefix.order)
        if prefix.cache:
            first, pending = pending[0], pending[1:]
            self.finish(document, await self.situate(prefix, first, (1, prefix.order)))
            later = (0, prefix.order)  # the prefix is written: finish it while it is cached
        async with asyncio.TaskGroup() as group:
            for chunk in pending:
                group.create_task(self.situate_and_finish(prefix, chunk, later))

    async def situate_and_finish(self, prefix: Prefix, chunk: Chunk, priority: Priority) -> None:
        self.finish(prefix.document, await self.situate(prefix, chunk, priority))

    async def situate(self, prefix: Prefix, chunk: Chunk, priority: Priority) -> SituateResult:
        document = prefix.document
        request = SituateRequest(prefix.window.text, chunk.text, chunk.heading_path, prefix.cache)
        outline = outline_context(document, chunk)
        verdict = None
        for round_ in range(2):  # a response that is not a context is retried once
            try:
                completion = await self.send(prefix, request, chunk, priority)
            except Exception as exc:  # any failure: this chunk falls back, the run goes on
                error = _describe(exc)
                self.ledger.record_failure(chunk.chunk_id, error)
                return SituateResult(chunk.chunk_id, outline, "outline", f"failed: {error}", error)
            self.ledger.record_usage(document.doc_id, completion.usage)
            text = completion.text.strip()
            verdict = check_context(
                text,
                chunk=chunk.text,
                document=document.text,
                count_tokens=self.count_tokens,
                max_tokens=self.max_context_tokens,
            )
            if verdict is None:
                if self.cache is not None:
                    self.cache.put(self._key(document, chunk), text)
                return SituateResult(chunk.chunk_id, text, "llm")
            if round_ == 0:
                self.ledger.record_retry(chunk.chunk_id, f"{verdict.reason}: {verdict.detail}")
        assert verdict is not None
        self.ledger.record_flag(chunk.chunk_id, verdict.reason)
        if self.cache is not None:  # the same model and prompt would fail again: don't pay twice
            self.cache.put(self._key(document, chunk), outline, verdict.reason)
        return SituateResult(chunk.chunk_id, outline, "outline", verdict.reason, verdict.detail)

    async def send(
        self, prefix: Prefix, request: SituateRequest, chunk: Chunk, priority: Priority
    ) -> Completion:
        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            self.ledger.record_retry(chunk.chunk_id, _describe(exc) if exc else "retry")

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self.wait,
            retry=retry_if_exception(_retryable),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(self.attempt, prefix, request, priority)

    def wait(self, state: RetryCallState) -> float:
        jittered = wait_random_exponential(
            multiplier=self.backoff.initial, max=self.backoff.maximum
        )(state)
        exc = state.outcome.exception() if state.outcome else None
        floor = exc.retry_after if isinstance(exc, ProviderError) and exc.retry_after else 0.0
        return max(float(jittered), floor)

    async def attempt(
        self, prefix: Prefix, request: SituateRequest, priority: Priority
    ) -> Completion:
        estimate = self.count_tokens(request.chunk) + PROMPT_OVERHEAD_TOKENS
        if id(prefix) not in self.readable or self.limiter.limits.cache_reads_count:
            estimate += prefix.tokens
        await self.slots.acquire(priority)
        try:
            ticket = await self.limiter.acquire(estimate, min(self.max_context_tokens, 200))
            self.ledger.record_request(prefix.document.doc_id)
            try:
                completion = await self.llm.complete(request.completion())
            except ProviderError as exc:
                self.limiter.settle(ticket, None)
                if exc.retry_after:
                    self.limiter.pause(exc.retry_after)  # every sender waits, not just this one
                raise
            self.limiter.settle(ticket, completion.usage)
            self.limiter.observe(completion.rate_limit_headers)
            if prefix.cache:
                self.readable.add(id(prefix))
            return completion
        finally:
            self.slots.release()

    def finish(self, document: Document, result: SituateResult) -> None:
        self.results[result.chunk_id] = result
        self.progress.advance(PHASE)
        self.left[document.doc_id] -= 1
        if time.monotonic() - self.last_note >= NOTE_EVERY_SECONDS:
            self.note()

    def note(self) -> None:
        self.last_note = time.monotonic()
        done = sum(1 for n in self.left.values() if n == 0)
        self.progress.note(self.ledger.progress_line(done, len(self.left), len(self.results)))


async def situate_documents(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    llm: LLM,
    *,
    ledger: Ledger,
    prompt_version: str,
    count_tokens: Callable[[str], int],
    cache: ResponseCache | None = None,
    limits: RateLimits | RateLimiter | None = None,
    concurrency: int = 8,
    progress: Progress | None = None,
    max_document_tokens: int = 100_000,
    max_attempts: int = 6,
    backoff: Backoff | None = None,
    render_document: Callable[[str], str] = lambda text: text,
    max_context_tokens: int = DEFAULT_MAX_TOKENS,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> dict[str, SituateResult]:
    """Situate every chunk of `documents`; returns a result per chunk id, none missing.

    `render_document` turns a document into the prompt prefix the provider caches, so that its
    size can be measured against `llm.min_cacheable_tokens`. The caller owns `llm`, `cache` and
    `ledger` (this writes the ledger to its path, if it has one, however the run ends).
    """
    run = _Run(
        llm=llm,
        cache=cache,
        limiter=limits if isinstance(limits, RateLimiter) else RateLimiter(limits),
        slots=PrioritySlots(concurrency),
        ledger=ledger,
        progress=progress or NullProgress(),
        prompt_version=prompt_version,
        count_tokens=count_tokens,
        max_attempts=max_attempts,
        backoff=backoff or Backoff(),
        max_context_tokens=max_context_tokens,
        sleep=sleep,
    )
    ledger.begin(llm.provider, llm.model, prompt_version)
    interrupted = True
    try:
        prefixes = plan_prefixes(
            documents,
            max_tokens=max_document_tokens,
            count_tokens=count_tokens,
            render_document=render_document,
            min_cacheable_tokens=llm.min_cacheable_tokens,
        )
        run.left = {document.doc_id: len(chunks) for document, chunks in documents}
        for p in prefixes:
            doc = p.document
            chunks = len(p.window.chunks)
            ledger.add_prefix(
                doc.doc_id, doc.source, chunks=chunks, tokens=p.tokens, cached=p.cache
            )
        run.progress.start(PHASE, sum(run.left.values()))
        async with asyncio.TaskGroup() as group:
            for prefix in prefixes:
                group.create_task(run.run_prefix(prefix))
        interrupted = False
    finally:
        ledger.finish(interrupted=interrupted)
        ledger.write()
        run.note()
    return run.results
