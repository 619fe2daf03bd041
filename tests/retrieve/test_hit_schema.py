"""The hit schema, pinned: `ctxr.hits/1` as `ctxr search --json`, each `--queries` line,
POST /search (one query and a batch) and the MCP `search` tool write it, for real hits of a
real small index (a Markdown file and a two-page PDF, the local embedder). The key sets and
types below are written out, not read from the model: changing the schema must change this
file, and docs/reference/hits.md, and the version."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.config import Settings, load_settings
from ctxr.pipeline.build import build_index
from ctxr.retrieve.expand import EXPAND_UNAVAILABLE
from tests.fixtures.pdf import make_pdf, sentences

NONE = type(None)
ANSWER: dict[str, tuple[type, ...]] = {
    "schema": (str,), "id": (str, NONE), "query": (str,), "mode": (str,), "fusion": (str, NONE),
    "k": (int,), "merge": (bool,), "expand": (bool,), "warnings": (list,), "hits": (list,),
}  # fmt: skip
HIT: dict[str, tuple[type, ...]] = {
    "rank": (int,), "chunk_id": (str,), "doc_id": (str,), "source": (str,),
    "heading_path": (list,), "start": (int,), "end": (int,), "pages": (list,), "text": (str,),
    "context": (str,), "score": (float,), "scores": (dict,), "expanded": (bool,),
    "flags": (list,),
}  # fmt: skip
SCORE = {"score": (float,), "rank": (int,)}
PDF_QUERY = "topic 203 at length"


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    root = tmp_path_factory.mktemp("hit-schema")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "keeper.md").write_text(
        "# Lighthouse\n\n## Lamp\n\nThe keeper trims the wick and polishes the lens at dusk.\n\n"
        "## Fog\n\nIn fog the horn sounds twice a minute until the weather clears.\n"
    )
    (corpus / "manual.pdf").write_bytes(make_pdf([sentences(1, 6), sentences(2, 6)]))
    settings = load_settings(index_dir=root / "idx", cache_dir=root / "cache", chunk_tokens=40)
    report = build_index([corpus], settings)
    assert report.documents_indexed == 2
    yield settings


def _check(answer: dict[str, Any], query: str, *, id_: str | None = None) -> None:
    assert set(answer) == set(ANSWER)
    for key, types in ANSWER.items():
        assert isinstance(answer[key], types), (key, answer[key])
    assert answer["schema"] == "ctxr.hits/1" and answer["query"] == query
    assert answer["id"] == id_
    assert answer["hits"], "a real hit to pin"
    for hit in answer["hits"]:
        assert set(hit) == set(HIT)
        for key, types in HIT.items():
            assert isinstance(hit[key], types), (key, hit[key])
        assert all(isinstance(h, str) for h in hit["heading_path"])
        assert all(isinstance(p, int) for p in hit["pages"])
        assert all(isinstance(f, str) for f in hit["flags"])
        for name, score in hit["scores"].items():
            assert name in {"dense", "bm25", "bm25_doc", "fused", "rerank"}
            assert set(score) == set(SCORE)
            assert all(isinstance(score[k], t) for k, t in SCORE.items())


def _pdf_hit(answer: dict[str, Any]) -> dict[str, Any]:
    # Chunks overlap by 10%, so more than one may hold "203"; every one is on page 2 alone.
    hit = answer["hits"][0]
    assert hit["source"].endswith("manual.pdf") and "203" in hit["text"]
    assert hit["pages"] == [2]  # the PDF's page, kept from the loader through the payload
    return hit


def _cli(settings: Settings, *args: str) -> Any:
    env = {"CTXR_CACHE_DIR": str(settings.cache_dir), "COLUMNS": "200"}
    return CliRunner().invoke(main, ["search", *args, "--index", str(settings.index_dir)], env=env)


def test_cli_json_and_queries_lines(small_index: Settings, tmp_path: Path) -> None:
    done = _cli(small_index, PDF_QUERY, "-k", "3", "--json")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    _check(answer, PDF_QUERY)
    assert (answer["mode"], answer["fusion"], answer["k"]) == ("hybrid", "dbsf", 3)
    _pdf_hit(answer)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "q1", "query": PDF_QUERY}) + "\n"
                       + json.dumps({"id": 2, "query": "fog horn"}) + "\n")  # fmt: skip
    lines = _cli(small_index, "--queries", str(queries), "-k", "2", "--mode", "bm25")
    assert lines.exit_code == 0, lines.output
    first, second = (json.loads(line) for line in lines.stdout.splitlines())
    _check(first, PDF_QUERY, id_="q1")
    _check(second, "fog horn", id_="2")
    assert first["fusion"] is None and first["mode"] == "bm25"  # fusion is hybrid's only
    _pdf_hit(first)


def test_expand_on_an_index_without_parents_says_so(small_index: Settings) -> None:
    done = _cli(small_index, "fog horn", "-k", "2", "--json", "--expand")
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)
    _check(answer, "fog horn")
    assert answer["expand"] is True
    assert all(not h["expanded"] and h["flags"] == [EXPAND_UNAVAILABLE] for h in answer["hits"])
    assert answer["warnings"] == [EXPAND_UNAVAILABLE]
    warned = " ".join(done.stderr.split())  # rich may wrap it
    assert "warning: not expanded" in warned and "--chunking parent" in warned
    table = _cli(small_index, "fog horn", "-k", "2", "--expand")
    assert "warning: not expanded" in " ".join(table.stderr.split())


def test_http_one_query_and_a_batch(small_index: Settings) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from ctxr.api.app import create_app

    with TestClient(create_app(small_index)) as client:
        one = client.post("/search", json={"query": PDF_QUERY, "k": 3})
        batch = client.post("/search", json={"queries": [PDF_QUERY, "fog horn"], "k": 2})
    assert one.status_code == 200 and batch.status_code == 200, (one.text, batch.text)
    _check(one.json(), PDF_QUERY)
    _pdf_hit(one.json())
    body = batch.json()
    assert set(body) == {"schema", "results"} and body["schema"] == "ctxr.hits/1"
    _check(body["results"][0], PDF_QUERY)
    _check(body["results"][1], "fog horn")


def test_mcp_search_tool(small_index: Settings) -> None:
    pytest.importorskip("mcp", reason="the MCP SDK is not installed")
    from mcp.client import Client

    from ctxr.api.mcp import IndexHolder, create_server

    async def call() -> Any:
        holder = IndexHolder(small_index)
        try:
            async with Client(create_server(small_index, holder)) as client:
                return await client.call_tool("search", {"query": PDF_QUERY, "k": 3})
        finally:
            holder.close()

    result = asyncio.run(call())
    assert not result.is_error
    _check(result.structured_content, PDF_QUERY)
    _pdf_hit(result.structured_content)


def test_the_python_api_hit_is_the_schema_hit(small_index: Settings) -> None:
    # One hit model: what `ctxr.Client` returns is what every face writes, field for field,
    # and a written hit reads back as the same `Hit` (as a served search's hits do).
    import dataclasses

    from pydantic import ValidationError

    from ctxr.client import Client
    from ctxr.retrieve.hits import hit_from_json, hit_json
    from ctxr.types import Hit

    assert {f.name for f in dataclasses.fields(Hit)} == set(HIT)
    with Client(settings=small_index) as client:
        hits = client.search(PDF_QUERY, k=3)
    assert hits and all(isinstance(h, Hit) for h in hits)
    for hit in hits:
        data = hit_json(hit)
        assert set(data) == set(HIT) and hit_from_json(data) == hit
    with pytest.raises(ValidationError, match="colour"):
        hit_from_json({**hit_json(hits[0]), "colour": "red"})
