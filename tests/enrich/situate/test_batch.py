"""Batch situating (`ctxr index --batch`): the real Anthropic and OpenAI SDKs against the fake
server's Message Batches and Files + Batches, through the queue and through `build_index`."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.batch import BatchOptions
from ctxr.enrich.situate.batch_journal import JOURNAL_DIR
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.results import SituateResult
from ctxr.llm.base import LLM
from ctxr.llm.pricing import load_prices
from ctxr.llm.registry import make_llm
from ctxr.pipeline.build import build_index
from ctxr.pipeline.estimate import estimate_paths
from ctxr.pipeline.report import IndexReport
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest
from tests.fixtures.documents import sectioned_corpus, sectioned_document
from tests.fixtures.environment import use_fake_llm
from tests.fixtures.progress import RecordingProgress

MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}
# Haiku 4.5 caches from 4,096 tokens: 200-word sections of 30 chunks reach it, 3 do not.
CACHED, UNCACHED = sectioned_corpus(2, 30), sectioned_corpus(1, 3)


def _llm(server: FakeLLMServer, provider: str) -> LLM:
    base = server.anthropic_base_url if provider == "anthropic" else server.openai_base_url
    return make_llm(provider, MODELS[provider], api_key="test", base_url=base)


def _situate(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    server: FakeLLMServer,
    provider: str,
    journal: Path | None,
    ledger: Ledger | None = None,
    **options: Any,
) -> dict[str, SituateResult]:
    async def go() -> dict[str, SituateResult]:
        llm = _llm(server, provider)
        try:
            return await situate_documents(
                documents,
                llm,
                ledger=ledger or Ledger(),
                prompt_version="test",
                count_tokens=count_tokens,
                group_size=8,
                batch=BatchOptions(journal, poll_seconds=0.01, linger_seconds=0, **options),
            )
        finally:
            await llm.aclose()

    return asyncio.run(go())


def _generated(server: FakeLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.endpoint in ("messages", "chat.completions")]


def _all_chunks(documents: Sequence[tuple[Document, Sequence[Chunk]]]) -> list[Chunk]:
    return [c for _, chunks in documents for c in chunks]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_batch_run_writes_each_document_once_then_reads_it_an_hour_later(
    fake_llm_factory: Callable[..., FakeLLMServer], provider: str, tmp_path: Path
) -> None:
    # Each batch takes 10 minutes of server time: longer than a 5-minute cache entry lives.
    server = fake_llm_factory(batch_delay_s=600)
    ledger = Ledger()
    documents = CACHED + UNCACHED

    async def clock() -> None:
        while True:
            await asyncio.sleep(0.01)
            server.advance(60)

    async def go() -> dict[str, SituateResult]:
        ticking = asyncio.create_task(clock())
        llm = _llm(server, provider)
        try:
            return await situate_documents(
                documents,
                llm,
                ledger=ledger,
                prompt_version="test",
                count_tokens=count_tokens,
                group_size=8,
                batch=BatchOptions(tmp_path / JOURNAL_DIR, poll_seconds=0.01, linger_seconds=0),
            )
        finally:
            ticking.cancel()
            await llm.aclose()

    results = asyncio.run(go())
    chunks = _all_chunks(documents)
    assert {r.chunk_id for r in results.values() if r.kind == "llm"} == {c.chunk_id for c in chunks}
    for chunk in chunks:  # matched by custom_id although results come back shuffled
        assert chunk.text.split()[3] in results[chunk.chunk_id].context
    sent = _generated(server)
    assert all(r.batch_id and r.status == 200 for r in sent)
    # The first request of each cached document goes alone in batch one with the uncached
    # document's request; the follow-ups in batch two.
    per_batch = Counter(r.batch_id for r in sent)
    assert sorted(per_batch.values()) == [3, 6] and server.batches.creates == 2
    summary = ledger.summary()
    assert summary.batch is not None and summary.batch.submitted == 2
    assert summary.requests == len(sent) == 9 and summary.failures == summary.retries == 0
    if provider == "anthropic":
        marked = [r for r in sent if "cache_control" in json.dumps(r.body)]
        assert all('"ttl": "1h"' in json.dumps(r.body) for r in marked) and len(marked) == 8
        assert sorted(server.cache_writes_by_prefix().values()) == [1, 1]
        assert summary.cache_write_1h_tokens > 0 and summary.cache_write_tokens == 0
        reads = [r for r in sent if r.cache_read]
        assert len(reads) == 6  # every follow-up read its document, 10 minutes on
        price = load_prices().get(MODELS[provider])
        usage = ledger.usage
        assert price.cost(usage, batch=True) == pytest.approx(price.cost(usage) / 2)
    assert not list((tmp_path / JOURNAL_DIR).glob("*.json"))  # a finished run keeps none


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_killed_batch_run_started_again_submits_nothing_twice(
    fake_llm_factory: Callable[..., FakeLLMServer], provider: str, tmp_path: Path
) -> None:
    server = fake_llm_factory(batch_delay_s=3600)
    journal = tmp_path / JOURNAL_DIR
    documents = CACHED + UNCACHED

    async def killed() -> None:
        llm = _llm(server, provider)
        task = asyncio.create_task(
            situate_documents(
                documents,
                llm,
                ledger=Ledger(),
                prompt_version="test",
                count_tokens=count_tokens,
                group_size=8,
                batch=BatchOptions(journal, poll_seconds=0.01, linger_seconds=0),
            )
        )
        while not list(journal.glob("*.json")):  # submitted, and the id is on record
            await asyncio.sleep(0.01)
        task.cancel()  # the run dies with its first batch submitted and not ended
        await asyncio.gather(task, return_exceptions=True)
        await llm.aclose()

    asyncio.run(killed())
    assert len(list(journal.glob("*.json"))) == 1 and not _generated(server)
    server.advance(3600)  # the batch ends while no run is watching
    server.batches.delay_s = 0  # and the next ones end at once
    ledger = Ledger()
    results = _situate(documents, server, provider, journal, ledger)
    assert all(r.kind == "llm" for r in results.values())
    custom_ids = [r.custom_id for r in _generated(server)]
    assert len(custom_ids) == len(set(custom_ids)) == 9  # each request ran once, in all
    summary = ledger.summary()
    assert summary.batch is not None and summary.batch.resumed == 1
    assert summary.batch.submitted == 1  # only the follow-ups were new
    assert server.batches.creates == 2
    assert not list(journal.glob("*.json"))  # finished: the answers are the caller's now


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_errored_and_expired_requests_go_into_a_later_batch_canceled_ones_fall_back(
    fake_llm_factory: Callable[..., FakeLLMServer], provider: str
) -> None:
    server = fake_llm_factory()
    server.inject_batch("errored")
    server.inject_batch("expired")
    ledger = Ledger()
    results = _situate([*UNCACHED, sectioned_document("other", 2)], server, provider, None, ledger)
    assert all(r.kind == "llm" for r in results.values())
    summary = ledger.summary()
    assert summary.batch is not None
    assert (summary.batch.errored, summary.batch.expired, summary.retries) == (1, 1, 2)
    assert server.batches.creates == 2 and summary.failures == 0
    server.inject_batch("canceled")
    server.inject_batch("invalid")
    ledger = Ledger()
    results = _situate(sectioned_corpus(2, 2), server, provider, None, ledger)
    failed = [r for r in results.values() if r.kind == "outline"]
    assert len(failed) == 4 and all((r.flagged or "").startswith("failed") for r in failed)
    assert "canceled" in (failed[0].error or "") + (failed[2].error or "")
    summary = ledger.summary()
    assert summary.batch is not None and summary.batch.canceled == 1
    assert summary.retries == 0 and summary.failures == 4  # neither is asked again


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_requests_beyond_the_batch_limit_go_in_further_batches(
    fake_llm_factory: Callable[..., FakeLLMServer], provider: str
) -> None:
    server = fake_llm_factory(batch_max_requests=2)
    ledger = Ledger()
    documents = sectioned_corpus(5, 2)
    results = _situate(documents, server, provider, None, ledger, max_requests=2)
    assert all(r.kind == "llm" for r in results.values()) and len(results) == 10
    assert server.batches.creates == 3 and ledger.summary().requests == 5


def test_a_server_without_a_batch_api_is_named_and_the_run_goes_on(
    fake_llm_factory: Callable[..., FakeLLMServer],
) -> None:
    server = fake_llm_factory(batch_api=False)
    ledger = Ledger()
    results = _situate(UNCACHED, server, "openai", None, ledger)
    assert all(r.kind == "outline" for r in results.values())
    assert all("no batch API" in (r.error or "") for r in results.values())
    assert ledger.summary().failures == len(results) and not _generated(server)


def test_a_damaged_journal_file_is_set_aside_and_named(
    fake_llm_factory: Callable[..., FakeLLMServer], tmp_path: Path
) -> None:
    journal = tmp_path / JOURNAL_DIR
    journal.mkdir()
    (journal / "msgbatch_x.json").write_text('{"batch_id": "msgbatch_x", "provi')
    progress = RecordingProgress()

    async def go(server: FakeLLMServer) -> dict[str, SituateResult]:
        llm = _llm(server, "anthropic")
        try:
            return await situate_documents(
                UNCACHED,
                llm,
                ledger=Ledger(),
                prompt_version="test",
                count_tokens=count_tokens,
                progress=progress,
                batch=BatchOptions(journal, poll_seconds=0.01, linger_seconds=0),
            )
        finally:
            await llm.aclose()

    results = asyncio.run(go(fake_llm_factory()))
    assert all(r.kind == "llm" for r in results.values())
    assert (journal / "msgbatch_x.json.damaged").exists()
    assert any("msgbatch_x.json" in n and "unreadable" in n for n in progress.notes)


def _index(tmp_path: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> IndexReport:
    use_fake_llm(monkeypatch, server)
    monkeypatch.setenv("CTXR_LLM_BATCH", "1")
    monkeypatch.setenv("CTXR_LLM_BATCH_POLL_SECONDS", "0.01")
    settings = load_settings(index_dir=tmp_path / "idx", chunk_tokens=120, context="llm")
    return build_index([tmp_path / "corpus"], settings, embedder=HashEmbedder())


def test_index_batch_prices_at_half_and_an_unchanged_corpus_sends_nothing(
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    server = fake_llm_factory()
    root = tmp_path / "corpus"
    root.mkdir()
    for topic in ("glaciers", "tides"):
        facts = " ".join(f"Fact {j} about {topic} holds at {j * 7}." for j in range(400))
        (root / f"{topic}.md").write_text(f"# {topic}\n\n{facts}\n")
    monkeypatch.setenv("CTXR_LLM_PROVIDER", "anthropic")
    report = _index(tmp_path, server, monkeypatch)
    summary = report.contexts
    assert summary is not None and summary.batch is not None and summary.failures == 0
    price = load_prices().get("claude-haiku-4-5")
    assert summary.dollars == pytest.approx(price.cost(_usage(summary), batch=True))
    settings = load_settings(
        index_dir=tmp_path / "fresh", chunk_tokens=120, context="llm", claude_tokenizer="cl100k"
    )
    estimate = estimate_paths([root], settings)
    model = estimate.models[0]
    assert (model.requests, model.usage.output_tokens > 0) == (summary.requests, True)
    assert model.usage.cache_write_1h_tokens == summary.cache_write_1h_tokens
    assert model.usage.cache_read_tokens == summary.cache_read_tokens
    assert model.usage.input_tokens == summary.input_tokens
    assert model.batch_run and model.dollars() == pytest.approx(
        price.cost(model.usage, batch=True)
    )
    creates = server.batches.creates
    again = _index(tmp_path, server, monkeypatch)
    assert server.batches.creates == creates  # nothing changed: nothing is sent
    assert again.contexts is None or again.contexts.requests == 0


def _usage(summary: Any) -> Any:
    from ctxr.llm.base import Usage

    return Usage(
        summary.input_tokens,
        summary.cache_write_tokens,
        summary.cache_read_tokens,
        summary.output_tokens,
        summary.cache_write_1h_tokens,
    )
