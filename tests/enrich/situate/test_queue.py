"""The situating queue against `ScriptedLLM`: cache writes, faults, resume, limits, fallbacks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxr.enrich.situate import queue as queue_module
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.outline import outline_context
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.enrich.situate.results import Backoff, SituateResult
from ctxr.errors import ProviderError, StorageError
from ctxr.llm.base import Usage
from ctxr.llm.ratelimit import RateLimiter, RateLimits
from ctxr.types import Chunk, Document, text_hash
from tests.fakes.scripted_llm import ScriptedLLM, default_answer, words
from tests.fixtures.documents import Corpus, sectioned_corpus, sectioned_document
from tests.fixtures.progress import RecordingProgress

FAST = Backoff(initial=0.001, maximum=0.01)


def run(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    llm: ScriptedLLM,
    *,
    cache: ResponseCache | None = None,
    ledger: Ledger | None = None,
    concurrency: int = 32,
    limits: RateLimits | RateLimiter | None = None,
    max_document_tokens: int = 100_000,
    max_attempts: int = 6,
) -> dict[str, SituateResult]:
    return asyncio.run(
        situate_documents(
            documents,
            llm,
            ledger=ledger or Ledger(),
            prompt_version="test/1",
            count_tokens=words,
            cache=cache,
            limits=limits,
            concurrency=concurrency,
            max_document_tokens=max_document_tokens,
            max_attempts=max_attempts,
            backoff=FAST,
        )
    )


def all_chunks(documents: Corpus) -> list[Chunk]:
    return [c for _, chunks in documents for c in chunks]


def test_naive_concurrent_sends_write_the_cache_many_times() -> None:
    """The fake is faithful: requests sent together before any returns all write."""
    document, chunks = sectioned_document("naive", 8)
    llm = ScriptedLLM(min_cacheable_tokens=100)
    from ctxr.enrich.situate.prompt import SituateRequest

    async def naive() -> None:
        await asyncio.gather(
            *(llm.complete(SituateRequest(document.text, c.text).completion()) for c in chunks)
        )

    asyncio.run(naive())
    assert llm.writes[document.text] == 8


def test_one_cache_write_per_document_with_32_concurrent_requests() -> None:
    documents = sectioned_corpus(4, 8)  # 4 documents x 8 chunks = 32 requests, concurrency 32
    llm = ScriptedLLM(min_cacheable_tokens=100, latency=0.03)
    ledger = Ledger()
    results = run(documents, llm, ledger=ledger, concurrency=32)

    assert len(results) == 32 and all(r.kind == "llm" for r in results.values())
    assert [llm.writes[d.text] for d, _ in documents] == [1, 1, 1, 1]
    assert [llm.reads[d.text] for d, _ in documents] == [7, 7, 7, 7]
    # Many documents in flight at once: the 4 first requests went together, then the 28
    # reads overlapped (28 when timers fire in order; at least two documents' worth always).
    assert llm.max_in_flight >= 14
    first_calls = sorted(llm.calls, key=lambda c: c.started)[:4]
    assert {c.request.document for c in first_calls} == {d.text for d, _ in documents}
    summary = ledger.summary()
    assert summary.cache_writes == 4 and summary.requests == 32
    for document, _ in documents:
        account = ledger.documents[document.doc_id]
        assert account.cache_writes == 1
        assert account.usage.cache_write_tokens == words(document.text)
        assert account.usage.cache_read_tokens == 7 * words(document.text)


def test_concurrency_bounds_requests_not_documents() -> None:
    documents = sectioned_corpus(6, 5)
    llm = ScriptedLLM(min_cacheable_tokens=100, latency=0.02)
    results = run(documents, llm, concurrency=3)
    assert len(results) == 30
    assert llm.max_in_flight == 3
    assert llm.total_writes == 6


def test_ten_percent_faults_lose_no_chunk() -> None:
    documents = sectioned_corpus(5, 10, words_per_section=50)
    llm = ScriptedLLM(min_cacheable_tokens=100, latency=0.005, fault_rate=0.1, seed=7)
    ledger = Ledger()
    results = run(documents, llm, ledger=ledger, concurrency=16)

    assert len(results) == 50
    assert all(r.kind == "llm" and r.flagged is None for r in results.values())
    faults = sum(1 for c in llm.calls if c.outcome.startswith("error"))
    assert faults > 0 and len(ledger.retries) == faults and not ledger.failures
    assert ledger.requests == 50 and ledger.sent == 50 + faults  # answers; all sent


def test_a_run_killed_midway_resends_only_unanswered_chunks(tmp_path: Path) -> None:
    documents = sectioned_corpus(4, 8, words_per_section=50)
    ledger_file = tmp_path / "ledger.json"
    first = ScriptedLLM(min_cacheable_tokens=100, latency=0.02)

    async def killed() -> None:
        with ResponseCache(tmp_path / "cache") as cache:
            task = asyncio.create_task(
                situate_documents(
                    documents,
                    first,
                    ledger=Ledger(ledger_file),
                    prompt_version="test/1",
                    count_tokens=words,
                    cache=cache,
                    concurrency=4,
                    backoff=FAST,
                )
            )
            while first.completed < 10:
                await asyncio.sleep(0.001)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(killed())
    answered = first.completed
    assert 10 <= answered < 32
    written = json.loads(ledger_file.read_text())  # the ledger survives the kill
    assert written["summary"]["interrupted"] is True

    second = ScriptedLLM(min_cacheable_tokens=100, latency=0.001)
    with ResponseCache(tmp_path / "cache") as cache:
        assert len(cache) == answered
        results = run(documents, second, cache=cache)
    assert len(results) == 32
    assert len(second.calls) == 32 - answered
    answered_before = {c.request.chunk for c in first.calls if c.ended and c.outcome != ""}
    assert not answered_before & {c.request.chunk for c in second.calls}


def test_an_unchanged_corpus_costs_zero_requests(tmp_path: Path) -> None:
    documents = sectioned_corpus(3, 4)
    with ResponseCache(tmp_path / "cache") as cache:
        first = run(documents, ScriptedLLM(min_cacheable_tokens=100), cache=cache)
        again = ScriptedLLM(min_cacheable_tokens=100)
        ledger = Ledger()
        second = run(documents, again, cache=cache, ledger=ledger)
    assert again.calls == []
    assert ledger.response_cache_hits == 12 and ledger.requests == 0
    assert {k: v.context for k, v in first.items()} == {k: v.context for k, v in second.items()}
    assert all(r.from_cache for r in second.values())


def test_a_changed_document_is_asked_again(tmp_path: Path) -> None:
    documents = sectioned_corpus(2, 3)
    with ResponseCache(tmp_path / "cache") as cache:
        run(documents, ScriptedLLM(min_cacheable_tokens=100), cache=cache)
        edited = sectioned_document("doc1", 3)  # same chunks text? no: rebuild doc1 with a new tail
        doc, chunks = edited
        changed = Document(
            doc.doc_id, doc.source, doc.text + "\n", doc.kind, doc.title, text_hash(doc.text + "\n")
        )
        llm = ScriptedLLM(min_cacheable_tokens=100)
        run([documents[0], (changed, chunks)], llm, cache=cache)
    assert len(llm.calls) == 3  # only the changed document's chunks


def test_a_document_below_the_minimum_is_sent_without_a_cache_marker() -> None:
    small = sectioned_document("small", 3, words_per_section=20)  # ~66 words
    large = sectioned_document("large", 3, words_per_section=200)
    llm = ScriptedLLM(min_cacheable_tokens=300)
    ledger = Ledger()
    run([small, large], llm, ledger=ledger)

    small_calls = [c for c in llm.calls if c.request.document == small[0].text]
    large_calls = [c for c in llm.calls if c.request.document == large[0].text]
    assert [c.request.cache for c in small_calls] == [False] * 3
    assert all(c.request.cache for c in large_calls)
    assert ledger.documents["small.md"].to_json()["cached"] is False
    assert ledger.documents["large.md"].to_json()["cached"] is True
    assert ledger.summary().uncached_documents == 1
    assert ledger.documents["small.md"].usage.cache_write_tokens == 0


def test_retry_after_is_honoured_and_pauses_every_sender() -> None:
    documents = sectioned_corpus(3, 4, words_per_section=50)
    target = documents[1][1][2].text
    llm = ScriptedLLM(
        min_cacheable_tokens=100,
        latency=0.01,
        script={
            target: [ProviderError("rate limited", retryable=True, retry_after=0.3, status=429)]
        },
    )
    results = run(documents, llm, concurrency=4)

    assert results[documents[1][1][2].chunk_id].kind == "llm"
    failed, retried = llm.requests_for(target)
    assert failed.ended is not None
    assert retried.started - failed.ended >= 0.29
    # The shared cooldown: nobody started a request while it was in force.
    assert not [c for c in llm.calls if failed.ended < c.started < failed.ended + 0.29]


def test_a_permanently_failing_chunk_falls_back_and_the_others_go_on() -> None:
    documents = sectioned_corpus(2, 4, words_per_section=50)
    bad = documents[0][1][0]  # the document's FIRST chunk: its other chunks must still go
    llm = ScriptedLLM(
        min_cacheable_tokens=100,
        always_fail={bad.text: ProviderError("invalid request", retryable=False, status=400)},
    )
    ledger = Ledger()
    results = run(documents, llm, ledger=ledger)

    failed = results[bad.chunk_id]
    assert failed.kind == "outline" and failed.context == outline_context(documents[0][0], bad)
    assert failed.flagged == "failed: 400 invalid request" and failed.error == "400 invalid request"
    assert len(llm.requests_for(bad.text)) == 1  # not retryable: asked once
    assert ledger.failures == [(bad.chunk_id, "400 invalid request")]
    others = [r for cid, r in results.items() if cid != bad.chunk_id]
    assert len(others) == 7 and all(r.kind == "llm" for r in others)


def test_retryable_failures_stop_after_max_attempts() -> None:
    documents = sectioned_corpus(1, 2, words_per_section=50)
    chunk = documents[0][1][1]
    llm = ScriptedLLM(
        min_cacheable_tokens=100,
        always_fail={chunk.text: ProviderError("overloaded", retryable=True, status=529)},
    )
    ledger = Ledger()
    results = run(documents, llm, ledger=ledger, max_attempts=3)
    assert len(llm.requests_for(chunk.text)) == 3
    assert results[chunk.chunk_id].flagged == "failed: 529 overloaded"
    assert len(ledger.retries) == 2 and len(ledger.failures) == 1


@pytest.mark.parametrize(
    ("garbage", "flag"),
    [
        ("", "empty response"),
        ("I cannot help with that request.", "not a context"),
        ("word " * 5000, "too long"),
    ],
)
def test_garbage_is_retried_once_then_outline_flagged(
    garbage: str, flag: str, tmp_path: Path
) -> None:
    documents = sectioned_corpus(1, 3, words_per_section=50)
    chunk = documents[0][1][1]
    llm = ScriptedLLM(min_cacheable_tokens=100, script={chunk.text: [garbage, garbage]})
    ledger = Ledger()
    with ResponseCache(tmp_path / "cache") as cache:
        results = run(documents, llm, ledger=ledger, cache=cache)
        assert len(llm.requests_for(chunk.text)) == 2
        assert results[chunk.chunk_id].kind == "outline"
        assert results[chunk.chunk_id].flagged == flag
        assert ledger.flagged == [(chunk.chunk_id, flag)]
        assert not ledger.summary().unusable  # one of three: the run is not a failure
        again = ScriptedLLM(min_cacheable_tokens=100)
        rerun = run(documents, again, cache=cache)  # no answer was cached: asked again
    assert [c.request.chunk for c in again.calls] == [chunk.text]
    assert rerun[chunk.chunk_id].kind == "llm" and rerun[chunk.chunk_id].flagged is None


def test_a_model_whose_answers_are_no_context_makes_the_run_unusable(tmp_path: Path) -> None:
    documents = sectioned_corpus(2, 3, words_per_section=50)
    llm = ScriptedLLM(min_cacheable_tokens=100, answer=lambda request: "c9")
    ledger = Ledger()
    with ResponseCache(tmp_path / "cache") as cache:
        results = run(documents, llm, ledger=ledger, cache=cache)
        assert len(cache) == 0  # nothing that is no context is kept as one
    assert all(r.kind == "outline" and r.flagged == "not a context" for r in results.values())
    summary = ledger.summary()
    assert summary.unusable and summary.flagged == 6 and summary.contexts == 0
    assert summary.first_flag is not None and "chunk ids echoed" in summary.first_flag
    assert "answered 6 of the 6 chunks asked with no context" in summary.unusable_notice()


def test_garbage_once_then_a_good_answer_is_kept() -> None:
    documents = sectioned_corpus(1, 2, words_per_section=50)
    chunk = documents[0][1][0]
    echo = chunk.text  # the chunk copied back: not a context
    llm = ScriptedLLM(min_cacheable_tokens=100, script={chunk.text: [echo]})
    results = run(documents, llm)
    assert results[chunk.chunk_id].kind == "llm"
    assert len(llm.requests_for(chunk.text)) == 2


def test_long_documents_are_windowed_and_blocks_share_prefixes() -> None:
    document, chunks = sectioned_document("long", 12, words_per_section=100)  # ~1,224 words
    llm = ScriptedLLM(min_cacheable_tokens=100)
    ledger = Ledger()
    results = run([(document, chunks)], llm, ledger=ledger, max_document_tokens=400)

    assert len(results) == 12 and all(r.kind == "llm" for r in results.values())
    prefixes = {c.request.document for c in llm.calls}
    assert len(prefixes) > 1
    for prefix in prefixes:
        assert words(prefix) <= 400
        assert prefix.startswith("Document: Long (docs/long.md)")
        assert llm.writes[prefix] == 1  # each block is its own cached "document"
    for call in llm.calls:  # each chunk is sent with the block that holds it
        assert call.request.chunk in call.request.document
    assert ledger.documents["long.md"].prefixes == len(prefixes)
    assert ledger.documents["long.md"].cache_writes == len(prefixes)


def test_rate_limit_headers_at_zero_pause_until_reset() -> None:
    documents = sectioned_corpus(1, 3, words_per_section=50)
    sent = {"n": 0}

    def headers() -> dict[str, str]:
        sent["n"] += 1
        if sent["n"] == 1:
            return {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "200ms"}
        return {"x-ratelimit-remaining-requests": "10", "x-ratelimit-reset-requests": "1s"}

    llm = ScriptedLLM(min_cacheable_tokens=100, headers=headers)
    run(documents, llm)
    first, *rest = llm.calls
    assert first.ended is not None
    assert all(c.started - first.ended >= 0.19 for c in rest)


def test_ledger_json_and_dollars(tmp_path: Path) -> None:
    documents = sectioned_corpus(2, 3)
    path = tmp_path / "ledgers" / "run.json"

    def cost(usage: Usage) -> float:
        return usage.input_tokens * 1e-6 + usage.cache_read_tokens * 1e-7

    ledger = Ledger(path, cost=cost)
    run(documents, ScriptedLLM(min_cacheable_tokens=100), ledger=ledger)
    written = json.loads(path.read_text())
    assert written["summary"]["requests"] == 6
    assert written["summary"]["dollars"] == pytest.approx(cost(ledger.usage))
    assert written["summary"]["interrupted"] is False
    assert set(written["documents"]) == {"doc0.md", "doc1.md"}


def test_written_prefixes_are_finished_before_new_documents_start() -> None:
    """Follow-ups outrank first requests, so at most about 2 x concurrency documents are half
    done at any moment (their prefixes still in the provider's cache), not the whole corpus.
    Measured: 4 / 8 / 16 open at concurrency 2 / 4 / 8 over 40 documents; FIFO slots open 40."""
    documents = sectioned_corpus(12, 5, words_per_section=50)
    llm = ScriptedLLM(min_cacheable_tokens=100, latency=0.005)
    run(documents, llm, concurrency=2)
    remaining = {d.text: 5 for d, _ in documents}
    open_documents: set[str] = set()
    most = 0
    for call in sorted(llm.calls, key=lambda c: c.started):
        open_documents.add(call.request.document)
        most = max(most, len(open_documents))
        remaining[call.request.document] -= 1
        if remaining[call.request.document] == 0:
            open_documents.discard(call.request.document)
    assert most <= 4
    assert llm.total_writes == 12


def test_progress_counts_chunks_and_ends_with_a_summary_line() -> None:
    documents = sectioned_corpus(3, 4)
    progress = RecordingProgress()
    asyncio.run(
        situate_documents(
            documents,
            ScriptedLLM(min_cacheable_tokens=100),
            ledger=Ledger(cost=lambda u: u.cache_read_tokens * 1e-6),
            prompt_version="test/1",
            count_tokens=words,
            progress=progress,
        )
    )
    assert progress.started == [("contexts", 12)] and progress.advanced == 12
    assert progress.notes[-1].startswith("contexts: 3/3 documents, 12 chunks, 12 requests")
    assert "cache reads" in progress.notes[-1] and "$" in progress.notes[-1]


def test_the_ledger_is_written_as_the_run_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run killed without a chance to clean up (kill -9) still leaves its spend on record.
    monkeypatch.setattr(queue_module, "NOTE_EVERY_SECONDS", 0.0)
    ledger_file = tmp_path / "ledger.json"
    seen: list[dict[str, object]] = []

    def answer(request: Any) -> str:
        if ledger_file.exists():
            seen.append(json.loads(ledger_file.read_text())["summary"])
        return default_answer(request)

    llm = ScriptedLLM(min_cacheable_tokens=100, answer=answer)
    documents = sectioned_corpus(2, 6, words_per_section=50)
    run(documents, llm, ledger=Ledger(ledger_file), concurrency=2)
    assert seen and all(s["interrupted"] is True for s in seen)  # mid-run snapshots
    assert max(int(str(s["requests"])) for s in seen) > 1
    final = json.loads(ledger_file.read_text())["summary"]
    assert final["interrupted"] is False and final["requests"] == 12


def test_a_disk_that_fills_mid_run_is_a_storage_error_and_every_answer_before_stays(
    tmp_path: Path,
) -> None:
    """The response cache refusing a write (a full disk: SQLite's own page limit, the same
    "database or disk is full" a real one gives) stops the run with the named error, not an
    ExceptionGroup traceback out of the queue's task group, and keeps what was written."""
    documents = sectioned_corpus(4, 6, words_per_section=60)
    with ResponseCache(tmp_path / "cache") as cache:
        cache.put("first", "an answer paid for before the disk filled " * 4)
        pages = int(cache._cache._sql("PRAGMA page_count").fetchone()[0])
        cache._cache.reset("sqlite_max_page_count", pages)  # the disk is full from here
        with pytest.raises(StorageError, match="LLM response cache"):
            run(documents, ScriptedLLM(min_cacheable_tokens=100), cache=cache, concurrency=4)
        cache._cache.reset("sqlite_max_page_count", 2**30)  # room again
    with ResponseCache(tmp_path / "cache") as cache:  # room again: nothing was set aside
        assert cache.get("first") is not None
        results = run(documents, ScriptedLLM(min_cacheable_tokens=100), cache=cache)
    assert set(results) == {c.chunk_id for c in all_chunks(documents)}
    assert not any(r.flagged for r in results.values())
    assert not list(tmp_path.glob("cache.damaged-*"))
