"""Sending one situating request: a priority slot, the rate limiter, and retries.

Every request waits for a slot (`PrioritySlots`: follow-ups of a written prefix go first) and
for the shared rate limiter, and is retried by tenacity on a retryable `ProviderError`, with
exponential backoff and full jitter that waits at least the server's `retry_after`. A
`retry-after` pauses every sender, not just the one that got it. The sender also remembers which
cached prefixes have been written, so that rate-limit estimates stop counting their tokens.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from ctxr.enrich.situate.batch import BatchOptions, BatchSender, batch_llm
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.results import Backoff, describe, retryable
from ctxr.enrich.situate.window import Prefix
from ctxr.errors import ProviderError
from ctxr.llm.base import LLM, Completion, CompletionRequest
from ctxr.llm.ratelimit import Priority, PrioritySlots, RateLimiter, RateLimits
from ctxr.types import Chunk

# The instruction and chunk framing around the document, for rate-limit estimates only.
PROMPT_OVERHEAD_TOKENS = 100


@dataclass(eq=False)
class Sender:
    llm: LLM
    limiter: RateLimiter
    slots: PrioritySlots
    ledger: Ledger
    max_attempts: int
    backoff: Backoff
    max_context_tokens: int
    sleep: Callable[[float], Awaitable[None]]
    readable: set[int] = field(default_factory=set)  # prefixes whose cache write has returned

    async def send(
        self,
        prefix: Prefix,
        request: CompletionRequest,
        chunk: Chunk,
        priority: Priority,
        tokens_in: int,
    ) -> Completion:
        """`request`, retried on retryable failures; retries are recorded against `chunk` (a
        group's first chunk for a grouped request)."""

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            self.ledger.record_retry(chunk.chunk_id, describe(exc) if exc else "retry")

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self.wait,
            retry=retry_if_exception(retryable),
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return await retrying(self.attempt, prefix, request, priority, tokens_in)

    def wait(self, state: RetryCallState) -> float:
        jittered = wait_random_exponential(
            multiplier=self.backoff.initial, max=self.backoff.maximum
        )(state)
        exc = state.outcome.exception() if state.outcome else None
        floor = exc.retry_after if isinstance(exc, ProviderError) and exc.retry_after else 0.0
        return max(float(jittered), floor)

    async def attempt(
        self, prefix: Prefix, request: CompletionRequest, priority: Priority, tokens_in: int
    ) -> Completion:
        estimate = tokens_in
        if id(prefix) not in self.readable or self.limiter.limits.cache_reads_count:
            estimate += prefix.tokens
        await self.slots.acquire(priority)
        try:
            tokens_out = request.max_output_tokens or min(self.max_context_tokens, 200)
            ticket = await self.limiter.acquire(estimate, tokens_out)
            self.ledger.record_request(prefix.document.doc_id)
            try:
                completion = await self.llm.complete(request)
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


def make_sender(
    llm: LLM,
    ledger: Ledger,
    *,
    batch: BatchOptions | None,
    limits: RateLimits | RateLimiter | None,
    concurrency: int,
    max_attempts: int,
    backoff: Backoff,
    max_context_tokens: int,
    sleep: Callable[[float], Awaitable[None]],
    note: Callable[[str], None],
) -> Sender | BatchSender:
    """The transport of a run: one request at a time, or the provider's Batch API."""
    if batch is not None:
        return BatchSender(batch_llm(llm), ledger, batch, note=note)
    return Sender(
        llm=llm,
        limiter=limits if isinstance(limits, RateLimiter) else RateLimiter(limits),
        slots=PrioritySlots(concurrency),
        ledger=ledger,
        max_attempts=max_attempts,
        backoff=backoff,
        max_context_tokens=max_context_tokens,
        sleep=sleep,
    )
