"""The HTTP API through the real ASGI app (httpx transport) and a real uvicorn on loopback.

A qdrant-edge shard can be open in one place at a time, so each class holds its own app over
the session's examples index and closes it when the class is done: `TestInProcess` with a
bearer token set, `TestOverLoopback` without one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.cli import main
from ctxr.config import load_settings
from ctxr.retrieve.hits import hit_json
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT
from tests.fixtures.servers import serving

TOKEN = "s3cret-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERY = "fix LUM-E310 migration lock held"


def _access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "ctxr.api.access"]


@pytest.fixture(scope="class")
def client(examples_index: BuiltIndex) -> Iterator[TestClient]:
    settings = examples_index.settings_with(api_token=TOKEN, api_max_batch=4, api_max_k=20)
    with TestClient(create_app(settings)) as opened:
        yield opened


class TestInProcess:
    def test_health_is_open_and_ok(self, client: TestClient) -> None:
        response = client.get("/health")
        assert (response.status_code, response.json()) == (200, {"status": "ok"})

    def test_every_other_path_needs_the_token(self, client: TestClient) -> None:
        paths = ["/search", "/stats", "/openapi.json", "/docs", "/documents/x", "/nowhere"]
        for method, path in [("POST" if p == "/search" else "GET", p) for p in paths]:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                response = client.request(method, path, headers=headers, json={"query": "x"})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["www-authenticate"] == "Bearer"
                assert TOKEN not in response.text
        assert client.get("/openapi.json", headers=AUTH).status_code == 200
        assert client.get("/docs", headers=AUTH).status_code == 200
        assert client.get("/stats", headers={"Authorization": f"bearer  {TOKEN}"}).is_success

    def test_search_one_query(self, client: TestClient) -> None:
        response = client.post("/search", headers=AUTH, json={"query": QUERY, "k": 3})
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["mode"], body["fusion"], body["k"]) == ("hybrid", "dbsf", 3)
        assert "results" not in body
        hits = body["hits"]
        assert [h["rank"] for h in hits] == [1, 2, 3]
        assert hits[0]["source"] == "examples/docs/faq.md" and "LUM-E310" in hits[0]["text"]
        # faq.md is short prose: its whole text is the third ranking (bm25_doc).
        assert set(hits[0]["scores"]) == {"dense", "bm25", "bm25_doc"}
        service: SearchService = client.app.state.holder.service  # type: ignore[attr-defined]
        assert hits == [hit_json(h) for h in service.search(QUERY, 3)]  # same as the Python API
        assert response.headers["server-timing"].startswith("search;dur=")

    def test_search_batch_modes_and_fusion(self, client: TestClient) -> None:
        queries = [QUERY, "how do I back up and restore the library"]
        for mode in ("hybrid", "dense", "bm25"):
            for fusion in ("dbsf", "rrf"):
                body = {"queries": queries, "k": 4, "mode": mode, "fusion": fusion,
                        "candidates": 20}  # fmt: skip
                response = client.post("/search", headers=AUTH, json=body)
                assert response.status_code == 200, response.text
                results = response.json()["results"]
                assert [r["query"] for r in results] == queries
                assert all(len(r["hits"]) == 4 for r in results)
                assert {r["fusion"] for r in results} == {fusion if mode == "hybrid" else None}
                expected = {"hybrid": {"dense", "bm25"}, "dense": {"dense"}, "bm25": {"bm25"}}
                got = set(results[0]["hits"][0]["scores"]) - {"bm25_doc"}  # short prose: third
                assert got == expected[mode]
                assert mode == "hybrid" or "bm25_doc" not in results[0]["hits"][0]["scores"]

    @pytest.mark.parametrize(
        ("body", "loc", "kind"),
        [
            ({"query": "x" * 2001}, ["body", "query"], "string_too_long"),
            ({"queries": ["ok", "x" * 2001]}, ["body", "queries", 1], "string_too_long"),
            ({"queries": ["q"] * 5}, ["body", "queries"], "too_long"),
            ({"queries": []}, ["body", "queries"], "too_short"),
            ({"query": "x", "k": 21}, ["body", "k"], "less_than_equal"),
            ({"query": "x", "k": 0}, ["body", "k"], "greater_than_equal"),
            ({"query": "x", "candidates": 1001}, ["body", "candidates"], "less_than_equal"),
            ({"query": "x", "mode": "fuzzy"}, ["body", "mode"], "literal_error"),
            ({"query": "x", "fusion": "max"}, ["body", "fusion"], "literal_error"),
            ({"query": "   "}, ["body", "query"], "string_pattern_mismatch"),
            ({"query": "x", "filters": {"colour": "red"}}, ["body", "filters"], "value_error"),
            ({"query": "x", "filter": {"kind": "code"}}, ["body", "filter"], "extra_forbidden"),
            ({"query": "x", "queries": ["y"]}, ["body"], "value_error"),
            ({}, ["body"], "value_error"),
        ],
    )
    def test_limits_and_bad_fields_are_422_naming_the_field(
        self, client: TestClient, body: dict[str, Any], loc: list[Any], kind: str
    ) -> None:
        response = client.post("/search", headers=AUTH, json=body)
        assert response.status_code == 422, response.text
        errors = response.json()["detail"]
        assert any(e["loc"] == loc and e["type"] == kind for e in errors), errors
        assert "x" * 101 not in response.text  # a long rejected query is not echoed back

    def test_unknown_reranker_is_422_naming_the_field(self, client: TestClient) -> None:
        response = client.post("/search", headers=AUTH, json={"query": "x", "rerank": "magic"})
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "rerank"]

    @pytest.mark.parametrize(
        ("raw", "loc"),
        [
            (b'{"query": "\\ud800x"}', ["body", "query"]),  # a lone surrogate
            (b'{"queries": ["ok", "\\udfffx"]}', ["body", "queries", 1]),
            (b'{"query": "x", "k": NaN}', ["body", "k"]),
            (b'{"query": "x", "k": "5"}', ["body", "k"]),  # strict: no coercion
            (b'{"query": "x", "k": true}', ["body", "k"]),
            (b'{"query": "x", "merge": "yes"}', ["body", "merge"]),
        ],
    )
    def test_inputs_json_cannot_echo_or_types_that_do_not_match_are_422(
        self, client: TestClient, raw: bytes, loc: list[Any]
    ) -> None:
        # These were 500s: the 422 handler itself failed to serialise NaN or a surrogate.
        headers = {**AUTH, "Content-Type": "application/json"}
        response = client.post("/search", headers=headers, content=raw)
        assert response.status_code == 422, response.text
        assert any(e["loc"] == loc for e in response.json()["detail"]), response.text

    def test_an_unknown_document_id_is_not_echoed_whole(self, client: TestClient) -> None:
        response = client.get("/documents/" + "x" * 20_000, headers=AUTH)
        assert response.status_code == 404 and len(response.text) < 600
        assert "20,000 characters" in response.json()["detail"]

    def test_malformed_json_is_422(self, client: TestClient) -> None:
        for raw in (b'{"query": ', b"[1, 2]", b'"just a string"'):
            response = client.post(
                "/search", headers={**AUTH, "Content-Type": "application/json"}, content=raw
            )
            assert response.status_code == 422, raw

    def test_body_over_the_limit_is_413_before_parsing(self, client: TestClient) -> None:
        big = json.dumps({"query": "x", "pad": "y" * 70_000}).encode()
        response = client.post(
            "/search", headers={**AUTH, "Content-Type": "application/json"}, content=big
        )
        assert response.status_code == 413
        assert "CTXR_API_MAX_BODY_BYTES" in response.json()["detail"]
        # not even malformed JSON gets parsed once the size is over
        junk = client.post("/search", headers=AUTH, content=b"{" * 65_537)
        assert junk.status_code == 413

    def test_stats(self, client: TestClient, examples_index: BuiltIndex) -> None:
        body = client.get("/stats", headers=AUTH).json()
        assert body["points"] == examples_index.report.points_total
        assert body["documents"] == 10
        assert body["backend"] == "edge"
        assert body["settings"]["dim"] == 384 and body["settings"]["embedder"].startswith("onnx:")
        assert body["search"]["max_k"] == 20 and body["search"]["fusion"] == "dbsf"
        assert body["search"]["max_rerank_queries"] == 4  # what a client may batch with llm
        assert 0 <= body["age_seconds"] < 3600
        assert TOKEN not in json.dumps(body)

    def test_documents(self, client: TestClient) -> None:
        hit = client.post("/search", headers=AUTH, json={"query": QUERY, "k": 1}).json()["hits"][0]
        response = client.get(f"/documents/{hit['doc_id']}", headers=AUTH)
        assert response.status_code == 200
        doc = response.json()
        assert doc["doc_id"] == doc["source"] == "examples/docs/faq.md"
        chunks = doc["chunks"]
        assert [c["index"] for c in chunks] == list(range(len(chunks))) and len(chunks) > 1
        assert all(c["context"] for c in chunks)
        assert chunks[hit_index(chunks, hit)]["text"] == hit["text"]
        text = (ROOT / doc["source"]).read_bytes().decode("utf-8-sig")
        assert all(text[c["start"] : c["end"]] == c["text"] for c in chunks)
        missing = client.get("/documents/examples/no/such.md", headers=AUTH)
        assert missing.status_code == 404 and "examples/no/such.md" in missing.json()["detail"]

    def test_access_log_has_no_token_and_no_query_unless_asked(
        self, client: TestClient, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        caplog.set_level(logging.INFO, logger="ctxr.api.access")
        client.post("/search", headers=AUTH, json={"queries": [QUERY, "kettle"], "k": 2})
        client.get("/stats", headers={"Authorization": "Bearer nope"})
        search, refused = _access_lines(caplog)
        assert search["method"] == "POST" and search["path"] == "/search"
        assert (search["status"], search["queries"], search["k"], search["mode"]) == (
            200, 2, 2, "hybrid"
        )  # fmt: skip
        assert search["duration_ms"] > 0 and refused["status"] == 401
        assert "query_text" not in search
        assert all(TOKEN not in r.getMessage() and "LUM-E310" not in r.getMessage()
                   for r in caplog.records)  # fmt: skip
        caplog.clear()
        monkeypatch.setattr(client.app.state.holder.settings.api, "api_log_queries", True)  # type: ignore[attr-defined]
        client.post("/search", headers=AUTH, json={"query": QUERY, "k": 1})
        assert _access_lines(caplog)[0]["query_text"] == [QUERY]


def hit_index(chunks: list[dict[str, Any]], hit: dict[str, Any]) -> int:
    return next(i for i, c in enumerate(chunks) if c["chunk_id"] == hit["chunk_id"])


# -- without an index ------------------------------------------------------------------------


def test_missing_index_starts_and_says_so(tmp_path: Path) -> None:
    app = create_app(load_settings(index_dir=tmp_path / "nothing-here"))
    with TestClient(app) as client:  # no token set: nothing asks for one
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
        assert "no ctxr index" in health.json()["reason"]
        for response in (
            client.post("/search", json={"query": "x"}),
            client.get("/stats"),
            client.get("/documents/a.md"),
        ):
            assert response.status_code == 503 and "ctxr index" in response.json()["detail"]
        assert client.get("/openapi.json").status_code == 200


def test_incompatible_index_is_503_with_the_fix(examples_index: BuiltIndex) -> None:
    with TestClient(create_app(examples_index.settings_with(bm25_k1=2.0))) as client:
        health = client.get("/health")
        assert health.status_code == 503 and "--rebuild" in health.json()["reason"]


# -- a real uvicorn on loopback ------------------------------------------------------------


@pytest.fixture(scope="class")
def base_url(examples_index: BuiltIndex) -> Iterator[str]:
    app = create_app(examples_index.settings_with(api_max_body_bytes=4096))
    with serving(app) as url:
        yield url


class TestOverLoopback:
    def test_health_and_search_without_a_token(self, base_url: str) -> None:
        assert httpx.get(f"{base_url}/health").json() == {"status": "ok"}
        response = httpx.post(f"{base_url}/search", json={"query": QUERY, "k": 2})
        assert response.status_code == 200
        assert response.json()["hits"][0]["source"] == "examples/docs/faq.md"
        assert httpx.get(f"{base_url}/stats").status_code == 200
        assert httpx.get(f"{base_url}/docs").status_code == 200

    def test_concurrent_searches_agree_with_sequential_ones(self, base_url: str) -> None:
        bodies = [{"query": q, "k": 5, "mode": m}
                  for q in (QUERY, "backup and restore", "thumbnail cache size")
                  for m in ("hybrid", "dense", "bm25")]  # fmt: skip

        async def drive() -> list[list[str]]:
            async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
                responses = await asyncio.gather(
                    *(http.post("/search", json=bodies[i % len(bodies)]) for i in range(45))
                )
            assert all(r.status_code == 200 for r in responses)
            return [[h["chunk_id"] for h in r.json()["hits"]] for r in responses]

        concurrent = asyncio.run(drive())
        with httpx.Client(base_url=base_url) as http:
            alone = [[h["chunk_id"] for h in http.post("/search", json=b).json()["hits"]]
                     for b in bodies]  # fmt: skip
        assert concurrent == [alone[i % len(bodies)] for i in range(45)]

    def test_limits_over_the_wire(self, base_url: str) -> None:
        assert httpx.post(f"{base_url}/search", json={"query": "x", "k": 101}).status_code == 422
        bad = httpx.post(
            f"{base_url}/search", content=b"{nope", headers={"Content-Type": "application/json"}
        )
        assert bad.status_code == 422
        sized = httpx.post(f"{base_url}/search", content=b" " * 5000)
        assert sized.status_code == 413

        def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"query": "'
            for _ in range(10):
                yield b"y" * 1000

        streamed = httpx.post(f"{base_url}/search", content=chunked())
        assert streamed.status_code == 413

    @pytest.mark.parametrize("size", [2_000_000, 20_000_000])
    def test_a_client_that_sends_its_whole_body_first_reads_the_413(
        self, base_url: str, size: int
    ) -> None:
        # urllib writes the whole body before it reads a byte: answered at once and closed,
        # it saw ECONNRESET or EPIPE instead of the status (20 MB: 3 of 3 before the drain).
        for _ in range(3):
            request = urllib.request.Request(
                f"{base_url}/search", data=b"x" * size, headers={"Content-Type": "application/json"}
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 413
            assert "CTXR_API_MAX_BODY_BYTES" in refused.value.read().decode()


def test_serve_command_is_there() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert result.exit_code == 0 and "--port" in result.output and "127.0.0.1" in result.output
