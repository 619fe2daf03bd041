"""`SyncRateLimiter`: client-side requests and tokens per minute for sync senders.

`ctxr.enrich.ratelimit.RateLimiter.acquire` is a coroutine behind an ``asyncio.Lock``, and the
indexer embeds from sync code where no event loop runs, so this takes the same `TokenBucket`s
under a threading lock and waits with ``time.sleep``. Pauses (a ``retry-after``, rate-limit
headers saying nothing is left) go through a `RateLimiter`'s ``pause`` and ``observe``, which
are sync: headers mean the same for the embedding calls as for the LLM calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from ctxr.enrich.ratelimit import RateLimiter, RateLimits, TokenBucket


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
