"""A prose document's detected natural language: in every chunk's payload, filterable, detected
once per document, and left out for code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.hash_embedder import HashEmbedder

from ctxr.config import Settings, load_settings
from ctxr.enrich import language
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService

UDHR = json.loads((Path(__file__).parents[1] / "data/languages/udhr_1_3.json").read_text())


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
