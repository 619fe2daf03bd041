"""A timeout is a deadline for the whole request, and an answer has a size limit.

A server that sends `200`, a large Content-Length and then one byte at a time answers every
read within any per-read timeout; only a deadline on the whole request ends it. Each test gives
its client a timeout of half a second against a drip that would last 30 s, and bounds its own
wait at 15 s, so a client without a deadline fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.prompt import SituateRequest
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.results import Backoff, SituateResult
from ctxr.errors import ProviderError, RerankError
from ctxr.index.embed.openai import OpenAIEmbedder
from ctxr.llm.anthropic import AnthropicLLM
from ctxr.llm.deadline import MAX_ANSWER_BYTES
from ctxr.llm.openai import OpenAILLM
from ctxr.retrieve.rerank.http import HTTPReranker
from ctxr.types import Chunk, Document, chunk_id_for, text_hash
from tests.fakes.llm_server import FakeLLMServer

TIMEOUT = 0.5
DRIP_SECONDS = 30.0
CAP_SECONDS = 15.0  # the test's own bound: far above the deadline, far below the drip
REQUEST = SituateRequest("The whole document.", "A chunk.", ("Guide",), cache=False).completion()

T = TypeVar("T")


def _bounded(call: Callable[[], T]) -> T:
    """`call()` in a thread, failing the test when it outlives CAP_SECONDS."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(CAP_SECONDS)
    if thread.is_alive():
        pytest.fail(f"still waiting after {CAP_SECONDS} s: the timeout is not a deadline")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _llm(provider: str, server: FakeLLMServer, *, sync: bool = False) -> Any:
    if provider == "anthropic":
        return AnthropicLLM(
            "claude-haiku-4-5", "test", server.anthropic_base_url, TIMEOUT, sync=sync
        )
    return OpenAILLM("gpt-4o-mini", "test", server.openai_base_url, TIMEOUT, sync=sync)


def _complete(provider: str, server: FakeLLMServer) -> str:
    """REQUEST's answer from `server` through the async client (closed after), within
    CAP_SECONDS."""

    async def ask() -> str:
        llm = _llm(provider, server)
        try:
            return (await asyncio.wait_for(llm.complete(REQUEST), CAP_SECONDS)).text
        finally:
            await llm.aclose()

    return asyncio.run(ask())


@pytest.fixture
def dripping(fake_llm: FakeLLMServer) -> FakeLLMServer:
    fake_llm.inject("drip", times=10, delay_s=DRIP_SECONDS)
    return fake_llm


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_dripping_answer_times_out_at_the_deadline(
    dripping: FakeLLMServer, provider: str
) -> None:
    with pytest.raises(ProviderError) as info:
        _complete(provider, dripping)
    assert info.value.timed_out and info.value.retryable
    assert f"timed out after {TIMEOUT:g} s" in str(info.value)
    assert "the whole request" in str(info.value)  # says what the limit bounds


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_dripping_answer_times_out_for_a_sync_caller(
    dripping: FakeLLMServer, provider: str
) -> None:
    llm = _llm(provider, dripping, sync=True)
    try:
        with pytest.raises(ProviderError) as info:
            _bounded(lambda: llm.complete_sync(REQUEST))
    finally:
        llm.close()
    assert info.value.timed_out and info.value.retryable


def test_a_dripping_embeddings_answer_times_out(dripping: FakeLLMServer) -> None:
    embedder = OpenAIEmbedder(
        "text-embedding-3-small",
        api_key="test",
        base_url=dripping.openai_base_url,
        timeout=TIMEOUT,
        max_attempts=1,
    )
    try:
        with pytest.raises(Exception, match="timed out") as info:
            _bounded(lambda: embedder.embed(["a text"]))
    finally:
        embedder.close()
    assert "timed out" in str(info.value)


def test_a_dripping_rerank_answer_times_out(dripping: FakeLLMServer) -> None:
    reranker = HTTPReranker(dripping.base_url, timeout=TIMEOUT)
    with pytest.raises(RerankError, match="timeout"):
        _bounded(lambda: reranker.score("query", ["one passage", "another"]))


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_oversized_answer_is_refused_unread(fake_llm: FakeLLMServer, provider: str) -> None:
    fake_llm.huge_bytes = 10_000_000
    fake_llm.inject("huge")

    with pytest.raises(ProviderError) as info:
        _complete(provider, fake_llm)
    assert not info.value.retryable  # the same server would send the same again
    assert f"{MAX_ANSWER_BYTES:,} bytes" in str(info.value)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_answer_under_the_cap_is_read(fake_llm: FakeLLMServer, provider: str) -> None:
    fake_llm.huge_bytes = 20_000
    fake_llm.inject("huge")

    assert len(_complete(provider, fake_llm)) > 19_000


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_run_against_a_dripping_server_retries_then_falls_back(
    dripping: FakeLLMServer, provider: str
) -> None:
    text = "# Notes\n\nA paragraph about glaciers and how they move.\n"
    document = Document("notes.md", "notes.md", text, "markdown", "Notes", text_hash(text))
    chunk = Chunk(chunk_id_for(document.doc_id, 0), document.doc_id, 0, text, 0, len(text), 12)
    ledger = Ledger()

    async def go() -> dict[str, SituateResult]:
        llm = _llm(provider, dripping)
        try:
            run = situate_documents(
                [(document, [chunk])], llm, ledger=ledger, prompt_version="test/1",
                count_tokens=lambda s: len(s.split()), max_attempts=2,
                backoff=Backoff(initial=0.001, maximum=0.01),
            )  # fmt: skip
            return await asyncio.wait_for(run, CAP_SECONDS)
        finally:
            await llm.aclose()

    result = asyncio.run(go())[chunk.chunk_id]
    assert result.kind == "outline" and "timed out" in (result.flagged or "")
    assert dripping.count(status=200) == 2  # asked, timed out, asked again
    assert len(ledger.failures) == 1 and len(ledger.retries) == 1
