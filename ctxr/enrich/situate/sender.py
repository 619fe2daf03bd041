"""Sending one situating request: a priority slot, the rate limiter, and retries.

Every request waits for a slot (`PrioritySlots`: follow-ups of a written prefix go first) and
for the shared rate limiter, and is retried by tenacity on a retryable `ProviderError`, with
exponential backoff and full jitter that waits at least the server's `retry_after`. A
`retry-after` pauses every sender, not just the one that got it, and a pause of
`NOTE_WAIT_SECONDS` or more is announced (`note`): a run must never stall silently.

A provider asking for more than `max_retry_wait` seconds (`CTXR_LLM_MAX_RETRY_WAIT`) is not
waited for: per-minute limits refill within a minute, so such a wait means a quota or an
outage that no wait inside a run repairs. The sender gives up on that request and on every
later one of the run (they fail without being sent: the provider has said no), says so once,
and the chunks get their outline contexts, to be asked again by the next run.

The sender also remembers which cached prefixes have been written, so that rate-limit estimates
stop counting their tokens. The ledger counts a request when it is sent (`sent`) and again
when it is answered (`requests`): a refusal is not an answer.
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
# A pause at least this long is said on stderr; shorter ones are routine and would be noise.
NOTE_WAIT_SECONDS = 5.0
DEFAULT_MAX_RETRY_WAIT = 60.0


def _never(_: str) -> None:
    pass


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
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT
    note: Callable[[str], None] = _never
    readable: set[int] = field(default_factory=set)  # prefixes whose cache write has returned
    refused: ProviderError | None = None  # set once a provider asked for too long a wait

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
        return min(max(float(jittered), floor), self.max_retry_wait)

    async def attempt(
        self, prefix: Prefix, request: CompletionRequest, priority: Priority, tokens_in: int
    ) -> Completion:
        estimate = tokens_in
        if id(prefix) not in self.readable or self.limiter.limits.cache_reads_count:
            estimate += prefix.tokens
        await self.slots.acquire(priority)
        try:
            if self.refused is not None:
                raise self.refused
            tokens_out = request.max_output_tokens or min(self.max_context_tokens, 200)
            ticket = await self.limiter.acquire(estimate, tokens_out)
            if self.refused is not None:  # refused while this one waited for the limiter
                self.limiter.settle(ticket, None)
                raise self.refused
            doc_id = prefix.document.doc_id
            self.ledger.record_sent(doc_id)
            try:
                completion = await self.llm.complete(request)
            except ProviderError as exc:
                self.limiter.settle(ticket, None)
                if exc.retry_after:
                    self._told_to_wait(exc, exc.retry_after)
                raise
            self.ledger.record_request(doc_id)  # answered
            self.limiter.settle(ticket, completion.usage)
            before = self.limiter.resume_at
            self.limiter.observe(completion.rate_limit_headers)
            if (paused := self.limiter.resume_at - before) >= NOTE_WAIT_SECONDS:
                self.note(
                    f"{self._who()}: its rate-limit headers say nothing is left; every "
                    f"request waits {paused:.0f} s"
                )
            if prefix.cache:
                self.readable.add(id(prefix))
            return completion
        finally:
            self.slots.release()

    def _who(self) -> str:
        return f"{self.llm.provider} {self.llm.model}"

    def _told_to_wait(self, exc: ProviderError, seconds: float) -> None:
        """Pause every sender as the provider asked, or, past `max_retry_wait`, give up on
        the rest of the run; either way, say what was asked and what ctxr does."""
        status = f"HTTP {exc.status}" if exc.status else "its answer"
        asked = f"{self._who()} asked to wait {seconds:g} s ({status})"
        if seconds > self.max_retry_wait:
            if self.refused is None:
                cap = f"{self.max_retry_wait:g} s (CTXR_LLM_MAX_RETRY_WAIT)"
                message = (
                    f"{asked}, longer than {cap}: not waiting; the rest of this run's "
                    "requests are not sent, their chunks get outline contexts and the next "
                    "run asks again (raise CTXR_LLM_MAX_RETRY_WAIT to wait)"
                )
                self.refused = ProviderError(message, retryable=False, status=exc.status)
                self.note(message)
            raise self.refused from None
        before = self.limiter.resume_at
        self.limiter.pause(seconds)  # every sender waits, not just this one
        if seconds >= NOTE_WAIT_SECONDS and self.limiter.resume_at > before:
            self.note(f"{asked}; every request waits, then retrying")


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
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT,
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
        max_retry_wait=max_retry_wait,
        note=note,
    )
