"""Client-side rate limits: token buckets for requests, input tokens and output tokens per minute.

Every sender asks the limiter before each request (`acquire`, with the request's estimated input
and output tokens) and tells it what was actually billed afterwards (`settle`), which refunds or
charges the difference. Buckets hold `burst_seconds` worth of their rate (default one second,
as the providers describe their own buckets), so a run never bursts a minute's allowance into
a server that refills by the second. A request larger than a bucket's capacity
waits for a full bucket and leaves it in debt, so the average rate still holds.

The limiter adapts to the server: a `retry-after` on an error pauses ALL senders until then
(`pause`), and a response whose rate-limit headers say nothing is left (`...-remaining: 0`)
pauses everyone until the matching `...-reset` (`observe`). Clock and sleep are injectable so
tests run on a fake clock.

`PrioritySlots` bounds the requests in flight and decides who goes next when a slot frees up.

`SyncRateLimiter` is the same limits for sync senders (the OpenAI embedder): `RateLimiter.acquire`
is a coroutine behind an ``asyncio.Lock``, and the indexer embeds from sync code where no event
loop runs, so it takes the same `TokenBucket`s under a threading lock and waits with
``time.sleep``; pauses and rate-limit headers go through a `RateLimiter`'s sync ``pause`` and
``observe``, since headers mean the same for embedding calls as for LLM calls.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from ctxr.llm.base import Usage

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RateLimits:
    """None means unlimited. Anthropic does not count cache reads toward its input-token limit
    (cache-aware ITPM); OpenAI does: set `cache_reads_count=True` for it."""

    requests_per_minute: float | None = None
    input_tokens_per_minute: float | None = None
    output_tokens_per_minute: float | None = None
    burst_seconds: float = 1.0  # as the providers' buckets: at most a second's worth at once
    cache_reads_count: bool = False
    max_pause_seconds: float = 300.0  # a header asking for a longer pause is capped to this


class TokenBucket:
    def __init__(self, per_minute: float, burst_seconds: float, clock: Clock) -> None:
        if per_minute <= 0:
            raise ValueError(f"a rate limit must be positive, got {per_minute}")
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_seconds)
        self.level = self.capacity
        self._clock = clock
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._last) * self.rate)
        self._last = now

    def wait_time(self, cost: float) -> float:
        """Seconds until `cost` may be taken (a cost above capacity waits for a full bucket)."""
        self._refill()
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, cost: float) -> None:
        self._refill()
        self.level -= cost

    def give(self, amount: float) -> None:
        """Refund (positive) or charge (negative) after the real cost is known."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


