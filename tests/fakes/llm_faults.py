"""Fault plan, server-side rate limit and latency models of the fake LLM server."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

# "429", "529", "500": an error in the provider's shape (OpenAI answers 503 for "529").
# "slow": the normal answer, after `delay_s` more seconds (beyond a client timeout).
# "drop": the connection is closed after the request is read, with no response.
# "malformed": 200 with a body that is not JSON; "wrong_shape": 200, JSON of the wrong shape.
# "drip": 200 and a large Content-Length, then one byte every `drip_interval_s` for `delay_s`
# seconds (each read is quick, so a per-read timeout never fires; then the connection closes).
# "huge": 200 with a well-formed answer whose text is `huge_bytes` long (a server that
# ignores the output budget).
FAULTS = ("429", "529", "500", "slow", "drop", "malformed", "wrong_shape", "drip", "huge")
# What `fault_rate` draws from by default: the transient faults a real provider shows.
RANDOM_FAULTS = ("429", "529", "500", "drop")


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    retry_after_s: float = 1.0  # for "429": the retry-after header
    delay_s: float = 30.0  # for "slow": extra seconds before the answer


@dataclass(frozen=True, slots=True)
class Tokens:
    """What a latency model sees of a request (Anthropic's split; OpenAI's uncached part is
    prompt - cached, and it has no separate write count)."""

    uncached: int
    cache_write: int
    cache_read: int
    output: int


Latency = float | Callable[[Tokens], float]


def realistic_latency(
    base_s: float = 0.3,
    per_output_token_s: float = 0.008,
    per_input_token_s: float = 2e-5,
    per_cached_token_s: float = 2e-6,
    scale: float = 1.0,
) -> Callable[[Tokens], float]:
    """Time to first token plus decoding; cache reads are about ten times cheaper to prefill.
    ``scale`` shrinks everything for a fast benchmark."""

    def latency(t: Tokens) -> float:
        prefill = (t.uncached + t.cache_write) * per_input_token_s
        return scale * (
            base_s + prefill + t.cache_read * per_cached_token_s + t.output * per_output_token_s
        )

    return latency


def latency_for(latency: Latency, tokens: Tokens) -> float:
    return max(0.0, latency(tokens) if callable(latency) else float(latency))


@dataclass(slots=True)
class _Scripted:
    fault: Fault
    left: int


class FaultPlan:
    """Scripted faults first (FIFO, each `times` requests), then random ones at `rate`."""

    def __init__(
        self,
        rate: float = 0.0,
        kinds: Iterable[str] = RANDOM_FAULTS,
        seed: int = 0,
        retry_after_s: float = 1.0,
        slow_s: float = 30.0,
    ) -> None:
        self.kinds = tuple(kinds)
        for kind in self.kinds:
            _check(kind)
        self.rate, self.seed = rate, seed
        self.retry_after_s, self.slow_s = retry_after_s, slow_s
        self._rng = random.Random(seed)
        self._script: deque[_Scripted] = deque()

    def inject(
        self,
        kind: str,
        times: int = 1,
        *,
        retry_after_s: float | None = None,
        delay_s: float | None = None,
    ) -> None:
        _check(kind)
        fault = Fault(
            kind,
            self.retry_after_s if retry_after_s is None else retry_after_s,
            self.slow_s if delay_s is None else delay_s,
        )
        if times > 0:
            self._script.append(_Scripted(fault, times))

    @property
    def pending(self) -> int:
        """Scripted faults not yet served."""
        return sum(entry.left for entry in self._script)

    def next(self) -> Fault | None:
        if self._script:
            entry = self._script[0]
            entry.left -= 1
            if entry.left <= 0:
                self._script.popleft()
            return entry.fault
        if self.rate > 0 and self._rng.random() < self.rate:
            kind = self._rng.choice(self.kinds)
            return Fault(kind, self.retry_after_s, self.slow_s)
        return None

    def clear(self) -> None:
        self._script.clear()
        self._rng = random.Random(self.seed)


def _check(kind: str) -> None:
    if kind not in FAULTS:
        raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(FAULTS)}")


@dataclass(frozen=True, slots=True)
class Admission:
    allowed: bool
    limit: int
    remaining: int
    retry_after_s: float  # 0 when allowed
    reset_s: float  # until the bucket is full again (allowed) or a request fits (refused)


class RateLimiter:
    """A token bucket, as both providers describe theirs: ``rpm`` requests a minute refilled
    continuously, at most ``burst`` at once (default: one second's worth, at least 1)."""

    def __init__(self, rpm: float, burst: float | None, clock: Callable[[], float]) -> None:
        if rpm <= 0:
            raise ValueError("rpm must be positive")
        self.rpm, self._rate = rpm, rpm / 60.0
        self.capacity = max(1.0, burst if burst is not None else self._rate)
        self._clock = clock
        self._tokens, self._last = self.capacity, clock()

    def admit(self) -> Admission:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            reset = (self.capacity - self._tokens) / self._rate
            return Admission(True, int(self.rpm), int(self._tokens), 0.0, reset)
        wait = math.ceil((1.0 - self._tokens) / self._rate * 1000) / 1000
        return Admission(False, int(self.rpm), 0, wait, wait)

    def reset(self) -> None:
        self._tokens, self._last = self.capacity, self._clock()


def format_duration(seconds: float) -> str:
    """OpenAI's reset-header format: "20ms", "8.64s", "1m30s"."""
    if seconds < 1:
        return f"{max(1, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def format_retry_after(seconds: float) -> str:
    """Whole seconds as real servers send them; fractions (fast tests) to the millisecond."""
    if seconds == int(seconds):
        return str(int(seconds))
    return f"{math.ceil(seconds * 1000) / 1000:.3f}"
