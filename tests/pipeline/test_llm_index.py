"""Indexing with LLM contexts, end to end: the real Anthropic SDK against the loopback fake
server, through `build_index` and the CLI (`--context auto` detects the provider)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.config import load_settings
from ctxr.index.embed.base import EmbedderWrapper, FloatMatrix
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from ctxr.pipeline.report import IndexReport
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.answers import grouped_answer
from tests.fixtures.corpora import write_topics
from tests.fixtures.environment import use_fake_llm

# Sonnet caches prefixes from 1,024 tokens on; each long document is about 1,500. Its price
# comes from a user prices file, which also exercises CTXR_PRICES_FILE.
MODEL = "claude-sonnet-4-6"
PRICE = {"input": 3.0, "cache_write": 3.75, "cache_read": 0.3, "output": 15.0}


def _corpus(root: Path) -> Path:
    write_topics(root)
    (root / "short.txt").write_text(
        "A short note about nothing in particular, far below the minimum."
    )
    return root


def _index(tmp_path: Path, server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> IndexReport:
    use_fake_llm(monkeypatch, server)
    monkeypatch.setenv("CTXR_LLM_MODEL", MODEL)
    # These runs check the one-request-per-chunk schedule; grouping has tests of its own.
    monkeypatch.setenv("CTXR_LLM_GROUP_SIZE", "1")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {MODEL: {"provider": "anthropic", **PRICE}}}))
    monkeypatch.setenv("CTXR_PRICES_FILE", str(prices))
    settings = load_settings(index_dir=tmp_path / "idx", chunk_tokens=120)
    corpus = tmp_path / "corpus"
    if not corpus.exists():
        _corpus(corpus)
    return build_index([corpus], settings, embedder=HashEmbedder())


@pytest.mark.slow
def test_one_cache_write_per_document_and_reruns_cost_nothing(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(latency=0.02, gather=9)  # held until 9 are in flight at once
    monkeypatch.setenv("CTXR_LLM_CONCURRENCY", "32")
    report = _index(tmp_path, server, monkeypatch)
    assert server.peak_in_flight > 8  # chunks of several documents really were in flight
    assert report.context_kind == "llm"
    summary = report.contexts
    assert summary is not None
    chunks = report.chunks_written
    assert summary.requests == chunks == server.count("messages", 200)
    # The physical minimum: every long document's prefix written exactly once, all else read.
    writes = server.cache_writes_by_prefix()
    assert sorted(writes.values()) == [1, 1, 1]
    assert summary.cache_writes == 3 and summary.uncached_documents == 1
    assert summary.cache_read_tokens > 10 * summary.cache_write_tokens / 3 > 0
    short = [r for r in server.requests if "far below the minimum" in json.dumps(r.body)]
    assert len(short) == 1 and "cache_control" not in json.dumps(short[0].body)
    assert summary.failures == 0
    usage = [summary.input_tokens, summary.cache_write_tokens, summary.cache_read_tokens]
    expected = sum(n * p for n, p in zip(usage, (3.0, 3.75, 0.3), strict=True))
    expected += summary.output_tokens * 15.0
    assert summary.dollars == pytest.approx(expected / 1e6)

    before = len(server.requests)
    again = _index(tmp_path, server, monkeypatch)
    assert again.documents_unchanged == 4 and len(server.requests) == before

    rebuilt = build_index(
        [tmp_path / "corpus"],
        load_settings(index_dir=tmp_path / "idx", chunk_tokens=120),
        rebuild=True,
        embedder=HashEmbedder(),
    )
    assert rebuilt.chunks_written == chunks and len(server.requests) == before  # response cache
    assert rebuilt.contexts is not None and rebuilt.contexts.response_cache_hits == chunks


@pytest.mark.slow
def test_faults_lose_no_chunk(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(
        fault_rate=0.1, fault_kinds=("429", "529", "500", "drop"), retry_after_s=0.05, seed=7
    )
    report = _index(tmp_path, server, monkeypatch)
    summary = report.contexts
    assert summary is not None
    faults = sum(1 for r in server.requests if r.fault)
    assert faults > 0 and summary.retries >= faults
    assert summary.failures == 0 and summary.flagged == 0
    assert report.chunks_written == server.count("messages", 200)


@pytest.mark.slow
def test_cli_reports_the_llm_run(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory()
    use_fake_llm(monkeypatch, server)
    corpus = _corpus(tmp_path / "corpus")
    args = ["index", str(corpus), "--index", str(tmp_path / "idx"), "--json"]
    result = CliRunner().invoke(main, [*args, "--chunk-tokens", "120"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["context_kind"] == "llm"
    assert report["contexts"]["model"] == "claude-haiku-4-5"  # the default model
    # Haiku 4.5 caches from 4,096 tokens: these documents are sent without a marker.
    assert report["contexts"]["uncached_documents"] == 4 and server.cache_writes_by_prefix() == {}
    ledgers = list((tmp_path / "idx").rglob("*.json"))
    assert any("ledger" in str(p) for p in ledgers)
    hits = CliRunner().invoke(
        main, ["search", "volcanoes measurement", "--index", str(tmp_path / "idx"), "--json"]
    )
    assert hits.exit_code == 0, hits.output
    assert json.loads(hits.stdout)["hits"][0]["context"].startswith("This chunk is from")


def test_context_llm_without_a_provider_says_how_to_configure_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["index", str(tmp_path), "--context", "llm"])
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY" in result.output and "--context outline" in result.output


def test_incremental_reindex_asks_the_llm_only_for_new_and_changed_text(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory()
    first = _index(tmp_path, server, monkeypatch)
    corpus = tmp_path / "corpus"
    glaciers = corpus / "glaciers.md"
    glaciers.write_text(glaciers.read_text() + "\n\n## Addendum\n\nOne more fact about ice.\n")
    (corpus / "tides.md").unlink()
    (corpus / "new.txt").write_text("A new note about lighthouses and their keepers.")
    before = len(server.requests)
    second = _index(tmp_path, server, monkeypatch)
    assert (second.documents_indexed, second.documents_unchanged, second.documents_removed) == (
        2,
        2,
        1,
    )
    sent = server.requests[before:]
    # A context depends on its whole document, so the edited document is situated again in
    # full; the untouched ones cost nothing (not even re-split), the deleted one is gone.
    assert second.contexts is not None
    assert len(sent) == second.contexts.requests == second.chunks_written
    assert all("volcanoes" not in json.dumps(r.body) for r in sent)
    assert sum("lighthouses" in json.dumps(r.body) for r in sent) == 1
    assert second.points_total == Manifest.load(tmp_path / "idx").chunk_count
    assert second.points_total < first.points_total  # tides' chunks left with the file


@pytest.mark.parametrize(
    ("answer", "why"),
    [("", "empty response"), ("c9", "not a context"), ("lorem " * 3_000, "too long")],
)
def test_a_server_whose_answers_are_no_context_fails_the_run_and_is_asked_again(
    tmp_path: Path,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    why: str,
) -> None:
    broken = fake_llm_factory(respond=lambda body: answer)
    use_fake_llm(monkeypatch, broken)
    monkeypatch.setenv("CTXR_LLM_MAX_OUTPUT_TOKENS", "4096")  # the runaway is the server's
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Glaciers\n\nIce moves downhill under its own weight.\n")
    (corpus / "b.md").write_text("# Tides\n\nThe moon pulls the sea twice a day.\n")
    args = ["index", str(corpus), "--index", str(tmp_path / "idx")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "claude-haiku-4-5" in result.output and broken.base_url in result.output
    assert why in result.output
    assert "This chunk is from" not in result.output  # no traceback, no context dumped

    working = fake_llm_factory()
    use_fake_llm(monkeypatch, working)
    again = CliRunner().invoke(main, [*args, "--json"])
    assert again.exit_code == 0, again.output
    contexts = json.loads(again.stdout)["contexts"]
    assert working.count("messages", 200) >= 1  # what was not answered is asked again
    assert contexts["flagged"] == 0 and contexts["failures"] == 0


class _SmallInput(EmbedderWrapper):
    """The hash embedder with an input of `LIMIT` words, keeping what it is asked to embed."""

    LIMIT = 80

    def __init__(self) -> None:
        super().__init__(HashEmbedder())
        self.texts: list[str] = []

    @property
    def max_tokens(self) -> int:
        return self.LIMIT

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_a_long_context_is_trimmed_for_the_embedder_and_kept_whole_for_bm25(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Twelve sentences of eight words: with a chunk of about thirty words, over the input.
    sentences = [f"Sentence {n} places this passage within harbour records." for n in range(12)]
    context = " ".join(sentences)
    server = fake_llm_factory(respond=grouped_answer(context))
    use_fake_llm(monkeypatch, server)
    monkeypatch.setenv("CTXR_LLM_MODEL", MODEL)
    settings = load_settings(index_dir=tmp_path / "idx", chunk_tokens=40, context="llm")
    embedder = _SmallInput()
    report = build_index([write_topics(tmp_path / "corpus", ("harbour",))], settings,
                         embedder=embedder)  # fmt: skip

    assert report.contexts is not None and report.contexts.failures == 0
    assert report.chunks_truncated == 0 and embedder.texts
    for text in embedder.texts:
        assert embedder.count_tokens(text) <= _SmallInput.LIMIT
        kept = [s for s in sentences if s in text]
        assert kept == sentences[: len(kept)] and 0 < len(kept) < len(sentences)
    with SearchService(settings, embedder=embedder) as service:
        hit = service.search("Sentence 11 harbour records", k=1, mode="bm25")[0]
    assert hit.context == context  # BM25 and the payload keep the whole context
