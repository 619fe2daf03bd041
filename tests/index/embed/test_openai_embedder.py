"""`OpenAIEmbedder` with the real OpenAI SDK against the loopback fake server's /v1/embeddings."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ctxr.config import load_settings
from ctxr.errors import ConfigError, EmbedderError, IndexMismatchError
from ctxr.index.components import make_embedder
from ctxr.index.embed.base import Embedder
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.embed.openai import OpenAIEmbedder
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from ctxr.tokens import count_tokens
from tests.fakes.llm_embeddings import fake_embedding
from tests.fakes.llm_server import FakeLLMServer

MODEL = "test-embed"  # the fake's small test model: 64 dimensions
Factory = Callable[..., FakeLLMServer]
TEXTS = [f"passage {i} about {word}" for i, word in enumerate("abcdefghij")]


def _embedder(server: FakeLLMServer, **kwargs: object) -> OpenAIEmbedder:
    # 64 is the test model's full size; saying so up front saves the probe for its size.
    options: dict[str, object] = {"model": MODEL, "base_url": server.openai_base_url}
    options.update(dimensions=64, api_key="test", backoff_initial=0.01, backoff_max=0.05)
    options.update(kwargs)
    return OpenAIEmbedder(**options)  # type: ignore[arg-type]


def _inputs(server: FakeLLMServer) -> list[list[str]]:
    return [r.body["input"] for r in server.requests if r.endpoint == "embeddings"]


def test_vectors_are_the_servers_normalised_in_input_order(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory(embedding_scale=3.0)  # a compatible server that does not normalise
    embedder = _embedder(server, batch_size=4)
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim, embedder.max_tokens) == (f"openai:{MODEL}@64", 64, 8191)
    vectors = embedder.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (10, 64)
    expected = np.array([fake_embedding(t, MODEL) for t in TEXTS], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    batches = _inputs(server)
    assert [len(batch) for batch in batches] == [4, 4, 2]
    assert [text for batch in batches for text in batch] == TEXTS
    assert embedder.embed([]).shape == (0, 64)
    with pytest.raises(TypeError):
        embedder.embed("one string")


def test_requests_are_cut_by_count_and_by_tokens(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    texts = [" ".join(["word"] * n) for n in (30, 30, 30, 5, 5, 60)]
    embedder = _embedder(server, batch_size=3, max_tokens=60, max_request_tokens=64)
    embedder.embed(texts)
    sent = _inputs(server)
    assert [len(batch) for batch in sent] == [2, 3, 1]  # 60 tokens, then 30+5+5, then 60
    assert all(sum(count_tokens(t) for t in batch) <= 64 for batch in sent)
    assert embedder.tokens_billed == sum(count_tokens(t) for t in texts)


def test_long_texts_are_cut_to_max_tokens_before_sending(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    embedder = _embedder(server, max_tokens=10)
    long = "ünïcödé wörds " * 40
    assert embedder.count_tokens(long) > 100  # counted whole, for the splitter
    embedder.embed([long, ""])
    [[sent, empty]] = _inputs(server)
    assert count_tokens(sent) <= 10 and long.startswith(sent.rstrip("\ufffd"))
    assert empty == " "  # the API refuses an empty string


def test_429_waits_at_least_its_retry_after_then_succeeds(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    server.inject("429", retry_after_s=0.2)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    embedder = _embedder(server, sleep=sleep)
    vectors = embedder.embed(TEXTS[:2])
    assert vectors.shape == (2, 64)
    assert [r.fault for r in server.requests] == ["429", None]  # set before the answer
    assert slept and max(slept) >= 0.2
    assert embedder.requests_sent == 2


def test_server_errors_are_retried_until_attempts_run_out(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    server.inject("500", times=2)
    embedder = _embedder(server)
    assert embedder.embed(TEXTS[:1]).shape == (1, 64)
    assert [r.fault for r in server.requests] == ["500", "500", None]

    server.inject("529", times=5)  # OpenAI's shape answers 503
    with pytest.raises(EmbedderError, match=r"failed 3 times.*503") as failure:
        _embedder(server, max_attempts=3).embed(TEXTS[:1])
    assert MODEL in str(failure.value)


def test_a_rejected_key_names_the_variable_never_the_key(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory(api_key="sk-right-key-0000")
    embedder = _embedder(server, api_key="sk-wrong-key-9876")
    with pytest.raises(EmbedderError, match="OPENAI_API_KEY") as failure:
        embedder.embed(["text"])
    message = str(failure.value)
    assert "sk-wrong" not in message and "9876" not in message
    assert server.count("embeddings") == 1  # not retried


def test_a_bad_request_names_the_model_and_is_not_retried(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    embedder = OpenAIEmbedder(
        "text-embedding-ada-002", dimensions=256, api_key="t", base_url=server.openai_base_url
    )
    with pytest.raises(EmbedderError, match=r"'text-embedding-ada-002'.*400.*dimensions"):
        embedder.embed(["text"])
    assert server.count("embeddings") == 1


def test_dimensions_are_sent_and_change_the_name(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    embedder = OpenAIEmbedder(dimensions=256, api_key="t", base_url=server.openai_base_url)
    assert (embedder.name, embedder.dim) == ("openai:text-embedding-3-small@256", 256)
    vector = embedder.embed(["shortened vectors"])
    assert server.requests[0].body["dimensions"] == 256
    expected = fake_embedding("shortened vectors", "text-embedding-3-small", 256)
    np.testing.assert_allclose(vector[0], expected, atol=1e-6)
    assert OpenAIEmbedder(api_key="t", base_url=server.openai_base_url).dim == 1536


def test_an_unknown_models_size_is_probed_once(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    embedder = _embedder(server, dimensions=None)
    assert server.count("embeddings") == 0  # the test model is not in the table...
    assert embedder.dim == 64 and embedder.dim == 64  # ...so one request finds its size
    assert server.count("embeddings") == 1


def test_client_side_limits_space_the_requests(fake_llm_factory: Factory) -> None:
    server = fake_llm_factory()
    now = [0.0]  # a fake clock that only sleeping moves: the waits are exact

    def sleep(seconds: float) -> None:
        now[0] += seconds

    embedder = _embedder(
        server, batch_size=1, requests_per_minute=600, clock=lambda: now[0], sleep=sleep
    )
    embedder.embed([f"text {i}" for i in range(14)])  # 10 per second, a burst of 10
    assert embedder.limiter.waited_seconds == pytest.approx(0.4)
    texts = [" ".join(["word"] * 100)] * 3  # 100 tokens each, 6,000 per minute = 100 per second
    limited = _embedder(
        server, batch_size=1, tokens_per_minute=6000, clock=lambda: now[0], sleep=sleep
    )
    limited.embed(texts)
    assert limited.limiter.waited_seconds == pytest.approx(2.0)


def test_cached_embedder_sends_nothing_the_second_time(
    fake_llm_factory: Factory, tmp_path: Path
) -> None:
    server = fake_llm_factory()
    cached = CachedEmbedder(_embedder(server), tmp_path / "cache")
    first = cached.embed(TEXTS)
    sent = server.count("embeddings")
    again = CachedEmbedder(_embedder(server), tmp_path / "cache")
    np.testing.assert_array_equal(again.embed(TEXTS), first)
    assert server.count("embeddings") == sent and again.hits == len(TEXTS)
    cached.close()
    again.close()


def test_settings_choose_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # no key: a placeholder
    settings = load_settings(embedder="openai", embedding_dimensions=512)
    embedder = make_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.name, embedder.dim) == ("openai:text-embedding-3-small@512", 512)
    with pytest.raises(ConfigError, match="CTXR_EMBEDDER=openai"):
        make_embedder(load_settings(embedding_model="text-embedding-3-large"))


def test_the_embedder_has_its_own_server_when_set(
    fake_llm_factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The LLM on one server (OPENAI_BASE_URL), the embeddings on another: TEI beside Ollama.
    llm_side, embeddings = fake_llm_factory(), fake_llm_factory(api_key="tei-key")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_side.openai_base_url)
    monkeypatch.setenv("CTXR_EMBEDDING_BASE_URL", embeddings.openai_base_url)
    monkeypatch.setenv("CTXR_EMBEDDING_API_KEY", "tei-key")
    settings = load_settings(embedder="openai", embedding_model=MODEL, embedding_dimensions=64)
    embedder = make_embedder(settings)
    assert embedder.embed(["tides"]).shape == (1, 64)
    # That server refuses any other key (401): the request carried CTXR_EMBEDDING_API_KEY.
    assert embeddings.count("embeddings") == 1 and llm_side.count("embeddings") == 0


def test_index_and_search_with_openai_then_local_is_refused(
    fake_llm_env: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tides.md").write_text("# Tides\n\nThe moon pulls the oceans into tides.\n")
    (corpus / "lava.md").write_text("# Volcanoes\n\nMagma rises and erupts as lava.\n")
    monkeypatch.setenv("CTXR_CONTEXT", "outline")
    monkeypatch.setenv("CTXR_EMBEDDER", "openai")
    monkeypatch.setenv("CTXR_EMBEDDING_MODEL", MODEL)
    settings = load_settings(index_dir=tmp_path / "idx")
    report = build_index([corpus], settings)
    assert report.chunks_written >= 2 and fake_llm_env.count("embeddings") >= 1
    assert fake_llm_env.count("messages") == 0
    with SearchService(settings) as service:
        [hit, *_] = service.search("erupts as lava", k=2, mode="dense")
    assert hit.source.endswith("lava.md")

    monkeypatch.setenv("CTXR_EMBEDDER", "local")
    monkeypatch.delenv("CTXR_EMBEDDING_MODEL")
    local = load_settings(index_dir=tmp_path / "idx")
    for attempt in (lambda: build_index([corpus], local), lambda: SearchService(local)):
        with pytest.raises(IndexMismatchError) as refused:
            attempt()
        message = str(refused.value)
        assert f"openai:{MODEL}" in message and "onnx:" in message and "--rebuild" in message
