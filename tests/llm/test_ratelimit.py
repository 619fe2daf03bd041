"""Token buckets, shared cooldowns, rate-limit headers and priority slots, on a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ctxr.llm.base import Usage
from ctxr.llm.ratelimit import PrioritySlots, RateLimiter, RateLimits, reset_seconds

WALL = 1_800_000_000.0


class FakeClock:
    """Monotonic time that moves only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def limiter(limits: RateLimits) -> tuple[RateLimiter, FakeClock]:
    clock = FakeClock()
    return RateLimiter(limits, clock=clock, sleep=clock.sleep, wall=lambda: WALL + clock.now), clock


def run(body: Callable[[], Coroutine[Any, Any, object]]) -> None:
    asyncio.run(body())


def test_requests_per_minute_burst_then_steady_rate() -> None:
    limits, clock = limiter(RateLimits(requests_per_minute=60, burst_seconds=5))
    times: list[float] = []

    async def body() -> None:
        async def one() -> None:
            await limits.acquire(10, 10)
            times.append(clock.now)

        await asyncio.gather(*(one() for _ in range(9)))

    run(body)
    assert times == pytest.approx([0, 0, 0, 0, 0, 1, 2, 3, 4])


def test_input_token_bucket_and_settling_with_actual_usage() -> None:
    limits, clock = limiter(RateLimits(input_tokens_per_minute=6000, burst_seconds=1))  # 100/s

    async def body() -> None:
        first = await limits.acquire(50, 0)
        await limits.acquire(50, 0)
        assert clock.now == 0
        await limits.acquire(50, 0)  # the bucket is empty: half a second for 50 tokens
        assert clock.now == pytest.approx(0.5)
        # The first request really used 10 tokens: 40 come back, enough for the next at once.
        limits.settle(first, Usage(input_tokens=10))
        await limits.acquire(40, 0)
        assert clock.now == pytest.approx(0.5)

    run(body)


def test_a_request_larger_than_the_bucket_waits_for_a_full_one_and_leaves_debt() -> None:
    limits, clock = limiter(RateLimits(input_tokens_per_minute=6000, burst_seconds=1))

    async def body() -> None:
        await limits.acquire(300, 0)  # full bucket (100): goes now, 200 in debt
        assert clock.now == 0
        await limits.acquire(10, 0)
        assert clock.now == pytest.approx(2.1)

    run(body)


def test_output_tokens_are_corrected_after_the_response() -> None:
    limits, clock = limiter(RateLimits(output_tokens_per_minute=600, burst_seconds=10))  # 10/s

    async def body() -> None:
        ticket = await limits.acquire(0, 100)
        limits.settle(ticket, Usage(output_tokens=150))  # 50 more than estimated
        await limits.acquire(0, 50)
        assert clock.now == pytest.approx(10.0)

    run(body)


def test_cache_reads_count_only_when_configured() -> None:
    usage = Usage(input_tokens=10, cache_read_tokens=1000)
    # 990 left after the first; the 1,000 reads cost 10 s more when they count.
    for counted, expected_wait in ((False, 0.1), (True, 10.1)):
        limits, clock = limiter(
            RateLimits(input_tokens_per_minute=6000, burst_seconds=10, cache_reads_count=counted)
        )

        async def body(limits: RateLimiter = limits) -> None:
            ticket = await limits.acquire(10, 0)
            limits.settle(ticket, usage)
            await limits.acquire(1000, 0)

        run(body)
        assert clock.now == pytest.approx(expected_wait)


def test_pause_stops_every_sender_and_is_never_shortened() -> None:
    limits, clock = limiter(RateLimits())

    async def body() -> None:
        limits.pause(3.0)
        limits.pause(1.0)  # a shorter pause does not shorten the cooldown
        started = await asyncio.gather(*(limits.acquire(1, 1) for _ in range(3)))
        assert len(started) == 3
        assert clock.now == pytest.approx(3.0)

    run(body)
    assert limits.pauses == 1


def test_pause_during_a_wait_is_honoured() -> None:
    limits, clock = limiter(RateLimits(requests_per_minute=60, burst_seconds=1))

    async def body() -> None:
        await limits.acquire(1, 1)
        waiter = asyncio.create_task(limits.acquire(1, 1))  # would go at t=1
        await asyncio.sleep(0)
        limits.pause(5.0)
        await waiter
        assert clock.now >= 5.0

    run(body)


def test_openai_headers_at_zero_pause_until_reset() -> None:
    limits, clock = limiter(RateLimits())
    limits.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"})
    limits.observe({"x-ratelimit-remaining-tokens": "3000", "x-ratelimit-reset-tokens": "9s"})
    assert limits.resume_at == pytest.approx(1.5)
    run(lambda: limits.acquire(1, 1))
    assert clock.now == pytest.approx(1.5)


def test_anthropic_headers_at_zero_pause_until_the_rfc3339_reset() -> None:
    limits, _ = limiter(RateLimits())
    reset = datetime.fromtimestamp(WALL, UTC) + timedelta(seconds=4)
    limits.observe(
        {
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": reset.isoformat().replace("+00:00", "Z"),
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": reset.isoformat(),
        }
    )
    assert limits.resume_at == pytest.approx(4.0)


def test_with_the_limit_known_a_header_pause_lasts_one_request_not_a_full_refill() -> None:
    limits, _ = limiter(RateLimits())
    limits.observe(
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",  # the whole bucket refilled: 1 s
        }
    )
    assert limits.resume_at == pytest.approx(0.1)  # one request's share: 60 s / 600


def test_header_pauses_are_capped() -> None:
    limits, _ = limiter(RateLimits(max_pause_seconds=60))
    limits.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"})
    assert limits.resume_at == pytest.approx(60.0)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("20ms", 0.02), ("1s", 1.0), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("2.5", 2.5)],
)
def test_reset_durations(value: str, seconds: float) -> None:
    assert reset_seconds(value, WALL) == pytest.approx(seconds)


def test_unparseable_reset_is_ignored() -> None:
    assert reset_seconds("soon", WALL) is None
    limits, _ = limiter(RateLimits())
    limits.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "soon"})
    assert limits.resume_at == 0.0


def test_priority_slots_admit_the_lowest_priority_first() -> None:
    order: list[tuple[int, int]] = []

    async def body() -> None:
        slots = PrioritySlots(1)
        await slots.acquire((0, 0))

        async def wait(priority: tuple[int, int]) -> None:
            await slots.acquire(priority)
            order.append(priority)
            slots.release()

        tasks = [asyncio.create_task(wait(p)) for p in [(1, 0), (0, 5), (1, 1), (0, 2)]]
        cancelled = asyncio.create_task(wait((0, 1)))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        slots.release()
        await asyncio.gather(*tasks)

    run(body)
    assert order == [(0, 2), (0, 5), (1, 0), (1, 1)]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RateLimiter(RateLimits(requests_per_minute=0))
    with pytest.raises(ValueError, match="at least 1"):
        PrioritySlots(0)
