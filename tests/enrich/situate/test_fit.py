"""Requests sized to a local server's context window, and split when the server refuses one.

The loopback fake server plays llama.cpp, vLLM, Ollama and LM Studio (`fakes.llm_window`): it
says its window where that server says it, and refuses a chat request past the window with a
400 in that server's words. The real SDK, queue and planner run against it; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxr.config import load_settings
from ctxr.enrich.situate.contexts import llm_timeout
from ctxr.enrich.situate.fit import Fit
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.plan import PlanOptions, plan_requests
from ctxr.enrich.situate.prompt import PROMPT_VERSION, document_part
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.results import SituateResult
from ctxr.llm.error_map import context_length
from ctxr.llm.local import LOCAL_TIMEOUT_SECONDS, is_local_url
from ctxr.llm.registry import make_llm
from ctxr.llm.server_limits import discover
from ctxr.pipeline.build import build_index
from ctxr.pipeline.estimate import estimate_paths
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.llm_window import ServerKind
from tests.fakes.llm_wire import count_request_tokens
from tests.fixtures.answers import grouped_answer
from tests.fixtures.documents import Corpus, chunked_document, fact_sections
from tests.fixtures.progress import RecordingProgress

CONTEXT = "This passage belongs to a maintenance note and lists the measured facts."
ANSWER = grouped_answer(CONTEXT)
MODEL = "served-model"
COUNT = functools.partial(count_tokens, encoding="cl100k_base")  # as the fake server counts


def _document(name: str, sections: int, words: int = 40) -> tuple[Document, list[Chunk]]:
    return chunked_document(
        name, fact_sections(name, sections, words), headings=lambda i: (name, f"Part {i}"),
        count_tokens=COUNT,
    )  # fmt: skip


def _corpus() -> Corpus:
    """Small documents a pack of 8,000 tokens would hold together, and a long one."""
    return [
        _document("a.md", 6),
        _document("b.md", 5),
        _document("c.md", 6),
        _document("long.md", 30),  # ~6,000 tokens: past a 2,048 window by itself
    ]


def _situate(
    corpus: Corpus, server: FakeLLMServer, fit: Fit | None
) -> tuple[dict[str, SituateResult], Ledger]:
    """The queue's defaults for grouping and packing (64 chunks, 8,000 tokens)."""
    ledger = Ledger()
    llm = make_llm("openai", MODEL, api_key="test", base_url=server.openai_base_url)

    async def go() -> dict[str, SituateResult]:
        try:
            return await situate_documents(
                corpus, llm, ledger=ledger, prompt_version=PROMPT_VERSION, count_tokens=COUNT,
                render_document=document_part, group_size=64, context_tokens=200,
                pack_tokens=8000, fit=fit, backoff=None,
            )  # fmt: skip
        finally:
            await llm.aclose()

    return asyncio.run(go()), ledger


def _refused(server: FakeLLMServer) -> int:
    return server.count("chat.completions", 400)


@pytest.mark.parametrize("counts_output", [False, True])  # llama.cpp, vLLM
def test_a_plan_fitted_to_the_window_is_never_refused(
    fake_llm_factory: Callable[..., FakeLLMServer], counts_output: bool
) -> None:
    window = 2048
    server = fake_llm_factory(
        respond=ANSWER, context_window=window, window_counts_output=counts_output
    )
    corpus = _corpus()
    llm = make_llm("openai", MODEL, api_key="test", base_url=server.openai_base_url)
    options = PlanOptions(COUNT, render_document=document_part, group_size=64,
                          context_tokens=200, pack_tokens=8000, fit=Fit(window))  # fmt: skip
    plan = plan_requests(corpus, llm, None, options)
    for planned in plan.requests:  # by the server's count, answer budget included
        body = llm.request_body(planned.request)
        prompt = count_request_tokens(body, "openai")
        assert prompt + (body["max_tokens"] or 0) <= window, (prompt, body["max_tokens"])
    assert any(p.window.block is not None for p in plan.prefixes)  # the long one in windows

    results, _ = _situate(corpus, server, Fit(window))
    assert _refused(server) == 0
    assert {r.kind for r in results.values()} == {"llm"}
    assert len(results) == sum(len(chunks) for _, chunks in corpus)


