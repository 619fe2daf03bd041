"""Embedders trained with roles read one before the text: e5's "query: " and "passage: ",
nomic's "search_query: " and "search_document: ". ctxr puts the configured prefix before
every chunk it embeds and every query it searches, records both in the index, and refuses
an index made with another pair."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.errors import IndexMismatchError
from ctxr.index.embed.base import EmbedderWrapper, FloatMatrix
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder

QUERY_PREFIX = "query: "
DOCUMENT_PREFIX = "passage: "


class Reading(EmbedderWrapper):
    """The hash embedder, keeping every text it was given to read."""

    def __init__(self) -> None:
        super().__init__(HashEmbedder())
        self.read: list[str] = []

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        self.read.extend(texts)
        return self.inner.embed(texts)


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "kettle.md").write_text(
        "# Kettle\n\nThe kettle whistles when the water boils.\n", encoding="utf-8"
    )
    (folder / "lamp.md").write_text(
        "# Lamp\n\nThe lamp is lit at dusk by the keeper.\n", encoding="utf-8"
    )
    return folder


def _settings(
    tmp_path: Path, query: str = QUERY_PREFIX, document: str = DOCUMENT_PREFIX
) -> Settings:
    return load_settings(
        index_dir=tmp_path / "idx",
        cache_dir=tmp_path / "cache",
        embedding_query_prefix=query,
        embedding_document_prefix=document,
    )


def test_the_embedder_reads_each_chunk_and_each_query_after_its_prefix(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    reading = Reading()
    report = build_index([_corpus(tmp_path / "docs")], settings, embedder=reading)
    assert report.chunks_written == len(reading.read) == 2
    assert all(t.startswith(DOCUMENT_PREFIX) for t in reading.read)
    assert not any(t.startswith(DOCUMENT_PREFIX * 2) for t in reading.read)
    assert Manifest.load(settings.index_dir).settings.query_prefix == QUERY_PREFIX
    reading.read.clear()
    with SearchService(settings, embedder=reading) as service:
        hits = service.search("when does the kettle whistle", k=2)
    assert reading.read == [QUERY_PREFIX + "when does the kettle whistle"]
    assert hits and hits[0].source.endswith("kettle.md")


def test_no_prefix_is_the_text_as_it_was(tmp_path: Path) -> None:
    reading = Reading()
    build_index([_corpus(tmp_path / "docs")], _settings(tmp_path, "", ""), embedder=reading)
    assert len(reading.read) == 2
    assert not any(t.startswith((QUERY_PREFIX, DOCUMENT_PREFIX)) for t in reading.read)


@pytest.mark.parametrize(
    ("query", "document", "named"),
    [("", DOCUMENT_PREFIX, "query_prefix"), (QUERY_PREFIX, "", "document_prefix")],
)
def test_an_index_refuses_another_pair_of_prefixes(
    tmp_path: Path, query: str, document: str, named: str
) -> None:
    build_index([_corpus(tmp_path / "docs")], _settings(tmp_path), embedder=HashEmbedder())
    other = _settings(tmp_path, query, document)
    with pytest.raises(IndexMismatchError, match=rf"{named}: index has .*--rebuild"):
        SearchService(other, embedder=HashEmbedder())
    with pytest.raises(IndexMismatchError, match=named):
        build_index([tmp_path / "docs"], other, embedder=HashEmbedder())


def test_an_index_made_before_the_prefixes_opens_as_one_without_them(tmp_path: Path) -> None:
    settings = _settings(tmp_path, "", "")
    build_index([_corpus(tmp_path / "docs")], settings, embedder=HashEmbedder())
    path = settings.index_dir / MANIFEST_NAME
    body = json.loads(path.read_text(encoding="utf-8"))
    del body["settings"]["query_prefix"], body["settings"]["document_prefix"]
    path.write_text(json.dumps(body), encoding="utf-8")
    with SearchService(settings, embedder=HashEmbedder()) as service:
        assert service.search("lamp keeper", k=1)


def test_a_prefix_that_ends_in_a_space_keeps_it_in_a_dotenv_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        'CTXR_EMBEDDING_QUERY_PREFIX="query: "\nCTXR_EMBEDDING_DOCUMENT_PREFIX="passage: "\n',
        encoding="utf-8",
    )
    embed = load_settings().embed
    assert (embed.embedding_query_prefix, embed.embedding_document_prefix) == (
        QUERY_PREFIX,
        DOCUMENT_PREFIX,
    )
