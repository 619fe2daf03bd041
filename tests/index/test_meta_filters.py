"""Markdown YAML front matter: payload fields that `meta.KEY` filters match, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxr.cli import main
from ctxr.config import Settings, load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.load.front_matter import front_matter
from ctxr.errors import ConfigError
from ctxr.index.bm25.weights import document_vector, query_vector
from ctxr.index.filters import Match, filters_from_cli, parse_filters
from ctxr.index.store.base import StoredPoint
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from ctxr.types import chunk_id_for
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.stores import BACKENDS, LOCAL_QDRANT_WARNINGS, filled_store, partial_payload

pytestmark = LOCAL_QDRANT_WARNINGS

AUTH = """---
title: Auth API
tags: [api, auth]
year: 2024
draft: false
owner: {team: platform}
---

# Auth API

Lantern tokens expire after an hour.
"""
GUIDE = """---
tags: guide
---

# Lantern guide

Lantern wicks are trimmed nightly.
"""


def test_front_matter_keeps_filterable_scalars_as_text() -> None:
    assert front_matter(AUTH) == {
        "title": "Auth API",
        "tags": ("api", "auth"),
        "year": "2024",
        "draft": "false",
    }  # the nested mapping is left out; it stays in the text
    assert front_matter("# No front matter\n") == {}
    assert front_matter("---\n: not [yaml\n---\n\nBody\n") == {}


@pytest.fixture
def meta_index(tmp_path: Path) -> Iterator[Settings]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "auth.md").write_text(AUTH)
    (corpus / "guide.md").write_text(GUIDE)
    (corpus / "plain.md").write_text("# Plain\n\nLantern oil is stored cold.\n")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    build_index([corpus], settings, embedder=HashEmbedder())
    yield settings


def test_search_filters_on_front_matter(meta_index: Settings) -> None:
    with SearchService(meta_index, embedder=HashEmbedder()) as service:
        api = service.search("lantern", k=10, mode="bm25", filters={"meta.tags": "api"})
        either = service.search(
            "lantern", k=10, mode="bm25", filters={"meta.tags": ["guide", "auth"]}
        )
        year = service.search("lantern", k=10, mode="bm25", filters={"meta.year": 2024})
    assert {Path(h.source).name for h in api} == {"auth.md"}
    assert {Path(h.source).name for h in either} == {"auth.md", "guide.md"}
    assert {Path(h.source).name for h in year} == {"auth.md"}  # 2024 matches the text "2024"


def test_cli_filter_meta_tags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert filters_from_cli(["meta.tags=api", "meta.tags=auth"]) == {"meta.tags": ["api", "auth"]}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "auth.md").write_text(AUTH)
    (corpus / "guide.md").write_text(GUIDE)
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    index = ["--index", str(tmp_path / "idx")]
    built = CliRunner().invoke(main, ["index", str(corpus), *index])
    assert built.exit_code == 0, built.output
    args = ["search", "lantern", *index, "--mode", "bm25", "--json"]
    result = CliRunner().invoke(main, [*args, "--filter", "meta.tags=api"])
    assert result.exit_code == 0, result.output
    assert "auth.md" in result.output and "guide.md" not in result.output


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"meta.": "api"}, "'meta.'"),
        ({"meta.tags": {"gte": 1}}, "'meta.tags'"),
        ({"meta.tags": [True]}, "'meta.tags'"),
        ({"meta.tags": []}, "'meta.tags'"),
        ({"metadata": "x"}, "meta.KEY"),
    ],
)
def test_bad_meta_filters_name_the_key(spec: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_filters(spec)


def test_both_backends_match_meta_lists_and_scalars(tmp_path: Path) -> None:
    doc = load_document(_write(tmp_path, AUTH))
    metas = [{"tags": list(doc.meta["tags"]), "year": "2024"}, {"tags": "guide"}, None]
    points = [
        StoredPoint(
            chunk_id_for(f"d{k}", 0),
            [1.0, float(k), 0.5, 0.25],
            document_vector(["lantern"], avg_len=1.0),
            partial_payload(
                {"doc_id": f"d{k}", "text": "lantern", **({"meta": meta} if meta else {})}
            ),
        )
        for k, meta in enumerate(metas)
    ]
    where = parse_filters({"meta.tags": ["auth", "guide"]})
    assert where is not None and where.conditions == (Match("meta.tags", ("auth", "guide")),)
    for backend in BACKENDS:
        store = filled_store(backend, tmp_path / backend, 4, points)
        hits = store.query_sparse(query_vector(["lantern"]), 10, where)
        assert {r.payload["doc_id"] for r in hits} == {"d0", "d1"}, type(store).__name__
        store.close()


def _write(root: Path, text: str) -> Path:
    path = root / "auth.md"
    path.write_text(text)
    return path
