"""A prose document's detected natural language: in every chunk's payload, filterable, detected
once per document, and left out for code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.enrich import language
from ctxr.pipeline.build import build_index, index_documents
from ctxr.retrieve.service import SearchService
from ctxr.types import Chunk, Document, chunk_id_for, text_hash
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.paths import UDHR as UDHR_FILE

UDHR = json.loads(UDHR_FILE.read_text())


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for code in ("en", "ja", "de"):
        articles = "\n\n".join(UDHR["texts"][code])
        (corpus / f"udhr-{code}.md").write_text(f"# UDHR ({code})\n\n{articles}\n")
    (corpus / "rights.py").write_text('def rights():\n    """Everyone has rights."""\n')
    return corpus


def _payloads(settings: Settings) -> dict[str, set[str | None]]:
    with SearchService(settings, embedder=HashEmbedder()) as service:
        found: dict[str, set[str | None]] = {}
        for page in service.store.scan():
            for point in page:
                name = Path(point.payload["source"]).name
                found.setdefault(name, set()).add(point.payload.get("natural_language"))
    return found


@pytest.mark.parametrize("budgets", [True, False])
def test_payload_carries_the_detected_language(tmp_path: Path, budgets: bool) -> None:
    settings = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", language_budgets=budgets
    )
    build_index([_corpus(tmp_path)], settings, embedder=HashEmbedder())
    assert _payloads(settings) == {
        "udhr-en.md": {"en"},
        "udhr-ja.md": {"ja"},
        "udhr-de.md": {"de"},
        "rights.py": {None},  # code is not given a natural language
    }  # with budgets off the language is still detected: only the scaling is off


def test_filter_on_natural_language(tmp_path: Path) -> None:
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    build_index([_corpus(tmp_path)], settings, embedder=HashEmbedder())
    with SearchService(settings, embedder=HashEmbedder()) as service:
        japanese = service.search("UDHR", k=20, filters={"natural_language": "ja"})
        either = service.search("UDHR", k=20, filters={"natural_language": ["en", "de"]})
    assert japanese and {Path(h.source).name for h in japanese} == {"udhr-ja.md"}
    assert {Path(h.source).name for h in either} == {"udhr-en.md", "udhr-de.md"}


def test_each_document_is_detected_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    detect = language.detect_windows

    def counting(text: str) -> list[language.Window]:
        seen.append(len(text))
        return detect(text)

    # The budget's module imported the function by name: count the calls it makes.
    monkeypatch.setattr("ctxr.enrich.split.inflation.detect_windows", counting)
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    build_index([_corpus(tmp_path)], settings, embedder=HashEmbedder())
    assert len(seen) == 3  # the three prose documents, once each; none for the code file


def test_a_given_chunker_keeps_its_chunks_and_gets_the_language(tmp_path: Path) -> None:
    # An evaluation set's own chunks: one chunk a document, whatever the budget would say.
    def whole(doc: Document) -> list[Chunk]:
        return [Chunk(chunk_id_for(doc.doc_id, 0), doc.doc_id, 0, doc.text, 0, len(doc.text), 9)]

    texts = {code: "\n\n".join(UDHR["texts"][code]) for code in ("en", "ja")}
    docs = [Document(code, f"udhr-{code}.txt", text, "text", code, text_hash(text))
            for code, text in texts.items()]  # fmt: skip
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    index_documents(docs, settings, chunker=whole, chunker_name="whole", embedder=HashEmbedder())
    assert _payloads(settings) == {"udhr-en.txt": {"en"}, "udhr-ja.txt": {"ja"}}
    with SearchService(settings, embedder=HashEmbedder()) as service:
        assert service.stats()["points"] == 2  # the chunker's chunks, not the splitter's