@dataclass(frozen=True, slots=True)
class Ticket:
    input_tokens: int
    output_tokens: int


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def reset_seconds(value: str, now_wall: float) -> float | None:
    """Seconds until a `...-reset` header's moment: RFC 3339 (Anthropic), a duration such as
    `6m0s` or `20ms` (OpenAI), or plain seconds."""
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    if _DURATION.fullmatch(value) or re.fullmatch(r"(\d+(?:\.\d+)?(ms|h|m|s))+", value):
        return sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(value))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp() - now_wall


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class RateLimiter:
    """Shared by every sender of one run."""

    def __init__(
        self,
        limits: RateLimits | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        wall: Clock = time.time,
    ) -> None:
        self.limits = limits or RateLimits()
        self._clock, self._sleep, self._wall = clock, sleep, wall
        burst = self.limits.burst_seconds

        def bucket(rate: float | None) -> TokenBucket | None:
            return None if rate is None else TokenBucket(rate, burst, clock)

        self._requests = bucket(self.limits.requests_per_minute)
        self._input = bucket(self.limits.input_tokens_per_minute)
        self._output = bucket(self.limits.output_tokens_per_minute)
        self._resume_at = clock()
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self.pauses = 0
        self.waited_seconds = 0.0

    def _get_lock(self) -> asyncio.Lock:
        # One lock per event loop, so a limiter survives being used by two asyncio.run calls.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    @property
    def resume_at(self) -> float:
        return self._resume_at

    def _wait_time(self, input_tokens: int, output_tokens: int) -> float:
        waits = [self._resume_at - self._clock()]
        if self._requests:
            waits.append(self._requests.wait_time(1))
        if self._input:
            waits.append(self._input.wait_time(input_tokens))
        if self._output:
            waits.append(self._output.wait_time(output_tokens))
        return max(waits)

    async def acquire(self, input_tokens: int, output_tokens: int) -> Ticket:
        """Wait until the request fits every bucket and no pause is in force, then take it.
        Senders are served in arrival order (the lock is FIFO)."""
        async with self._get_lock():
            while (wait := self._wait_time(input_tokens, output_tokens)) > 0:
                self.waited_seconds += wait
                await self._sleep(wait)
            if self._requests:
                self._requests.take(1)
            if self._input:
                self._input.take(input_tokens)
            if self._output:
                self._output.take(output_tokens)
        return Ticket(input_tokens, output_tokens)

    def settle(self, ticket: Ticket, usage: Usage | None) -> None:
        """Correct the estimate with what was billed; `None` for a request that failed (the
        request still counts, its tokens are refunded)."""
        if usage is None:
            actual_in, actual_out = 0, 0
        else:
            actual_in = usage.input_tokens + usage.cache_write_tokens
            if self.limits.cache_reads_count:
                actual_in += usage.cache_read_tokens
            actual_out = usage.output_tokens
        if self._input:
            self._input.give(ticket.input_tokens - actual_in)
        if self._output:
            self._output.give(ticket.output_tokens - actual_out)

    def pause(self, seconds: float) -> None:
        """Stop every sender for `seconds` from now (a shared cooldown; never shortened)."""
        seconds = min(max(0.0, seconds), self.limits.max_pause_seconds)
        until = self._clock() + seconds
        if until > self._resume_at:
            self._resume_at = until
            self.pauses += 1

    def observe(self, headers: Mapping[str, str]) -> None:
        """Pause until reset when a rate-limit header says nothing is left. Handles both
        `anthropic-ratelimit-<kind>-remaining`/`-reset` and `x-ratelimit-remaining-<kind>`/
        `x-ratelimit-reset-<kind>`."""
        lowered = {name.lower(): value for name, value in headers.items()}
        for name, value in lowered.items():
            if "remaining" not in name:
                continue
            try:
                remaining = float(value)
            except ValueError:
                continue
            if remaining > 0:
                continue
            reset = lowered.get(name.replace("remaining", "reset"))
            seconds = reset_seconds(reset, self._wall()) if reset is not None else None
            if seconds is None or seconds <= 0:
                continue
            # For requests, "reset" is when the bucket is FULL again, but the next request fits
            # as soon as one is back: with the per-minute limit known (the "-limit" header),
            # wait one request's share of the minute. Pausing every sender until a full refill
            # measured 71% of the allowed rate against a server at its limit. Token buckets
            # keep the full wait: how many tokens the next request needs is not known here.
            limit = _number(lowered.get(name.replace("remaining", "limit")))
            if "request" in name and limit is not None and limit > 0:
                seconds = min(seconds, 60.0 / limit)
            self.pause(seconds)


Priority = tuple[int, int]


class PrioritySlots:
    """A semaphore that admits the waiter with the lowest priority first (FIFO among equals)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"concurrency must be at least 1, got {size}")
        self._free = size
        self._waiters: list[tuple[Priority, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    async def acquire(self, priority: Priority) -> None:
        if self._free > 0:  # free slots imply nobody waits: release() hands slots to waiters
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._seq), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed a slot as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                future.set_result(None)
                return
        self._free += 1


class SyncRateLimiter:
    """Shared by every request of one embedder; thread-safe."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.pauses = RateLimiter(RateLimits(), clock=clock)  # used for pause/observe only
        burst = RateLimits().burst_seconds
        self._requests = (
            TokenBucket(requests_per_minute, burst, clock) if requests_per_minute else None
        )
        self._tokens = TokenBucket(tokens_per_minute, burst, clock) if tokens_per_minute else None
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self.waited_seconds = 0.0

    def _wait_time(self, tokens: int) -> float:
        waits = [self.pauses.resume_at - self._clock()]
        if self._requests:
            waits.append(self._requests.wait_time(1))
        if self._tokens:
            waits.append(self._tokens.wait_time(tokens))
        return max(waits)

    def acquire(self, tokens: int) -> None:
        with self._lock:
            while (wait := self._wait_time(tokens)) > 0:
                self.waited_seconds += wait
                self._sleep(wait)
            if self._requests:
                self._requests.take(1)
            if self._tokens:
                self._tokens.take(tokens)

    def settle(self, estimated: int, billed: int) -> None:
        """Refund or charge the difference once the billed tokens are known (0 on failure)."""
        if self._tokens:
            with self._lock:
                self._tokens.give(estimated - billed)

    def pause(self, seconds: float) -> None:
        self.pauses.pause(seconds)

    def observe(self, headers: Mapping[str, str]) -> None:
        self.pauses.observe(headers)
