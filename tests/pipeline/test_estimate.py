"""The cost estimate against real runs on the loopback fake server: the estimate is made first,
then `build_index` runs with LLM contexts, and the estimate must match what the server billed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.config import Settings, load_settings
from ctxr.enrich.situate.prompt import PROMPT_VERSION, SituateRequest, document_part
from ctxr.enrich.situate.response_cache import ResponseCache, chunk_key
from ctxr.errors import ConfigError
from ctxr.index import components
from ctxr.index.manifest import Manifest
from ctxr.llm.anthropic_tokens import message_texts
from ctxr.llm.base import Usage
from ctxr.llm.openai_tokens import openai_cached, prompt_texts
from ctxr.llm.pricing import load_prices
from ctxr.llm.registry import make_llm
from ctxr.pipeline.build import build_index
from ctxr.pipeline.chunking import default_chunker
from ctxr.pipeline.collect import LoadTally, load_paths
from ctxr.pipeline.estimate import estimate_paths
from ctxr.pipeline.estimate_report import ModelEstimate
from ctxr.tokens import count_tokens
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.answers import grouped_answer
from tests.fixtures.billing import answered, billed_usage, chat_endpoint
from tests.fixtures.corpora import TOPICS, write_topics
from tests.fixtures.environment import use_fake_llm

# Every context the fake answers is this sentence, so output tokens are known exactly.
CONTEXT = "This passage belongs to a note on natural phenomena and lists measured facts."
SONNET = "claude-sonnet-4-6"  # caches from 1,024 tokens; priced through CTXR_PRICES_FILE
SONNET_PRICE = {"input": 3.0, "cache_write": 3.75, "cache_read": 0.3, "output": 15.0}


def _corpus(root: Path) -> Path:
    """Three documents of about 2,000 tokens, one of about 6,000 (sent in windows with a
    2,500-token budget) and one far below every minimum cacheable size."""
    write_topics(root)
    chapters = [
        f"## Chapter {i}\n\n"
        + " ".join(
            f"Record {i}.{j} of the long archive notes value {i * 17 + j * 3}." for j in range(14)
        )
        for i in range(30)
    ]
    (root / "archive.md").write_text("# The long archive\n\n" + "\n\n".join(chapters))
    (root / "short.txt").write_text("A short note about nothing in particular, far below it.")
    return root


def _setup(
    tmp_path: Path,
    server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    model: str,
) -> tuple[Path, Settings]:
    use_fake_llm(monkeypatch, server, provider)
    monkeypatch.setenv("CTXR_LLM_MODEL", model)
    monkeypatch.setenv("CTXR_MAX_DOCUMENT_TOKENS", "2500")
    monkeypatch.setenv("CTXR_CLAUDE_TOKENIZER", "cl100k")  # as the fake server counts
    # One request per chunk (Anthropic's method) unless a test groups them itself.
    monkeypatch.setenv("CTXR_LLM_GROUP_SIZE", "1")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {SONNET: {"provider": "anthropic", **SONNET_PRICE}}}))
    monkeypatch.setenv("CTXR_PRICES_FILE", str(prices))
    settings = load_settings(index_dir=tmp_path / "idx", chunk_tokens=120, context="llm")
    return _corpus(tmp_path / "corpus"), settings


def _billed(server: FakeLLMServer, provider: str) -> tuple[int, Usage]:
    """Requests and usage as the server billed them."""
    done = answered(server, chat_endpoint(provider))
    return len(done), billed_usage(done)


def _close(estimated: int | float, actual: int | float, share: float = 0.02) -> bool:
    return abs(estimated - actual) <= share * max(abs(actual), 1)


def _estimate(settings: Settings, corpus: Path, model: str, **options: Any) -> ModelEstimate:
    result = estimate_paths([corpus], settings, models=[model], embedder=HashEmbedder(),
                            **options)  # fmt: skip
    return result.models[0]


@pytest.mark.slow
def test_openai_estimate_matches_the_run_then_costs_nothing(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(respond=lambda body: CONTEXT)
    corpus, settings = _setup(tmp_path, server, monkeypatch, "openai", "gpt-4o-mini")
    out = count_tokens(CONTEXT, "o200k_base")
    estimate = _estimate(settings, corpus, "gpt-4o-mini", output_tokens=out)
    assert not (tmp_path / "idx").exists()  # the estimate wrote nothing
    assert estimate.encoding == "o200k_base" and estimate.tokens_exact
    assert estimate.prefixes > len(TOPICS) + 2  # the archive goes in windows

    report = build_index([corpus], settings, embedder=HashEmbedder())
    assert report.contexts is not None and report.contexts.failures == 0
    requests, billed = _billed(server, "openai")
    assert estimate.requests == requests == report.chunks_written
    assert billed.cache_read_tokens > billed.input_tokens > 0  # caching really happened
    for kind in ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens"):
        assert _close(getattr(estimate.usage, kind), getattr(billed, kind)), kind
    dollars = load_prices().cost("gpt-4o-mini", billed)
    assert _close(estimate.dollars(), dollars)
    assert estimate.without_caching() > estimate.dollars()
    batch = estimate.batch()
    assert batch is not None and batch == pytest.approx(estimate.dollars() / 2)

    again = _estimate(settings, corpus, "gpt-4o-mini", output_tokens=out)
    assert again.requests == 0 and again.dollars() == 0
    assert again.documents_unchanged == len(TOPICS) + 2
    # Without the manifest every document is to do, but each chunk is in the response cache.
    cached = _estimate(settings, corpus, "gpt-4o-mini", ignore_manifest=True)
    assert cached.requests == 0 and cached.chunks_answered == cached.chunks == requests


def _ledger_by_document(server: FakeLLMServer, documents: dict[str, str]) -> dict[str, Any]:
    """Per document source: requests, cache writes and reads, and whether it was marked."""
    by_prefix = {document_part(text): source for source, text in documents.items()}
    ledger: dict[str, dict[str, int]] = {}
    for r in server.requests:
        if r.endpoint != "messages" or r.status != 200:
            continue
        first = r.body["messages"][0]["content"][0]
        # A window's prefix is an outline naming the source, and a block of the text.
        source = by_prefix.get(first["text"]) or next(
            s for s in documents if f"({s})" in first["text"]
        )
        entry = ledger.setdefault(source, {"requests": 0, "writes": 0, "reads": 0, "marked": 0})
        entry["requests"] += 1
        entry["writes"] += int(r.usage["cache_creation_input_tokens"] > 0)  # type: ignore[index]
        entry["reads"] += int(r.usage["cache_read_input_tokens"] > 0)  # type: ignore[index]
        entry["marked"] += int("cache_control" in first)
    return ledger


@pytest.mark.slow
def test_claude_estimate_agrees_with_the_fake_ledger(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = fake_llm_factory(respond=lambda body: CONTEXT)
    corpus, settings = _setup(tmp_path, server, monkeypatch, "anthropic", SONNET)
    out = count_tokens(CONTEXT, "cl100k_base")
    estimate = _estimate(settings, corpus, SONNET, output_tokens=out)
    assert estimate.min_cacheable_tokens == 1024 and not estimate.tokens_exact
    exact = _estimate(settings, corpus, SONNET, output_tokens=out, exact=True)
    assert server.count("count_tokens", 200) > 0 and server.count("messages") == 0
    assert exact.tokens_exact and exact.usage == estimate.usage  # the fake counts cl100k too

    build_index([corpus], settings, embedder=HashEmbedder())
    requests, billed = _billed(server, "anthropic")
    assert estimate.requests == requests
    assert billed.cache_write_tokens > 0 and billed.cache_read_tokens > 0
    for kind in ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens"):
        assert _close(getattr(estimate.usage, kind), getattr(billed, kind)), kind
    assert _close(estimate.dollars(), load_prices(settings.llm.prices_file).cost(SONNET, billed))

    texts = {p.as_posix(): p.read_text() for p in corpus.iterdir()}
    ledger = _ledger_by_document(server, texts)
    for doc in estimate.documents:
        seen = ledger[doc.source]
        assert doc.requests == seen["requests"], doc.source
        if doc.source.endswith("short.txt"):  # below the minimum: no marker, no cache
            assert not doc.cached and seen["marked"] == seen["writes"] == seen["reads"] == 0
        elif doc.cached:  # one write per prefix, every other request a read
            assert seen["writes"] == doc.prefixes
            assert seen["reads"] == doc.requests - doc.prefixes
    assert [d.cached for d in estimate.documents].count(False) >= 1
    assert _estimate(settings, corpus, SONNET).requests == 0


def test_request_parts_follow_the_provider_bodies() -> None:
    request = SituateRequest("the document", "the chunk", ("A", "B"), True)
    anthropic = make_llm("anthropic", "claude-haiku-4-5", api_key="x")
    parts = message_texts(anthropic.request_body(request.completion()))
    assert parts[0] == (document_part("the document"), True) and not parts[1][1]
    openai = make_llm("openai", "gpt-4o-mini", api_key="x")
    [prompt] = prompt_texts(openai.request_body(request.completion()))
    assert prompt.startswith(document_part("the document"))


@pytest.mark.parametrize(
    ("shared", "cached"), [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152)]
)
def test_openai_caches_in_128_token_steps_from_1024(shared: int, cached: int) -> None:
    assert openai_cached(shared) == cached


def test_unknown_model_names_how_to_add_a_price(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    settings = load_settings(index_dir=tmp_path / "idx")
    with pytest.raises(ConfigError, match=r"no price for model 'my-model'.*CTXR_PRICES_FILE"):
        estimate_paths([corpus], settings, models=["my-model"])


def test_cli_compares_models_as_json_and_dry_run_writes_nothing(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus(tmp_path / "corpus")
    index = tmp_path / "idx"
    runner = CliRunner()
    args = ["estimate", str(corpus), "--index", str(index), "--json"]
    result = runner.invoke(main, [*args, "--model", "gpt-4o-mini", "--model", "claude-haiku-4-5"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert [m["model"] for m in body["models"]] == ["gpt-4o-mini", "claude-haiku-4-5"]
    assert body["assumptions"]["output_tokens_per_context"] == 100
    for model in body["models"]:
        assert set(model["tokens"]) >= {"input", "cache_write", "cache_read", "output", "embedding"}
        assert set(model["dollars"]) >= {"total", "total_without_caching", "total_batch"}
        # By default chunks are situated 64 a request (CTXR_LLM_GROUP_SIZE), small documents
        # packed together (CTXR_LLM_PACK_TOKENS).
        assert 0 < model["requests"] < len(TOPICS) + 2 and model["largest_documents"]
    haiku = body["models"][1]  # only the 6,000-token archive reaches Haiku 4.5's minimum,
    # and it is asked in one request, which never earns back a cache write: nothing is cached.
    assert haiku["min_cacheable_tokens"] == 4096 and haiku["cached_prefixes"] == 0
    assert haiku["uncached_documents"] == len(TOPICS) + 2
    assert not index.exists()

    bad = runner.invoke(main, [*args, "--model", "nope-1"])
    assert bad.exit_code == 2 and "no price for model 'nope-1'" in bad.output

    use_fake_llm(monkeypatch, fake_llm, "openai")
    dry = runner.invoke(main, ["index", str(corpus), "--index", str(index), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["models"][0]["model"] == "gpt-4o-mini"
    assert not index.exists() and fake_llm.requests == []
    table = runner.invoke(main, ["estimate", str(corpus), "--index", str(index)])
    assert table.exit_code == 0 and "total with caching" in table.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("provider", "model"), [("anthropic", SONNET), ("openai", "gpt-4o-mini")])
def test_grouped_estimate_agrees_with_the_run(
    tmp_path: Path,
    fake_llm_factory: Callable[..., FakeLLMServer],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    model: str,
) -> None:
    server = fake_llm_factory(respond=grouped_answer(CONTEXT))
    corpus, settings = _setup(tmp_path, server, monkeypatch, provider, model)
    grouped = settings.replace(llm_group_size=4)
    encoding = "cl100k_base" if provider == "anthropic" else "o200k_base"
    out = count_tokens(CONTEXT, encoding)
    per_chunk = _estimate(settings, corpus, model, output_tokens=out)
    estimate = _estimate(grouped, corpus, model, output_tokens=out)
    assert estimate.chunks == per_chunk.chunks
    assert estimate.requests < per_chunk.requests / 3  # four chunks a request, about
    assert estimate.dollars() < per_chunk.dollars()

    report = build_index([corpus], grouped, embedder=HashEmbedder())
    assert report.contexts is not None and report.contexts.failures == 0
    assert report.contexts.retries == 0  # every grouped answer named every chunk
    requests, billed = _billed(server, provider)
    assert estimate.requests == requests
    for kind in ("input_tokens", "cache_write_tokens", "cache_read_tokens"):
        assert _close(getattr(estimate.usage, kind), getattr(billed, kind)), kind
    # Output: the assumed context length plus the JSON framing per chunk (an estimate).
    assert _close(estimate.usage.output_tokens, billed.output_tokens, share=0.15)
    if provider == "anthropic":
        assert billed.cache_read_tokens > 0  # the grouped requests share the cached document
    index = Manifest.load(tmp_path / "idx")
    assert len(index.documents) == len(list(corpus.iterdir()))
    assert _estimate(grouped, corpus, model).requests == 0  # an unchanged corpus sends nothing


def test_an_answer_flagged_as_no_context_is_priced_as_still_to_ask(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, settings = _setup(tmp_path, fake_llm, monkeypatch, "openai", "gpt-4o-mini")
    fresh = _estimate(settings, corpus, "gpt-4o-mini")
    documents = list(load_paths([corpus], settings.corpus.max_file_bytes, LoadTally()))
    split = default_chunker(settings, HashEmbedder())
    # What older versions stored for an answer that was no context: the run asks again.
    with ResponseCache(components.cache_dir(settings) / "contexts") as cache:
        for document in documents:
            for chunk in split(document):
                key = chunk_key("openai", "gpt-4o-mini", PROMPT_VERSION, document.sha256, chunk)
                cache.put(key, "the outline", flagged="too short")
    again = _estimate(settings, corpus, "gpt-4o-mini")
    assert again.chunks_answered == 0 and again.requests == fresh.requests > 0
    assert again.usage == fresh.usage


def _has_ctok() -> bool:
    import importlib.util

    return importlib.util.find_spec("ctok") is not None


@pytest.mark.skipif(_has_ctok(), reason="ctok is installed here")
def test_asking_for_ctok_without_it_says_how_to_install_it(tmp_path: Path) -> None:
    from ctxr.llm.anthropic_tokens import claude_counter

    assert claude_counter("auto") is None and claude_counter("cl100k") is None
    with pytest.raises(ConfigError, match=r"ctxr\[claude-tokens\]"):
        claude_counter("ctok")


@pytest.mark.skipif(not _has_ctok(), reason="ctok needs Python 3.12+ and the claude-tokens extra")
def test_claude_estimate_counts_with_ctok_when_installed(tmp_path: Path) -> None:
    from ctok import token_count

    (tmp_path / "c").mkdir()
    text = "# Notes\n\n" + " ".join(f"Point {i} about tokenizers." for i in range(200))
    (tmp_path / "c" / "a.md").write_text(text)
    base: dict[str, Any] = {"index_dir": tmp_path / "idx", "llm_group_size": 1}
    counted = estimate_paths([tmp_path / "c"], load_settings(**base, claude_tokenizer="ctok"))
    plain = estimate_paths([tmp_path / "c"], load_settings(**base, claude_tokenizer="cl100k"))
    ctok_model, cl100k_model = counted.models[0], plain.models[0]
    assert ctok_model.encoding == "ctok" and ctok_model.requests == cl100k_model.requests
    # ctok counts Claude tokens; they run above cl100k on English prose.
    assert ctok_model.usage.prompt_tokens > cl100k_model.usage.prompt_tokens
    assert token_count(text) > count_tokens(text, "cl100k_base")


@pytest.mark.slow
def test_dry_run_without_a_provider_estimates_the_outline_run(tmp_path: Path) -> None:
    # With no LLM key the dry run printed an empty table: no model, so no column.
    corpus = _corpus(tmp_path / "corpus")
    index = tmp_path / "idx"
    runner = CliRunner()
    args = ["index", str(corpus), "--index", str(index), "--dry-run"]
    table = runner.invoke(main, args, env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    out = table.stdout
    assert "documents to do" in out and "outline (no LLM): $0" in out
    assert "no LLM model is priced" in out and "--model claude-haiku-4-5" in out
    dry = json.loads(runner.invoke(main, [*args, "--json"]).stdout)
    plain = dry["run_without_llm"]
    assert dry["models"] == [] and plain["context"] == "outline" and plain["dollars"]["llm"] == 0
    assert not index.exists()
    # The run it describes: the same documents and chunks (the embedder's cap included).
    done = runner.invoke(main, ["index", str(corpus), "--index", str(index), "--json"])
    report = json.loads(done.stdout)
    assert (plain["documents"], plain["chunks"]) == (report["documents_indexed"],
                                                     report["chunks_written"])  # fmt: skip
    again = json.loads(runner.invoke(main, [*args, "--json"]).stdout)["run_without_llm"]
    assert again["documents"] == again["chunks"] == 0
    assert again["documents_unchanged"] == report["documents_indexed"]