@pytest.mark.parametrize("kind", ["llamacpp", "vllm", None])
def test_a_request_past_an_unknown_window_is_split_and_asked_again(
    fake_llm_factory: Callable[..., FakeLLMServer], kind: ServerKind | None
) -> None:
    # The window is not known to the plan: the pack of small documents, the long document's
    # group and its per-chunk requests are refused, then split until they fit.
    server = fake_llm_factory(
        respond=ANSWER, context_window=2048, server_kind=kind, window_counts_output=True
    )
    corpus = _corpus()
    results, ledger = _situate(corpus, server, None)
    assert _refused(server) > 0
    assert {r.kind for r in results.values()} == {"llm"}, ledger.failures
    assert len(results) == sum(len(chunks) for _, chunks in corpus)
    said = [error for _, error in ledger.retries]
    assert any("split into its 3 documents" in e for e in said), said
    assert any("around the chunk" in e for e in said), said
    assert not ledger.failures


def test_a_chunk_longer_than_the_window_fails_naming_the_settings(
    fake_llm_factory: Callable[..., FakeLLMServer],
) -> None:
    server = fake_llm_factory(respond=ANSWER, context_window=600, server_kind="llamacpp")
    corpus = [_document("huge.md", 2, words=200)]  # chunks of ~1,000 tokens each
    results, ledger = _situate(corpus, server, None)
    assert {r.kind for r in results.values()} == {"outline"}
    [(_, first), *_] = ledger.failures
    assert "exceeds the available context size (600 tokens)" in first
    assert "CTXR_LLM_CONTEXT_TOKENS" in first and "-c N" in first
    said = [error for _, error in ledger.retries]
    assert any("the document's outline only" in e for e in said), said


@pytest.mark.parametrize(
    ("kind", "output", "source"),
    [
        ("llamacpp", 512, "llama.cpp /props"),
        ("vllm", None, "vLLM /v1/models"),
        ("ollama", 300, "Ollama /api/show"),
        ("lmstudio", None, "LM Studio"),
    ],
)
def test_the_window_is_learned_where_the_server_says_it(
    fake_llm_factory: Callable[..., FakeLLMServer],
    kind: ServerKind,
    output: int | None,
    source: str,
) -> None:
    server = fake_llm_factory(context_window=4096, server_kind=kind, output_limit=output)
    limits = discover(server.openai_base_url, MODEL)
    assert limits is not None
    assert (limits.context_tokens, limits.output_tokens) == (4096, output)
    assert limits.source.startswith(source)


def test_a_server_that_says_nothing_has_no_known_window(
    fake_llm_factory: Callable[..., FakeLLMServer],
) -> None:
    server = fake_llm_factory()
    assert discover(server.openai_base_url, MODEL) is None
    assert discover("http://127.0.0.1:9/v1", MODEL) is None  # nothing listening


@pytest.mark.parametrize(
    ("detail", "window", "prompt"),
    [
        # llama.cpp's own words (xllamacpp 2026.10 with 2 slots of 4,096 tokens).
        ("request (8588 tokens) exceeds the available context size (4096 tokens), try "
         "increasing it", 4096, 8588),
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 "
         "tokens (4800 in the messages, 200 in the completion).", 4096, 5000),
        ("Trying to keep the first 5000 tokens when context the overflows. However, the model "
         "is loaded with context length of only 4096 tokens", 4096, None),
    ],
)  # fmt: skip
def test_context_length_refusals_are_recognised(
    detail: str, window: int, prompt: int | None
) -> None:
    error = context_length(detail)
    assert error is not None and not error.retryable
    assert (error.window, error.prompt_tokens) == (window, prompt)
    assert "CTXR_LLM_CONTEXT_TOKENS" in str(error)
    assert context_length("response_format: not supported") is None


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        (None, False),
    ],
)
def test_local_base_urls(url: str | None, local: bool) -> None:
    assert is_local_url(url) is local


