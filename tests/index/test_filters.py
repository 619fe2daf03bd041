"""Payload filters: parsing, the same semantics on both backends, and filtering inside search."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.cli import main
from ctxr.errors import ConfigError
from ctxr.index.bm25.weights import document_vector, query_vector
from ctxr.index.filters import (
    AllOf,
    AnyOf,
    Condition,
    Match,
    Not,
    Range,
    filters_from_cli,
    parse_filters,
)
from ctxr.index.payload import source_fields
from ctxr.index.store.base import Store, StoredPoint
from ctxr.retrieve.service import SearchService
from ctxr.types import chunk_id_for
from tests.fixtures.index import BuiltIndex
from tests.fixtures.stores import BACKENDS, LOCAL_QDRANT_WARNINGS, filled_store, partial_payload

pytestmark = LOCAL_QDRANT_WARNINGS

# -- parsing ---------------------------------------------------------------------------------


def test_source_fields_list_every_ancestor_directory() -> None:
    assert source_fields("examples/docs/faq.md") == {
        "source_dirs": ["examples", "examples/docs"],
        "source_dir": "examples/docs",
        "source_ext": ".md",
    }
    assert source_fields("README") == {"source_dirs": [], "source_dir": "", "source_ext": ""}


def test_parse_each_form() -> None:
    assert parse_filters(None) is None
    assert parse_filters({}) is None
    parsed = parse_filters(
        {"kind": ["markdown", "text"], "language": "python", "token_count": {"gte": 5, "lt": 9}}
    )
    assert parsed == AllOf(
        (
            Match("kind", ("markdown", "text")),
            Match("language", ("python",)),
            Range("token_count", gte=5.0, lt=9.0),
        )
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("docs/", Match("source_dirs", ("docs",))),
        ("./docs/", Match("source_dirs", ("docs",))),
        (
            "docs/a.md",
            AnyOf((Match("source", ("docs/a.md",)), Match("source_dirs", ("docs/a.md",)))),
        ),
        ("*.md", Match("source_ext", (".md",))),
        ("**/*.md", Match("source_ext", (".md",))),
        ("docs/*.md", AllOf((Match("source_dir", ("docs",)), Match("source_ext", (".md",))))),
        ("docs/**/*.md", AllOf((Match("source_dirs", ("docs",)), Match("source_ext", (".md",))))),
    ],
)
def test_source_forms(source: str, expected: Condition) -> None:
    assert parse_filters({"source": source}) == AllOf((expected,))


def test_not_turns_any_condition_around() -> None:
    parsed = parse_filters(
        {
            "doc_id": {"not": ["a.md", "b.md"]},
            "source": {"not": "tests/"},
            "token_count": {"not": {"lt": 20}},
            "meta.tags": {"not": 3},
        }
    )
    assert parsed == AllOf(
        (
            Not(Match("doc_id", ("a.md", "b.md"))),
            Not(Match("source_dirs", ("tests",))),
            Not(Range("token_count", lt=20.0)),
            Not(Match("meta.tags", ("3",))),
        )
    )


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"colour": "red"}, "'colour'"),
        ({"kind": 3}, "'kind'"),
        ({"kind": []}, "'kind'"),
        ({"kind": {"gte": 1}}, "'kind'"),
        ({"index": "3"}, "'index'"),
        ({"index": True}, "'index'"),
        ({"token_count": {"between": [1, 2]}}, "'between'"),
        ({"token_count": {"gte": "1"}}, "'token_count'"),
        ({"token_count": {}}, "'token_count'"),
        ({"source": "docs/a*b.md"}, "'source'"),
        ({"source": "do*s/*.md"}, "'source'"),
        ({"source": "docs/*.tar.gz"}, "'source'"),
        ({"source": 7}, "'source'"),
        ({"source": ""}, "'source'"),
        ({"kind": {"not": []}}, "'kind'"),
        ({"kind": {"not": "code", "lt": 3}}, "'kind'"),
        ({"token_count": {"not": 3, "gte": 1}}, "'token_count'"),
        ({"kind": {"not": {"not": "code"}}}, "'kind'"),
        ({"index": {"not": "three"}}, "'index'"),
        ({"source": {"not": "docs/a*b.md"}}, "'source'"),
        ({"meta.tags": {"not": {"gte": 1}}}, "'meta.tags'"),
    ],
)
def test_bad_filters_name_the_key(spec: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_filters(spec)


def test_cli_expressions() -> None:
    spec = filters_from_cli(["kind=markdown", "kind=text", "token_count>=50", "index<3"])
    assert spec == {"kind": ["markdown", "text"], "token_count": {"gte": 50}, "index": {"lt": 3}}
    parse_filters(spec)  # valid as written
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        filters_from_cli(["kind"])
    with pytest.raises(ConfigError, match="'index'"):
        filters_from_cli(["index=three"])


def test_cli_not_equal_is_none_of() -> None:
    spec = filters_from_cli(["doc_id!=a.md", "doc_id!=b.md", "index!=0", "kind=code"])
    assert spec == {"doc_id": {"not": ["a.md", "b.md"]}, "index": {"not": 0}, "kind": "code"}
    parse_filters(spec)  # valid as written
    for mixed in (["kind=code", "kind!=text"], ["kind!=text", "kind=code"],
                  ["index<3", "index!=1"], ["index!=1", "index<3"]):  # fmt: skip
        with pytest.raises(ConfigError, match="mix of"):
            filters_from_cli(mixed)


# -- the same semantics on both backends, and as a plain Python reference ---------------------

DIM = 8
SOURCES = ["docs/a.md", "docs/b.txt", "docs/deep/c.md", "src/d.py", "src/docs/e.md", "f.md"]


def _points() -> list[StoredPoint]:
    rng = random.Random(3)
    points = []
    for n in range(60):
        source = SOURCES[n % len(SOURCES)]
        kind = {"md": "markdown", "py": "code"}.get(source.rsplit(".", 1)[-1], "text")
        terms = [rng.choice(["oil", "wick", "glass", "brass"]) for _ in range(rng.randint(1, 6))]
        payload = {
            "doc_id": source,
            "source": source,
            **source_fields(source),
            "kind": kind,
            "language": "python" if kind == "code" else None,
            "index": n // len(SOURCES),
            "token_count": rng.randint(10, 300),
            "heading_path": ["Intro", f"Part {n % 3}"],
            "text": " ".join(terms),
        }
        points.append(
            StoredPoint(
                chunk_id_for(source, n // len(SOURCES)),
                [rng.uniform(-1, 1) for _ in range(DIM)],
                document_vector(terms, avg_len=3.5),
                partial_payload(payload),
            )
        )
    return points


POINTS = _points()


def _admits(payload: Mapping[str, Any], c: Condition) -> bool:
    if isinstance(c, AllOf):
        return all(_admits(payload, x) for x in c.conditions)
    if isinstance(c, AnyOf):
        return any(_admits(payload, x) for x in c.conditions)
    if isinstance(c, Not):
        return not _admits(payload, c.condition)
    value = payload.get(c.key)
    if isinstance(c, Range):
        return (
            isinstance(value, int)
            and (c.gt is None or value > c.gt)
            and (c.gte is None or value >= c.gte)
            and (c.lt is None or value < c.lt)
            and (c.lte is None or value <= c.lte)
        )
    held = value if isinstance(value, list) else [value]
    return any(v in c.values for v in held)


CASES: list[dict[str, Any]] = [
    {"source": "docs/"},
    {"source": "docs"},
    {"source": "docs/a.md"},
    {"source": ["docs/a.md", "src/"]},
    {"source": "*.md"},
    {"source": "docs/*.md"},
    {"source": "docs/**/*.md"},
    {"kind": ["markdown", "code"]},
    {"language": "python"},
    {"heading_path": "Part 1"},
    {"index": [0, 2]},
    {"token_count": {"gte": 100, "lt": 200}},
    {"source": "docs/", "token_count": {"lte": 150}, "kind": "markdown"},
    {"source": "nowhere/"},
    {"doc_id": {"not": ["docs/a.md", "src/d.py"]}},
    {"source": {"not": "docs/"}},
    {"source": {"not": "docs/**/*.md"}},
    {"language": {"not": "python"}},  # prose chunks lack a language and pass
    {"heading_path": {"not": "Part 1"}},
    {"token_count": {"not": {"gte": 100, "lt": 200}}, "kind": "markdown"},
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Store]]:
    made = {b: filled_store(b, tmp_path_factory.mktemp(b) / "shard", DIM, POINTS) for b in BACKENDS}
    yield made
    for store in made.values():
        store.close()


@pytest.mark.parametrize("spec", CASES, ids=[str(c) for c in CASES])
def test_both_backends_admit_exactly_what_the_filter_says(
    stores: dict[str, Store], spec: dict[str, Any]
) -> None:
    where = parse_filters(spec)
    assert where is not None
    expected = {p.point_id for p in POINTS if _admits(p.payload, where)}
    sparse = query_vector(["oil", "wick", "glass", "brass"])
    for name, store in stores.items():
        dense = store.query_dense(POINTS[0].dense, len(POINTS), where)
        assert {r.point_id for r in dense} == expected, name
        bm25 = store.query_sparse(sparse, len(POINTS), where)
        assert {r.point_id for r in bm25} == expected, name  # every point has one of the terms
    top = [[r.point_id for r in s.query_dense(POINTS[5].dense, 3, where)] for s in stores.values()]
    assert top[0] == top[1]
    assert len(top[0]) == min(3, len(expected))  # the limit counts admitted points only


# -- inside search, on the examples index -------------------------------------------------------


@pytest.fixture
def service(examples_index: BuiltIndex) -> Iterator[SearchService]:
    with SearchService(examples_index.settings) as opened:
        yield opened


@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
def test_filter_is_applied_inside_the_retrievers(service: SearchService, mode: str) -> None:
    # "migration lock" is about docs and release notes; only lumen/ code may come back, and
    # still k of it, which filtering after a top-k search could not promise.
    assert len(service._store.document_points("examples/lumen/thumbnails.py")) >= 5
    query = "database migration lock held during restore from backup"
    hits = service.search(query, k=5, mode=mode, filters={"source": "examples/lumen/"})
    assert len(hits) == 5
    assert all(h.source.startswith("examples/lumen/") for h in hits)
    unfiltered = service.search(query, k=5, mode=mode)
    assert not all(h.source.startswith("examples/lumen/") for h in unfiltered)


def test_glob_kind_and_range_filters(service: SearchService) -> None:
    hits = service.search("configuration", k=10, filters={"source": "examples/docs/*.md"})
    assert hits and all(h.source.startswith("examples/docs/") for h in hits)
    assert all(h.source.endswith(".md") for h in hits)
    code = service.search("cache", k=8, filters={"kind": "code"})
    assert {h.source.rsplit(".", 1)[-1] for h in code} <= {"py", "go", "ts"}
    first_chunks = service.search("configuration", k=5, filters={"index": {"lte": 0}})
    assert first_chunks
    for hit in first_chunks:
        assert service.document(hit.doc_id)["chunks"][0]["chunk_id"] == hit.chunk_id  # type: ignore[index]
    small = service.search("configuration", k=5, filters={"token_count": {"lt": 60}})
    for hit in small:
        chunk = next(
            c
            for c in service.document(hit.doc_id)["chunks"]  # type: ignore[index]
            if c["chunk_id"] == hit.chunk_id
        )
        assert chunk["token_count"] < 60
    assert service.search("configuration", k=5, filters={"source": "nowhere/"}) == []


def test_a_document_left_out_is_searched_as_if_the_corpus_lacked_it(
    service: SearchService,
) -> None:
    query = "database migration lock held during restore from backup"
    first = service.search(query, k=10)
    left_out = first[0].doc_id
    hits = service.search(query, k=10, filters={"doc_id": {"not": left_out}})
    assert hits and left_out not in {h.doc_id for h in hits}
    # A document field's negation keeps the whole-document ranking (`is_document_level`).
    assert any("bm25_doc" in h.scores for h in hits)


def test_unknown_field_is_a_config_error(service: SearchService) -> None:
    with pytest.raises(ConfigError, match="'colour'"):
        service.search("x", filters={"colour": "red"})


# -- the HTTP API and the CLI -------------------------------------------------------------------


def test_api_filters_and_unknown_field(examples_index: BuiltIndex) -> None:
    settings = examples_index.settings_with()
    with TestClient(create_app(settings)) as client:
        body = {"query": "retry budget", "k": 3, "filters": {"source": "examples/lumen/"}}
        response = client.post("/search", json=body)
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]
        assert len(hits) == 3 and all(h["source"].startswith("examples/lumen/") for h in hits)
        response = client.post("/search", json={"query": "x", "filters": {"colour": "red"}})
        assert response.status_code == 422
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", "filters"] and "'colour'" in error["msg"]
        response = client.post("/search", json={"query": "x", "filters": {"index": {"near": 1}}})
        assert response.status_code == 422 and "'near'" in response.text
        body = {"query": "retry budget", "k": 3, "filters": {"kind": {"not": "code"}}}
        response = client.post("/search", json=body)
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]
        assert len(hits) == 3 and not any(h["source"].endswith((".py", ".go", ".ts")) for h in hits)
        body = {"query": "x", "filters": {"kind": {"not": "code", "gte": 1}}}
        response = client.post("/search", json=body)
        assert response.status_code == 422 and "'not' stands alone" in response.text


def test_cli_filter_and_merge(examples_index: BuiltIndex, tmp_path: Path) -> None:
    args = ["search", "retry", "--index", str(examples_index.index_dir), "--json", "-k", "4"]
    result = CliRunner().invoke(
        main, [*args, "--filter", "source=examples/lumen/ratelimit.go", "--merge"]
    )
    assert result.exit_code == 0, result.output
    assert '"source": "examples/lumen/ratelimit.go"' in result.output
    assert '"source": "examples/docs' not in result.output
    result = CliRunner().invoke(main, [*args, "--filter", "source!=examples/lumen/"])
    assert result.exit_code == 0, result.output
    assert '"source": "examples/lumen/' not in result.output
    result = CliRunner().invoke(main, [*args, "--filter", "colour=red"])
    assert result.exit_code != 0 and "'colour'" in result.output


def test_filter_and_index_fields_are_payload_fields() -> None:
    from ctxr.index.filters import FIELDS
    from ctxr.index.payload import KEYWORD_FIELDS, ChunkPayload

    schema = ChunkPayload.__required_keys__ | ChunkPayload.__optional_keys__
    assert set(FIELDS) <= schema and set(KEYWORD_FIELDS) <= schema
