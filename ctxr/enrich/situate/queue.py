"""The situating queue: every chunk gets its context, each document's prefix is cached once.

Anthropic's reference run wrote the same documents to the prompt cache again and again because
a document's chunks were sent together, before the first cache write had finished. Here, per
cached prefix (a document, or one block of a long document's windows, see `window.py`), the
FIRST request (one chunk, or one group of chunks, see `plan.py`) is sent alone and must
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

What to ask is planned once for the run (`plan.py`'s `RequestPlan`: groups per prefix,
small documents packed, answered chunks left out); this module sends exactly that plan. A
grouped or packed answer is mapped back by id, every context validated and cached under the
prompt that made it, and a chunk the answer misses or gets wrong is asked again alone with the
per-chunk prompt. A server that refuses JSON schemas (a 400) is asked in words from then on.

A request the server refuses as longer than its context window (`ContextLengthError`) is
split, not failed: a pack into its documents' own requests, a group into halves down to
single chunks asked alone, and a single chunk whose document alone passes the window is asked
with a window of the document around it (`window.around`), smaller each time, and at last with
the document's outline only. A chunk that fits none of them keeps its outline context, and
the failure names the settings to change.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ctxr.enrich.situate.batch import BatchOptions, BatchSender
from ctxr.enrich.situate.fit import Fit
from ctxr.enrich.situate.group import (
    GROUP_PROMPT_VERSION,
    PACK_PROMPT_VERSION,
    ask_for,
    parse_answers,
)
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.outline import outline_context
from ctxr.enrich.situate.plan import (
    Planned,
    PlannedRequest,
    PlannedUnit,
    PlanOptions,
    RequestPlan,
    alone,
    plan_requests,
    share_usage,
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
from ctxr.enrich.situate.window import Prefix, around, outline_text
from ctxr.errors import ContextLengthError, CtxrError, ProviderError
from ctxr.llm.base import LLM, CacheTTL, Completion, CompletionRequest
from ctxr.llm.ratelimit import Priority, RateLimiter, RateLimits
from ctxr.progress import NullProgress, Progress
from ctxr.types import Chunk, Document

PHASE = "contexts"
NOTE_EVERY_SECONDS = 5.0
TIMEOUT_SETTING = "CTXR_LLM_TIMEOUT"
# Windows tried for a chunk whose document passes the server's window, before the outline.
SHRINKS = 3


@dataclass(eq=False)
class _Run:
    llm: LLM
    cache: ResponseCache | None
    sender: Sender | BatchSender
    ledger: Ledger
    progress: Progress
    options: PlanOptions
    max_context_tokens: int
    plain_json: bool = False  # the server refused a JSON schema: ask for JSON in words only
    results: dict[str, SituateResult] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)  # chunks still to do per document
    last_note: float = field(default_factory=time.monotonic)

    def _key(self, document: Document, chunk: Chunk, version: str | None = None) -> str:
        version = version or self.options.prompt_version
        return chunk_key(self.llm.provider, self.llm.model, version, document.sha256, chunk)

    def start(self, plan: RequestPlan) -> None:
        """The chunks answered before are finished here; declined caches are on record."""
        for hit in plan.answered:
            self.ledger.record_response_cache_hit(hit.prefix.document.doc_id)
            result = SituateResult(hit.chunk.chunk_id, hit.context, "llm", from_cache=True)
            self.finish(hit.prefix.document, result)
        for planned in plan.planned:
            if planned.declined_cache:  # too few requests to earn back the write: unmarked
                self.ledger.document(planned.prefix.document.doc_id).uncached_prefixes += 1

    async def run_unit(self, unit: PlannedUnit) -> None:
        if unit.is_pack:
            await self.situate_pack(unit)
            return
        prefix, requests = unit.sent, list(unit.requests)
        later: Priority = (1, prefix.order)
        if prefix.cache:
            first, requests = requests[0], requests[1:]
            await self.situate_and_finish(unit, first, (1, prefix.order))
            later = (0, prefix.order)  # the prefix is written: finish it while it is cached
        async with asyncio.TaskGroup() as tasks:
            for request in requests:
                tasks.create_task(self.situate_and_finish(unit, request, later))

    async def situate_and_finish(
        self, unit: PlannedUnit, planned: PlannedRequest, priority: Priority
    ) -> None:
        prefix = unit.sent
        if planned.ids:
            results = await self.situate_group(prefix, planned, priority)
        else:
            [chunk] = planned.chunks
            results = [await self.situate(prefix, chunk, priority, planned.request)]
        self.finish_chunks(prefix.document, planned.chunks, results, unit.members[0].copies)

    def finish_chunks(
        self,
        document: Document,
        chunks: Sequence[Chunk],
        results: Sequence[SituateResult],
        copies: Mapping[str, list[Chunk]],
    ) -> None:
        """Each chunk's result, and the same result for its identical copies."""
        for chunk, result in zip(chunks, results, strict=True):
            self.finish(document, result)
            for copy in copies.get(chunk.chunk_id, ()):
                self.finish(document, dataclasses.replace(result, chunk_id=copy.chunk_id))

    def _failed(self, document: Document, chunk: Chunk, exc: BaseException) -> SituateResult:
        error = describe(exc)
        if isinstance(exc, ProviderError) and exc.timed_out:
            error += f"; raise {TIMEOUT_SETTING} for a slower server"
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
            count_tokens=self.options.count_tokens,
            max_tokens=self.max_context_tokens,
            truncated=truncated,
        )

    async def situate(
        self,
        prefix: Prefix,
        chunk: Chunk,
        priority: Priority,
        request: CompletionRequest | None = None,
    ) -> SituateResult:
        """One chunk asked alone with the per-chunk prompt (the plan's `request`, or asked
        again after a grouped answer), validated, falling back to its outline if need be."""
        document = prefix.document
        request = request or alone(prefix, chunk, self.options)
        tokens_in = self.options.count_tokens(chunk.text) + PROMPT_OVERHEAD_TOKENS
        verdict = None
        shrinks = 0
        round_ = 0
        while round_ < 2:  # a response that is not a context is retried once
            try:
                completion = await self.sender.send(prefix, request, chunk, priority, tokens_in)
            except ContextLengthError as exc:  # the document passes the window: a smaller one
                smaller = self._smaller(prefix, chunk, request, exc, shrinks)
                if smaller is None:
                    return self._failed(document, chunk, exc)
                request, shrinks = smaller, shrinks + 1
                continue
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
            round_ += 1
        assert verdict is not None
        self.ledger.record_flag(chunk.chunk_id, verdict.reason, verdict.detail)
        # Not cached: the outline stands in for an answer that never came, so the next run
        # (a fixed server, another model) asks again; the document is marked incomplete.
        outline = outline_context(document, chunk)
        return SituateResult(chunk.chunk_id, outline, "outline", verdict.reason, verdict.detail)

    def _smaller(
        self,
        prefix: Prefix,
        chunk: Chunk,
        request: CompletionRequest,
        exc: ContextLengthError,
        shrinks: int,
    ) -> CompletionRequest | None:
        """The per-chunk request for `chunk` with less of its document than `request` had:
        a window around the chunk sized by the server's figures (or half the last), then the
        outline alone; None when even that was refused."""
        if shrinks > SHRINKS:  # the outline alone was refused too
            return None
        count = self.options.count_tokens
        if shrinks == SHRINKS:
            text = outline_text(prefix.document, prefix.window.chunks, 1 << 30, count)
            why = "asked with the document's outline only"
        else:
            sent = count(request.prefix)
            target = sent // 2
            if exc.window and exc.prompt_tokens and exc.prompt_tokens > exc.window:
                # The server's figures are its own tokens: scale, with room for the answer.
                target = min(target, int(sent * exc.window / exc.prompt_tokens * 0.7))
            text = around(prefix.document, chunk, prefix.window.chunks, max(64, target), count)
            why = f"asked with {count(text)} tokens of the document around the chunk"
        self.ledger.record_retry(chunk.chunk_id, f"{describe(exc)} -> {why}")
        situate = SituateRequest(text, chunk.text, chunk.heading_path, cache=False)
        return situate.completion()

    async def _split_group(
        self, prefix: Prefix, planned: PlannedRequest, priority: Priority, exc: ContextLengthError
    ) -> list[SituateResult]:
        """A group the server refused as too long, asked again in halves (a group of one:
        the chunk alone, with the per-chunk prompt, which sends less)."""
        group = planned.chunks
        if len(group) == 1:
            self.ledger.record_retry(group[0].chunk_id, f"{describe(exc)} -> asked alone")
            return [await self.situate(prefix, group[0], priority)]
        half = len(group) // 2
        self.ledger.record_retry(
            group[0].chunk_id, f"{describe(exc)} -> split into {half} and {len(group) - half}"
        )
        parts = [group[:half], group[half:]]
        window = prefix.window
        asks = [
            ask_for(window.text, window.block is None, window.chunks, part, prefix.cache,
                    self.options.context_tokens)
            for part in parts
        ]  # fmt: skip
        requests = [
            PlannedRequest(self.options.ttl(a.request), part, a.ids, a.framing)
            for a, part in zip(asks, parts, strict=True)
        ]
        answers = await asyncio.gather(*(self.situate_group(prefix, r, priority) for r in requests))
        return [r for part in answers for r in part]

    async def situate_group(
        self, prefix: Prefix, planned: PlannedRequest, priority: Priority
    ) -> list[SituateResult]:
        """One request for a group; a chunk the answer misses or gets wrong is asked alone,
        and a group refused as too long for the server is split."""
        document, group = prefix.document, planned.chunks
        try:
            completion = await self._send_json(prefix, planned.request, group, priority)
        except ContextLengthError as exc:
            return await self._split_group(prefix, planned, priority, exc)
        except Exception as exc:  # any failure: these chunks fall back, the run goes on
            return [self._failed(document, c, exc) for c in group]
        self.ledger.record_usage(document.doc_id, completion.usage)
        answers = parse_answers(completion.text, planned.ids)
        return await self._accept(
            prefix, group, planned.ids, answers, GROUP_PROMPT_VERSION, priority
        )

    async def _accept(
        self,
        prefix: Prefix,
        chunks: Sequence[Chunk],
        ids: Sequence[str],
        answers: Mapping[str, str],
        version: str,
        priority: Priority,
    ) -> list[SituateResult]:
        """Each chunk's context from a grouped or packed answer, cached under `version`; a
        chunk the answer misses or gets wrong is asked again alone (the per-chunk prompt)."""
        document = prefix.document
        results: dict[str, SituateResult] = {}
        again: list[Chunk] = []
        for chunk_id, chunk in zip(ids, chunks, strict=True):
            text = answers.get(chunk_id)
            verdict = None if text is None else self._verdict(document, chunk, text)
            if text is not None and verdict is None:
                if self.cache is not None:
                    self.cache.put(self._key(document, chunk, version), text)
                results[chunk.chunk_id] = SituateResult(chunk.chunk_id, text, "llm")
                continue
            why = "missing from the grouped answer" if verdict is None else verdict.reason
            self.ledger.record_retry(chunk.chunk_id, f"{why}; asked alone")
            again.append(chunk)
        asked = await asyncio.gather(*(self.situate(prefix, c, priority) for c in again))
        results.update((r.chunk_id, r) for r in asked)
        return [results[c.chunk_id] for c in chunks]

    async def situate_pack(self, unit: PlannedUnit) -> None:
        """The one request for the chunks of several small documents; usage shared among them
        by size, each chunk checked and, where it fails, asked again alone."""
        [planned] = unit.requests
        members = unit.members
        priority: Priority = (1, unit.sent.order)
        try:
            completion = await self._send_json(unit.sent, planned.request, planned.chunks, priority)
        except ContextLengthError as exc:  # too long for the server: each document on its own
            await self._unpack(unit, priority, exc)
            return
        except Exception as exc:  # any failure: these chunks fall back, the run goes on
            for member in members:
                document = member.prefix.document
                failed = [self._failed(document, c, exc) for c in member.chunks]
                self.finish_chunks(document, member.chunks, failed, member.copies)
            return
        weights = [m.prefix.tokens for m in members]
        for member, usage in zip(members, share_usage(completion.usage, weights), strict=True):
            self.ledger.record_usage(member.prefix.document.doc_id, usage)
        answers = parse_answers(completion.text, planned.ids)

        async def settle(member: Planned, ids: tuple[str, ...]) -> None:
            results = await self._accept(
                member.prefix, member.chunks, ids, answers, PACK_PROMPT_VERSION, priority
            )
            self.finish_chunks(member.prefix.document, member.chunks, results, member.copies)

        async with asyncio.TaskGroup() as tasks:
            for member, ids in zip(members, unit.member_ids, strict=True):
                tasks.create_task(settle(member, ids))

    async def _unpack(self, unit: PlannedUnit, priority: Priority, exc: ContextLengthError) -> None:
        """A pack the server refused as too long: each document asked in a request of its own
        (split further if that is refused too)."""
        self.ledger.record_retry(
            unit.requests[0].chunks[0].chunk_id,
            f"{describe(exc)} -> split into its {len(unit.members)} documents",
        )

        async def alone_member(member: Planned) -> None:
            window, prefix = member.prefix.window, member.prefix
            ask = ask_for(window.text, window.block is None, window.chunks, member.chunks,
                          prefix.cache, self.options.context_tokens)  # fmt: skip
            planned = PlannedRequest(self.options.ttl(ask.request), member.chunks, ask.ids,
                                     ask.framing)  # fmt: skip
            results = await self.situate_group(prefix, planned, priority)
            self.finish_chunks(prefix.document, member.chunks, results, member.copies)

        async with asyncio.TaskGroup() as tasks:
            for member in unit.members:
                tasks.create_task(alone_member(member))

    async def _send_json(
        self,
        prefix: Prefix,
        request: CompletionRequest,
        chunks: Sequence[Chunk],
        priority: Priority,
    ) -> Completion:
        """`request` for `chunks` (retries are recorded against the first). An OpenAI-compatible
        server without structured outputs answers a schema with a 400: the prompt itself asks
        for the JSON, so the request goes again without it, and so does every later one."""
        count = self.options.count_tokens
        tokens_in = sum(count(c.text) for c in chunks) + PROMPT_OVERHEAD_TOKENS
        while True:
            sent = dataclasses.replace(request, json_schema=None) if self.plain_json else request
            try:
                return await self.sender.send(prefix, sent, chunks[0], priority, tokens_in)
            except ProviderError as exc:
                too_long = isinstance(exc, ContextLengthError)
                if too_long or exc.status != 400 or sent.json_schema is None:
                    raise
                self.plain_json = True

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
    fit: Fit | None = None,
) -> dict[str, SituateResult]:
    """Situate every chunk of `documents`; returns a result per chunk id, none missing.

    `render_document` turns a document into the prompt prefix the provider caches, so that its
    size can be measured against `llm.min_cacheable_tokens`. `group_size` chunks share one
    request (`ctxr.enrich.situate.plan`); 1 asks for each chunk alone, Anthropic's method.
    Grouped, small documents share a request up to `pack_tokens` (0: never).
    The caller owns `llm`, `cache` and `ledger` (this writes the ledger to its path, if it has
    one, however the run ends). `batch` sends through the provider's Batch API
    (`ctxr.enrich.situate.batch`); `cache_ttl` defaults to "1h" there (a batch may take longer
    than five minutes to reach a document's follow-ups) and "5m" otherwise. A provider asking
    to wait longer than `max_retry_wait` seconds ends the run's sending (`sender.py`).
    `fit` is the server's context window, where known: every request is planned to fit it
    (`fit.py`), and one refused as too long is split either way.
    """
    progress = progress or NullProgress()
    sender = make_sender(
        llm, ledger, batch=batch, limits=limits, concurrency=concurrency,
        max_attempts=max_attempts, backoff=backoff or Backoff(),
        max_context_tokens=max_context_tokens, sleep=sleep, note=progress.note,
        max_retry_wait=max_retry_wait,
    )  # fmt: skip
    options = PlanOptions(
        prompt_version=prompt_version,
        count_tokens=count_tokens,
        render_document=render_document,
        max_document_tokens=max_document_tokens,
        group_size=group_size,
        context_tokens=context_tokens,
        pack_tokens=pack_tokens,
        cache_ttl=cache_ttl or ("1h" if batch is not None else "5m"),
        fit=fit,
    ).fitted(documents)
    run = _Run(
        llm=llm,
        cache=cache,
        sender=sender,
        ledger=ledger,
        progress=progress,
        options=options,
        max_context_tokens=max_context_tokens,
    )
    if isinstance(sender, BatchSender):
        sender.on_change = run.note
    server = getattr(llm, "base_url", None)  # for messages: which server answered so
    ledger.begin(
        llm.provider, llm.model, prompt_version, server if isinstance(server, str) else None
    )
    interrupted = True
    try:
        plan = plan_requests(documents, llm, cache, options)
        run.left = {document.doc_id: len(chunks) for document, chunks in documents}
        for p in plan.prefixes:
            doc, chunks = p.document, len(p.window.chunks)
            ledger.add_prefix(
                doc.doc_id, doc.source, chunks=chunks, tokens=p.tokens, cached=p.cache
            )
        run.progress.start(PHASE, sum(run.left.values()))
        run.start(plan)
        try:
            async with asyncio.TaskGroup() as group:
                for unit in plan.units:
                    group.create_task(run.run_unit(unit))
        except BaseExceptionGroup as failed:
            # A task group wraps what stopped it; a named error (a full disk under the
            # response cache) must reach the user as itself, not as a group's traceback.
            named = _first_named(failed)
            if named is None:
                raise
            raise named from None
        interrupted = False
    finally:
        if isinstance(sender, BatchSender):
            await sender.aclose(finished=not interrupted)
        ledger.finish(interrupted=interrupted)
        ledger.write()
        run.note()
    return run.results


def _first_named(group: BaseExceptionGroup[BaseException]) -> CtxrError | None:
    """The first of ctxr's own errors inside `group` (nested task groups included)."""
    for exc in group.exceptions:
        if isinstance(exc, CtxrError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            inner = _first_named(exc)
            if inner is not None:
                return inner
    return None
