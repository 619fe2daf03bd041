"""How long the situating queue waits when a provider says "retry after", and what it says.

A wait up to `max_retry_wait` is honoured (every sender pauses) and announced; a longer one is
not waited for: the run gives up on its remaining requests at once, says what the provider
asked and what ctxr did, and the ledger counts only the requests that were answered.
Each run is bounded by the test (`asyncio.wait_for`) so a queue that waits as asked fails the
test instead of hanging it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.results import Backoff, SituateResult
from ctxr.errors import ProviderError
from ctxr.llm.ratelimit import RateLimiter
from ctxr.types import Chunk, Document
from tests.fakes.scripted_llm import ScriptedLLM, words
from tests.fixtures.documents import sectioned_corpus
from tests.fixtures.progress import RecordingProgress

CAP_SECONDS = 10.0


class FakeTime:
    """A clock that moves only when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _run(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    llm: ScriptedLLM,
    ledger: Ledger,
    progress: RecordingProgress,
    time: FakeTime,
    *,
    max_retry_wait: float = 60.0,
) -> dict[str, SituateResult]:
    limiter = RateLimiter(clock=time.clock, sleep=time.sleep)
    work = situate_documents(
        documents, llm, ledger=ledger, prompt_version="test/1", count_tokens=words,
        limits=limiter, concurrency=1, progress=progress, sleep=time.sleep,
        backoff=Backoff(initial=0.001, maximum=0.01), max_retry_wait=max_retry_wait,
    )  # fmt: skip

    async def bounded() -> dict[str, SituateResult]:
        return await asyncio.wait_for(work, CAP_SECONDS)

    return asyncio.run(bounded())


def _refusal(seconds: float) -> ProviderError:
    return ProviderError(
        f"Anthropic rate limit reached (HTTP 429, retry after {seconds:g}s)",
        retryable=True,
        retry_after=seconds,
        status=429,
    )


def test_a_wait_longer_than_the_cap_gives_up_at_once_and_says_so() -> None:
    documents = sectioned_corpus(2, 3, words_per_section=50)
    chunks = [c for _, cs in documents for c in cs]
    llm = ScriptedLLM(
        min_cacheable_tokens=100, always_fail={c.text: _refusal(3600) for c in chunks}
    )
    ledger, progress, time = Ledger(), RecordingProgress(), FakeTime()
    results = _run(documents, llm, ledger, progress, time)

    assert len(llm.calls) == 1  # refused once: nothing more is sent this run
    assert all(r.kind == "outline" for r in results.values())
    assert all("CTXR_LLM_MAX_RETRY_WAIT" in (r.flagged or "") for r in results.values())
    assert not [s for s in time.slept if s > 60]  # never waited what it was asked
    said = [n for n in progress.notes if "asked to wait 3600 s" in n]
    assert len(said) == 1 and "60 s (CTXR_LLM_MAX_RETRY_WAIT)" in said[0]
    summary = ledger.summary()
    assert summary.requests == 0 and summary.sent == 1  # a refusal is not an answer
    assert summary.failures == len(chunks)


def test_a_wait_within_the_cap_is_honoured_and_announced() -> None:
    documents = sectioned_corpus(1, 2, words_per_section=50)
    first = documents[0][1][0]
    llm = ScriptedLLM(min_cacheable_tokens=100, script={first.text: [_refusal(30)]})
    ledger, progress, time = Ledger(), RecordingProgress(), FakeTime()
    results = _run(documents, llm, ledger, progress, time)

    assert all(r.kind == "llm" for r in results.values())
    assert time.now >= 30  # the pause every sender waited
    said = [n for n in progress.notes if "asked to wait 30 s" in n]
    assert len(said) == 1 and "retrying" in said[0]
    summary = ledger.summary()
    assert summary.requests == 2 and summary.sent == 3  # two answers, one refusal


def test_the_cap_is_a_setting() -> None:
    documents = sectioned_corpus(1, 1, words_per_section=50)
    chunk = documents[0][1][0]
    llm = ScriptedLLM(min_cacheable_tokens=100, script={chunk.text: [_refusal(300)]})
    ledger, progress, time = Ledger(), RecordingProgress(), FakeTime()
    results = _run(documents, llm, ledger, progress, time, max_retry_wait=600)
    assert results[chunk.chunk_id].kind == "llm" and time.now >= 300


def test_rate_limit_headers_that_pause_the_run_are_announced() -> None:
    documents = sectioned_corpus(1, 2, words_per_section=50)
    exhausted = {
        "anthropic-ratelimit-tokens-remaining": "0",
        "anthropic-ratelimit-tokens-reset": "3600",
    }
    llm = ScriptedLLM(min_cacheable_tokens=100, headers=exhausted)
    ledger, progress, time = Ledger(), RecordingProgress(), FakeTime()
    results = _run(documents, llm, ledger, progress, time)
    assert all(r.kind == "llm" for r in results.values())
    said = [n for n in progress.notes if "rate-limit headers say nothing is left" in n]
    assert said and "waits 300 s" in said[0]  # the limiter's own cap, said
