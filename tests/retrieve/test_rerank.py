"""Rerankers over the real examples index: the LLM one against the fake Anthropic and OpenAI
servers, the Cohere-compatible HTTP one against the fake ``/v1/rerank``, the cross-encoder's
refusal without a local model; every failure returns the fused order, flagged."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.cli import main
from ctxr.config import Settings
from ctxr.errors import ConfigError
from ctxr.index.embed.onnx import model_path, tokenizer_path
from ctxr.retrieve.rerank.base import passage
from ctxr.retrieve.rerank.cross_encoder import CrossEncoderReranker
from ctxr.retrieve.rerank.llm import UNPARSEABLE, parse_scores, rerank_prompt
from ctxr.retrieve.rerank.registry import resolve
from ctxr.retrieve.service import SearchService
from ctxr.types import Hit, RetrieverScore
from tests.fakes.llm_rerank import relevance
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.environment import use_fake_llm
from tests.fixtures.index import BuiltIndex

QUERY = "how are chunk contexts cached"
_PASSAGE_ID = re.compile(r'<passage id="(\d+)">')


def _prompt(body: Any) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


def reverse_ranking(body: Any) -> str:
    """Scores rising with the passage number: the fused order, reversed."""
    ids = [int(i) for i in _PASSAGE_ID.findall(_prompt(body))]
    return json.dumps([{"id": i, "score": round(10 * i / len(ids), 4)} for i in ids])


@pytest.fixture
def llm_env(
    fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> FakeLLMServer:
    server = fake_llm_factory(respond=reverse_ranking)
    use_fake_llm(monkeypatch, server)
    return server


@pytest.fixture
def service(examples_index: BuiltIndex, llm_env: FakeLLMServer) -> Iterator[SearchService]:
    with SearchService(examples_index.settings_with(rerank_timeout=2.0)) as opened:
        yield opened


def _ids(hits: list[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_llm_reranker_orders_by_the_models_scores(
    examples_index: BuiltIndex, llm_env: FakeLLMServer, provider: str
) -> None:
    settings = examples_index.settings_with(llm_provider=provider, rerank_candidates=20)
    with SearchService(settings) as svc:
        fused = svc.search(QUERY, k=20)
        hits = svc.search(QUERY, k=5, rerank="llm")
    assert _ids(hits) == _ids(fused[::-1][:5])
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    was = {h.chunk_id: h for h in fused}
    for hit in hits:
        assert hit.scores["rerank"].rank == hit.rank and hit.score == hit.scores["rerank"].score
        before = was[hit.chunk_id]  # the fused score and rank the reranker replaced, kept
        assert hit.scores["fused"] == RetrieverScore(before.score, before.rank)
        assert set(hit.scores) - {"rerank", "fused"} <= {"dense", "bm25", "bm25_doc"}
        assert len(hit.scores) >= 2
        assert not hit.flags
    endpoint = "messages" if provider == "anthropic" else "chat.completions"
    [request] = [r for r in llm_env.requests if r.endpoint == endpoint]  # one prompt per query
    prompt = _prompt(request.body)
    assert QUERY in prompt and len(_PASSAGE_ID.findall(prompt)) == 20
    assert fused[0].context and passage(fused[0]) in prompt  # the chunk with its context


def test_configured_reranker_is_the_default_and_none_turns_it_off(
    examples_index: BuiltIndex, llm_env: FakeLLMServer
) -> None:
    settings = examples_index.settings_with(rerank="llm", rerank_candidates=10)
    with SearchService(settings) as svc:
        reranked = svc.search(QUERY, k=3)
        plain = svc.search(QUERY, k=3, rerank="none")
        fused = svc.search(QUERY, k=10, rerank="none")
    assert _ids(reranked) == _ids(fused[::-1][:3])
    assert _ids(plain) == _ids(fused[:3]) and all("rerank" not in h.scores for h in plain)
    assert resolve(None, settings.search) == "llm" and resolve("none", settings.search) is None
    with pytest.raises(ConfigError, match="unknown reranker 'magic'"):
        resolve("magic", settings.search)


def test_unparseable_answer_returns_the_fused_order_flagged(
    service: SearchService, llm_env: FakeLLMServer
) -> None:
    llm_env.respond = lambda body: "Passage 3 is the best, then passage 1."
    fused = service.search(QUERY, k=5)
    hits = service.search(QUERY, k=5, rerank="llm")
    assert _ids(hits) == _ids(fused)
    assert all(h.flags == (UNPARSEABLE,) for h in hits)
    assert hits[0].flags == (UNPARSEABLE,) and fused[0].flags == ()


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "[]",
        '{"id": 1, "score": 3}',
        '[{"id": 1, "score": 3}, {"id": 1, "score": 4}, {"id": 3, "score": 1}]',  # repeated
        '[{"id": 1, "score": 3}, {"id": 2, "score": 4}]',  # one missing
        '[{"id": 1, "score": 3}, {"id": 2, "score": 11}, {"id": 3, "score": 1}]',  # range
        '[{"id": 1, "score": 3}, {"id": 2, "score": true}, {"id": 3, "score": 1}]',
        '[{"id": 0, "score": 3}, {"id": 2, "score": 4}, {"id": 3, "score": 1}]',
        '[{"id": "1", "score": 3}, {"id": 2, "score": 4}, {"id": 3, "score": 1}]',
    ],
)
def test_parse_scores_is_strict(answer: str) -> None:
    from ctxr.errors import RerankError

    with pytest.raises(RerankError, match="unparseable"):
        parse_scores(answer, 3)


def test_parse_scores_accepts_a_fenced_list_in_any_order() -> None:
    answer = '```json\n[{"id": 2, "score": 9.5}, {"id": 1, "score": 0}]\n```'
    assert parse_scores(answer, 2) == [0.0, 9.5]
    assert rerank_prompt("q {{PASSAGES}}", ["a"]).count("{{PASSAGES}}") == 1  # not re-filled


def test_llm_timeout_returns_the_fused_order_flagged(
    examples_index: BuiltIndex, llm_env: FakeLLMServer
) -> None:
    with SearchService(examples_index.settings_with(rerank_timeout=0.5)) as svc:
        fused = svc.search(QUERY, k=5)
        llm_env.inject("slow", delay_s=10)
        hits = svc.search(QUERY, k=5, rerank="llm")
    # The client gave up at its 0.5 s timeout: the answer, 10 s late, was never read.
    assert _ids(hits) == _ids(fused)
    assert all(h.flags == ("rerank failed: timeout",) for h in hits)


def test_llm_reranker_without_a_provider_says_what_to_set(examples_index: BuiltIndex) -> None:
    with (
        SearchService(examples_index.settings_with()) as svc,
        pytest.raises(ConfigError, match="ANTHROPIC_API_KEY or OPENAI_API_KEY"),
    ):
        svc.search(QUERY, k=3, rerank="llm")


@pytest.fixture
def rerank_server(fake_llm_factory: Callable[..., FakeLLMServer]) -> FakeLLMServer:
    return fake_llm_factory(api_key="rerank-key")


def _http_settings(index: BuiltIndex, server: FakeLLMServer, **more: Any) -> Settings:
    return index.settings_with(
        rerank_url=server.base_url,
        rerank_api_key="rerank-key",
        rerank_model="rerank-v3.5",
        rerank_candidates=30,
        **more,
    )


def test_http_reranker_orders_by_relevance(
    examples_index: BuiltIndex, rerank_server: FakeLLMServer
) -> None:
    with SearchService(_http_settings(examples_index, rerank_server)) as svc:
        fused = svc.search(QUERY, k=30)
        hits = svc.search(QUERY, k=5, rerank="http")
    expected = sorted(fused, key=lambda h: -relevance(QUERY, passage(h)))[:5]
    assert _ids(hits) == _ids(expected)
    assert [h.scores["rerank"].score for h in hits] == [
        pytest.approx(relevance(QUERY, passage(h))) for h in expected
    ]
    [request] = [r for r in rerank_server.requests if r.endpoint == "rerank"]
    assert request.status == 200 and request.body["model"] == "rerank-v3.5"
    assert request.body["top_n"] == 5 and len(request.body["documents"]) == 30


@pytest.mark.parametrize("fault", ["500", "malformed", "slow"])
def test_http_reranker_failure_returns_the_fused_order_flagged(
    examples_index: BuiltIndex, rerank_server: FakeLLMServer, fault: str
) -> None:
    settings = _http_settings(examples_index, rerank_server, rerank_timeout=0.5)
    with SearchService(settings) as svc:
        fused = svc.search(QUERY, k=4)
        rerank_server.inject(fault, delay_s=10)
        hits = svc.search(QUERY, k=4, rerank="http")
    assert _ids(hits) == _ids(fused)
    flag = {
        "500": "rerank failed: HTTP 500",
        "malformed": UNPARSEABLE,
        "slow": "rerank failed: timeout",
    }
    assert all(len(h.flags) == 1 and h.flags[0].startswith(flag[fault]) for h in hits)


def test_http_reranker_needs_a_url(examples_index: BuiltIndex) -> None:
    with (
        SearchService(examples_index.settings_with()) as svc,
        pytest.raises(ConfigError, match="CTXR_RERANK_URL"),
    ):
        svc.search(QUERY, rerank="http")


def test_cross_encoder_without_a_model_names_it(examples_index: BuiltIndex, tmp_path: Path) -> None:
    with SearchService(examples_index.settings_with()) as svc, pytest.raises(ConfigError) as error:
        svc.search(QUERY, rerank="cross-encoder")
    assert "CTXR_RERANK_MODEL_PATH" in str(error.value) and "model.onnx" in str(error.value)
    (tmp_path / "model.onnx").write_bytes(b"")
    settings = examples_index.settings_with(rerank_model_path=tmp_path)
    with SearchService(settings) as svc, pytest.raises(ConfigError, match=r"tokenizer\.json"):
        svc.search(QUERY, rerank="cross-encoder")


def test_cross_encoder_runs_a_local_onnx_model_and_checks_its_output(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    # No cross-encoder weights can be installed here; the bi-encoder MiniLM runs the same code
    # (tokenised pairs through onnxruntime) and is refused for its output shape, flagged.
    (tmp_path / "model.onnx").symlink_to(model_path())
    (tmp_path / "tokenizer.json").symlink_to(tokenizer_path())
    reranker = CrossEncoderReranker(tmp_path)
    with SearchService(examples_index.settings_with()) as svc:
        fused = svc.search(QUERY, k=3)
    result = reranker.rerank(QUERY, fused, 2)
    assert _ids(result.hits) == _ids(fused[:2])
    assert result.flagged is not None and "not one score per pair" in result.flagged


def test_cli_search_rerank_llm_json(
    examples_index: BuiltIndex, llm_env: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXR_CACHE_DIR", str(examples_index.cache_dir))
    monkeypatch.setenv("CTXR_RERANK_CANDIDATES", "10")
    args = ["search", QUERY, "--index", str(examples_index.index_dir), "-k", "3", "--json"]
    plain = CliRunner().invoke(main, [*args, "-k", "10"])
    result = CliRunner().invoke(main, [*args, "--rerank", "llm"])
    assert result.exit_code == 0, result.output
    fused = [h["chunk_id"] for h in json.loads(plain.stdout)["hits"]]
    answer = json.loads(result.stdout)
    hits = answer["hits"]
    assert [h["chunk_id"] for h in hits] == fused[::-1][:3]
    assert all("rerank" in h["scores"] and h["flags"] == [] for h in hits)
    assert answer["warnings"] == []


def test_api_search_with_rerank(examples_index: BuiltIndex, rerank_server: FakeLLMServer) -> None:
    settings = _http_settings(examples_index, rerank_server, rerank_timeout=0.5)
    with TestClient(create_app(settings)) as client:
        good = client.post("/search", json={"query": QUERY, "k": 3, "rerank": "http"})
        rerank_server.inject("slow", delay_s=10)
        slow = client.post("/search", json={"queries": [QUERY], "k": 3, "rerank": "http"})
        plain = client.post("/search", json={"query": QUERY, "k": 3})
    assert good.status_code == 200, good.text
    assert all("rerank" in h["scores"] and h["flags"] == [] for h in good.json()["hits"])
    assert slow.status_code == 200, slow.text
    [answer] = slow.json()["results"]
    hits = answer["hits"]
    assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in plain.json()["hits"]]
    assert all(h["flags"] == ["rerank failed: timeout"] for h in hits)
    assert answer["warnings"] == ["rerank failed: timeout"]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h:8080", "http://h:8080/v1/rerank"),
        ("http://h:8080/v1", "http://h:8080/v1/rerank"),
        ("http://h:8080/v2/", "http://h:8080/v2/rerank"),
        ("https://api.example.com/v1/rerank", "https://api.example.com/v1/rerank"),
        ("http://h/proxy", "http://h/proxy/v1/rerank"),
    ],
)
def test_rerank_endpoint_from_the_configured_url(url: str, expected: str) -> None:
    from ctxr.retrieve.rerank.http import endpoint

    assert endpoint(url) == expected