def _index_with_defaults(
    tmp_path: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, **env: str
) -> tuple[Sequence[str], Any]:
    """`build_index` as `ctxr index --context llm` runs it, with a base URL, a model that has
    no price, and no other CTXR_LLM_* setting."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for document, _ in _corpus():
        (corpus / document.doc_id).write_text(f"# {document.doc_id}\n\n{document.text}")
    settings = load_settings(
        index_dir=tmp_path / "idx", context="llm", llm_provider="openai", llm_model="smollm2"
    )
    notes = RecordingProgress()
    report = build_index([corpus], settings, embedder=HashEmbedder(), progress=notes)
    return notes.notes, report


@pytest.mark.slow
def test_defaults_against_a_local_llamacpp_fit_its_window_and_price_at_zero(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(respond=ANSWER, context_window=2048, server_kind="llamacpp")
    notes, report = _index_with_defaults(tmp_path, server, monkeypatch)
    assert _refused(server) == 0  # sized from /props, not learned by refusals
    assert report.contexts.failures == 0
    assert report.context_kind == "llm"
    priced = [n for n in notes if "no price" in n or "priced at $0" in n]
    assert len(priced) == 1 and priced[0].startswith("priced at $0") and "\n" not in priced[0]
    assert any("context window of 2048 tokens" in n and "/props" in n for n in notes), notes
    # llama.cpp's two slots: more requests in flight would only queue at the server.
    assert any("2 requests at once" in n for n in notes), notes
    assert server.peak_in_flight <= 2


def test_the_context_tokens_setting_sizes_requests_for_a_silent_server(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(respond=ANSWER, context_window=2048, window_counts_output=True)
    notes, report = _index_with_defaults(
        tmp_path, server, monkeypatch, CTXR_LLM_CONTEXT_TOKENS="2048"
    )
    assert _refused(server) == 0 and report.contexts.failures == 0
    assert any("CTXR_LLM_CONTEXT_TOKENS" in n for n in notes)


def test_the_estimate_prices_a_locally_served_model_at_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing is sent
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\n" + _corpus()[0][0].text)
    settings = load_settings(index_dir=tmp_path / "idx", llm_model="smollm2")
    estimate = estimate_paths([corpus], settings, embedder=HashEmbedder())
    [model] = estimate.models
    assert model.model == "smollm2" and model.dollars() == 0.0
    assert any(n.startswith("priced at $0: smollm2 is served locally") for n in estimate.notes)


def test_a_local_server_waits_longer_unless_a_timeout_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CTXR_LLM_TIMEOUT", raising=False)
    defaults = load_settings()
    assert llm_timeout(defaults.llm, "http://127.0.0.1:8080/v1") == LOCAL_TIMEOUT_SECONDS == 600
    assert llm_timeout(defaults.llm, "https://api.openai.com/v1") == 60
    assert llm_timeout(defaults.llm, None) == 60
    monkeypatch.setenv("CTXR_LLM_TIMEOUT", "45")
    assert llm_timeout(load_settings().llm, "http://localhost:11434/v1") == 45


def test_a_timed_out_chunk_names_the_timeout_setting(
    fake_llm_factory: Callable[..., FakeLLMServer],
) -> None:
    server = fake_llm_factory(respond=ANSWER)
    server.inject("slow", times=10, delay_s=5.0)
    llm = make_llm("openai", MODEL, api_key="test", base_url=server.openai_base_url, timeout=0.2)
    ledger = Ledger()

    async def go() -> dict[str, SituateResult]:
        try:
            return await situate_documents(
                [_document("a.md", 1)], llm, ledger=ledger, prompt_version=PROMPT_VERSION,
                count_tokens=COUNT, max_attempts=1,
            )  # fmt: skip
        finally:
            await llm.aclose()

    [result] = asyncio.run(go()).values()
    assert result.kind == "outline"
    [(_, error)] = ledger.failures
    assert "timed out after 0.2 s" in error and "raise CTXR_LLM_TIMEOUT" in error
