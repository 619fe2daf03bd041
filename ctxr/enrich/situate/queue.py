"""The situating queue: every chunk gets its context, each document's prefix is cached once.

Anthropic's reference run wrote the same documents to the prompt cache again and again because
a document's chunks were sent together, before the first cache write had finished. Here, per
cached prefix (a document, or one block of a long document's windows, see `window.py`), the
FIRST request (one chunk, or one group of chunks, see `group.py`) is sent alone and must
complete, which writes the provider's cache; only then are the prefix's other requests sent,
concurrently, and they all read it. Identical chunks of a prefix are asked about once. Many
prefixes are in flight at once: `concurrency` bounds requests in flight, not documents. A
prefix below the model's minimum cacheable size is sent without a cache marker and its
requests go at once.

Slots are handed out by priority: the follow-ups of a prefix already written go before the
first request of a new one, so a prefix is finished while it is still in the provider's cache
(its TTL is minutes) and few documents are half done at any moment.

Around every request: the response cache (answered chunks are never sent again), the rate
limiter (shared buckets and cooldowns), tenacity retries on retryable `ProviderError`s with
exponential backoff and jitter that waits at least `retry_after`, and validation (a response
that is not a context is retried once). A chunk that still fails gets its outline context,
flagged, and the run goes on; nothing but an accepted context is cached, so the next run asks
again for every chunk that got no answer. The ledger is written in a `finally`, interrupted or not.

What to ask is planned once for the run (`pack.py`: groups per prefix, small documents
packed); grouped and packed requests and their answers are `grouped.py`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ctxr.enrich.situate.batch import BatchOptions, BatchSender
from ctxr.enrich.situate.grouped import GroupedAsks
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.outline import outline_context
from ctxr.enrich.situate.pack import (
    SHARED_ANSWER_VERSIONS,
    Planned,
    plan_packs,
    plan_prefix,
)
from ctxr.enrich.situate.prompt import SituateRequest
from ctxr.enrich.situate.response_cache import ResponseCache, chunk_key
from ctxr.enrich.situate.results import Backoff, SituateResult, describe
from ctxr.enrich.situate.sender import (
    DEFAULT_MAX_RETRY_WAIT,
    PROMPT_OVERHEAD_TOKENS,
    Sender,
    make_sender,
)
from ctxr.enrich.situate.validate import DEFAULT_MAX_TOKENS, Verdict, check_context
from ctxr.enrich.situate.window import Prefix, plan_prefixes
from ctxr.llm.base import LLM, CacheTTL, CompletionRequest
from ctxr.llm.ratelimit import Priority, RateLimiter, RateLimits
from ctxr.progress import NullProgress, Progress
from ctxr.types import Chunk, Document

PHASE = "contexts"
NOTE_EVERY_SECONDS = 5.0


@dataclass(eq=False)
class _Run(GroupedAsks):
    llm: LLM
    cache: ResponseCache | None
    sender: Sender | BatchSender
    ledger: Ledger
    progress: Progress
    prompt_version: str
    count_tokens: Callable[[str], int]
    max_context_tokens: int
    group_size: int = 1
    context_tokens: int = 200  # output budget per context in a grouped request
    plain_json: bool = False  # the server refused a JSON schema: ask for JSON in words only
    cache_ttl: CacheTTL = "5m"  # of each cached prefix's entry (Anthropic)
    results: dict[str, SituateResult] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)  # chunks still to do per document
    last_note: float = field(default_factory=time.monotonic)

    def _key(self, document: Document, chunk: Chunk, version: str | None = None) -> str:
        version = version or self.prompt_version
        return chunk_key(self.llm.provider, self.llm.model, version, document.sha256, chunk)

    def _cached(self, document: Document, chunk: Chunk) -> SituateResult | None:
        """A context paid for before, by either prompt: both answer the same question."""
        if self.cache is None:
            return None
        versions = (self.prompt_version, *SHARED_ANSWER_VERSIONS)
        llm = self.llm
        hit = self.cache.answer(llm.provider, llm.model, versions, document.sha256, chunk)
        if hit is None or hit.flagged is not None:
            # A flagged entry (an answer that was no context, stored by earlier versions) is
            # not an answer: the chunk is asked again.
            return None
        self.ledger.record_response_cache_hit(document.doc_id)
        return SituateResult(chunk.chunk_id, hit.context, "llm", from_cache=True)

    def prepare(self, prefix: Prefix) -> Planned | None:
        """`prefix`'s unanswered chunks, planned (the answered ones are finished here); None
        when every chunk was answered before."""
        document = prefix.document
        pending: list[Chunk] = []
        for chunk in prefix.window.chunks:
            if (cached := self._cached(document, chunk)) is not None:
                self.finish(document, cached)
            else:
                pending.append(chunk)
        if not pending:
            return None
        planned = plan_prefix(prefix, pending, self.group_size, self.cache_ttl)
        if planned.declined_cache:  # too few requests to earn back the write: sent unmarked
            self.ledger.document(document.doc_id).uncached_prefixes += 1
        return planned

    async def run_unit(self, unit: tuple[Planned, ...]) -> None:
        if len(unit) > 1:
            await self.situate_pack(unit)
        else:
            await self.run_planned(unit[0])

    async def run_planned(self, planned: Planned) -> None:
        prefix, groups = planned.prefix, list(planned.groups)
        later: Priority = (1, prefix.order)
        if prefix.cache:
            first, groups = groups[0], groups[1:]
            await self.situate_and_finish(prefix, first, (1, prefix.order), planned.copies)
            later = (0, prefix.order)  # the prefix is written: finish it while it is cached
        async with asyncio.TaskGroup() as tasks:
            for group in groups:
                tasks.create_task(self.situate_and_finish(prefix, group, later, planned.copies))

    async def situate_and_finish(
        self,
        prefix: Prefix,
        group: tuple[Chunk, ...],
        priority: Priority,
        copies: Mapping[str, list[Chunk]],
    ) -> None:
        if self.group_size == 1:
            results = [await self.situate(prefix, group[0], priority)]
        else:
            results = await self.situate_group(prefix, group, priority)
        self.finish_planned(Planned(prefix, (group,), copies), results)

    def _ttl(self, request: CompletionRequest) -> CompletionRequest:
        if request.cache and request.cache_ttl != self.cache_ttl:
            return dataclasses.replace(request, cache_ttl=self.cache_ttl)
        return request

    def _failed(self, document: Document, chunk: Chunk, exc: BaseException) -> SituateResult:
        error = describe(exc)
        self.ledger.record_failure(chunk.chunk_id, error)
        outline = outline_context(document, chunk)
        return SituateResult(chunk.chunk_id, outline, "outline", f"failed: {error}", error)

    def _verdict(
        self, document: Document, chunk: Chunk, text: str, truncated: bool = False
    ) -> Verdict | None:
        return check_context(
            text,
            chunk=chunk.text,
            document=document.text,
            count_tokens=self.count_tokens,
            max_tokens=self.max_context_tokens,
            truncated=truncated,
        )

    async def situate(self, prefix: Prefix, chunk: Chunk, priority: Priority) -> SituateResult:
        document = prefix.document
        situate = SituateRequest(prefix.window.text, chunk.text, chunk.heading_path, prefix.cache)
        request = self._ttl(situate.completion())
        tokens_in = self.count_tokens(chunk.text) + PROMPT_OVERHEAD_TOKENS
        verdict = None
        for round_ in range(2):  # a response that is not a context is retried once
            try:
                completion = await self.sender.send(prefix, request, chunk, priority, tokens_in)
            except Exception as exc:  # any failure: this chunk falls back, the run goes on
                return self._failed(document, chunk, exc)
            self.ledger.record_usage(document.doc_id, completion.usage)
            text = completion.text.strip()
            verdict = self._verdict(document, chunk, text, completion.truncated)
            if verdict is None:
                if self.cache is not None:
                    self.cache.put(self._key(document, chunk), text)
                return SituateResult(chunk.chunk_id, text, "llm")
            if round_ == 0:
                self.ledger.record_retry(chunk.chunk_id, f"{verdict.reason}: {verdict.detail}")
        assert verdict is not None
        self.ledger.record_flag(chunk.chunk_id, verdict.reason, verdict.detail)
        # Not cached: the outline stands in for an answer that never came, so the next run
        # (a fixed server, another model) asks again; the document is marked incomplete.
        outline = outline_context(document, chunk)
        return SituateResult(chunk.chunk_id, outline, "outline", verdict.reason, verdict.detail)

    def finish(self, document: Document, result: SituateResult) -> None:
        self.results[result.chunk_id] = result
        if result.kind == "llm" and not result.from_cache:
            self.ledger.record_context()
        self.progress.advance(PHASE)
        self.left[document.doc_id] -= 1
        if time.monotonic() - self.last_note >= NOTE_EVERY_SECONDS:
            self.note()
            self.ledger.write()  # the spend so far is on record, even if the run is killed

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
    group_size: int = 1,
    context_tokens: int = 200,
    batch: BatchOptions | None = None,
    cache_ttl: CacheTTL | None = None,
    pack_tokens: int = 0,
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
) -> dict[str, SituateResult]:
    """Situate every chunk of `documents`; returns a result per chunk id, none missing.

    `render_document` turns a document into the prompt prefix the provider caches, so that its
    size can be measured against `llm.min_cacheable_tokens`. `group_size` chunks share one
    request (`ctxr.enrich.situate.group`); 1 asks for each chunk alone, Anthropic's method.
    Grouped, small documents share a request up to `pack_tokens` (`pack.py`; 0: never).
    The caller owns `llm`, `cache` and `ledger` (this writes the ledger to its path, if it has
    one, however the run ends). `batch` sends through the provider's Batch API
    (`ctxr.enrich.situate.batch`); `cache_ttl` defaults to "1h" there (a batch may take longer
    than five minutes to reach a document's follow-ups) and "5m" otherwise. A provider asking
    to wait longer than `max_retry_wait` seconds ends the run's sending (`sender.py`).
    """
    progress = progress or NullProgress()
    sender = make_sender(
        llm, ledger, batch=batch, limits=limits, concurrency=concurrency,
        max_attempts=max_attempts, backoff=backoff or Backoff(),
        max_context_tokens=max_context_tokens, sleep=sleep, note=progress.note,
        max_retry_wait=max_retry_wait,
    )  # fmt: skip
    run = _Run(
        llm=llm,
        cache=cache,
        sender=sender,
        ledger=ledger,
        progress=progress,
        prompt_version=prompt_version,
        count_tokens=count_tokens,
        max_context_tokens=max_context_tokens,
        group_size=group_size,
        context_tokens=context_tokens,
        cache_ttl=cache_ttl or ("1h" if batch is not None else "5m"),
    )
    if isinstance(sender, BatchSender):
        sender.on_change = run.note
    server = getattr(llm, "base_url", None)  # for messages: which server answered so
    ledger.begin(
        llm.provider, llm.model, prompt_version, server if isinstance(server, str) else None
    )
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
            doc, chunks = p.document, len(p.window.chunks)
            ledger.add_prefix(
                doc.doc_id, doc.source, chunks=chunks, tokens=p.tokens, cached=p.cache
            )
        run.progress.start(PHASE, sum(run.left.values()))
        planned = [plan for prefix in prefixes if (plan := run.prepare(prefix)) is not None]
        units = plan_packs(planned, group_size, pack_tokens if group_size > 1 else 0)
        async with asyncio.TaskGroup() as group:
            for unit in units:
                group.create_task(run.run_unit(unit))
        interrupted = False
    finally:
        if isinstance(sender, BatchSender):
            await sender.aclose(finished=not interrupted)
        ledger.finish(interrupted=interrupted)
        ledger.write()
        run.note()
    return run.results
