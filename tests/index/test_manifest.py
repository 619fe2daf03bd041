"""The manifest: round trip, compatibility checks, and clear errors for missing/corrupt files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxr.errors import IndexError_, IndexMismatchError, IndexNotFoundError
from ctxr.index.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    DocumentEntry,
    IndexSettings,
    Manifest,
)

SETTINGS = IndexSettings(
    embedder="onnx:all-MiniLM-L6-v2-int8", dim=384, analyzer="ctxr-bm25/1", bm25_k1=1.2, bm25_b=0.75
)


def _entry(source: str, chunks: int, terms: int) -> DocumentEntry:
    return DocumentEntry(source, "ab" * 32, "recipe0001", chunks, terms, "outline", "2024-01-01")


def test_round_trip(tmp_path: Path) -> None:
    manifest = Manifest(settings=SETTINGS)
    manifest.documents["docs/a.md"] = _entry("docs/a.md", 3, 120)
    manifest.documents["docs/ü.md"] = _entry("docs/ü.md", 1, 10)
    manifest.save(tmp_path)

    loaded = Manifest.load(tmp_path)
    assert loaded.settings == SETTINGS
    assert loaded.documents == manifest.documents
    assert loaded.created_at == manifest.created_at
    assert loaded.updated_at == manifest.updated_at
    assert loaded.chunk_count == 4
    assert loaded.average_terms == pytest.approx(130 / 4)
    body = json.loads((tmp_path / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert body["format"] == FORMAT_VERSION
    assert "docs/ü.md" in body["documents"]
    assert not list(tmp_path.glob("*.tmp"))  # the atomic write leaves no temp file behind


def test_empty_manifest_stats() -> None:
    manifest = Manifest(settings=SETTINGS)
    assert manifest.chunk_count == 0
    assert manifest.average_terms == 0.0


def test_missing_manifest_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError) as info:
        Manifest.load(tmp_path / "nowhere")
    message = str(info.value)
    assert "nowhere" in message
    assert "ctxr index" in message and "--index" in message


@pytest.mark.parametrize(
    "content",
    ["{not json", "[]", '{"format": 1}', '{"format": 1, "settings": {"embedder": "x"}}'],
)
def test_corrupt_manifest_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / MANIFEST_NAME).write_text(content, encoding="utf-8")
    with pytest.raises(IndexError_) as info:
        Manifest.load(tmp_path)
    message = str(info.value)
    assert str(tmp_path / MANIFEST_NAME) in message
    assert "--rebuild" in message


def test_format_mismatch(tmp_path: Path) -> None:
    Manifest(settings=SETTINGS).save(tmp_path)
    path = tmp_path / MANIFEST_NAME
    body = json.loads(path.read_text(encoding="utf-8"))
    body["format"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(IndexMismatchError) as info:
        Manifest.load(tmp_path)
    message = str(info.value)
    assert f"format {FORMAT_VERSION + 1}" in message
    assert "--rebuild" in message


def test_check_compatible_names_every_difference(tmp_path: Path) -> None:
    manifest = Manifest(settings=SETTINGS)
    manifest.check_compatible(SETTINGS, tmp_path)  # same settings: fine
    other = IndexSettings("fake:hash-64", 64, "ctxr-bm25/1", 1.2, 0.75)
    with pytest.raises(IndexMismatchError) as info:
        manifest.check_compatible(other, tmp_path)
    message = str(info.value)
    assert "embedder: index has 'onnx:all-MiniLM-L6-v2-int8', asked for 'fake:hash-64'" in message
    assert "dim: index has 384, asked for 64" in message
    assert "analyzer" not in message
    assert "--rebuild" in message and str(tmp_path) in message


def test_a_stamp_round_trips_and_a_damaged_one_is_no_stamp(tmp_path: Path) -> None:
    manifest = Manifest(settings=SETTINGS)
    manifest.documents["docs/a.md"] = _entry("docs/a.md", 1, 10)
    manifest.documents["docs/b.md"] = _entry("docs/b.md", 1, 10)
    manifest.restamp("docs/a.md", (12, 1_700_000_000_000_000_000, 1_700_000_000_000_000_001, 99))
    assert manifest.restamped
    manifest.save(tmp_path)
    assert not manifest.restamped
    loaded = Manifest.load(tmp_path)
    assert loaded.is_stamped("docs/a.md", manifest.documents["docs/a.md"].stamp or (), "recipe0001")
    assert not loaded.is_stamped("docs/a.md", (13, 0, 0, 99), "recipe0001")  # another size
    assert not loaded.is_stamped("docs/b.md", (12, 0, 0, 99), "recipe0001")  # never stamped
    # A stamp that is not four integers (edited by hand, damaged) means "read the file".
    body = json.loads((tmp_path / MANIFEST_NAME).read_text())
    body["documents"]["docs/a.md"]["stamp"] = [12, "x", None]
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
    assert Manifest.load(tmp_path).documents["docs/a.md"].stamp is None


def test_the_manifest_holds_one_document_a_line(tmp_path: Path) -> None:
    manifest = Manifest(settings=SETTINGS)
    for name in ("docs/a.md", "docs/new\nline.md", 'docs/"quoted".md', "docs/ü.md"):
        manifest.documents[name] = _entry(name, 1, 10)
    manifest.save(tmp_path)
    text = (tmp_path / MANIFEST_NAME).read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) == 2 + len(manifest.documents)  # the head, a line each, the close
    assert any(line.startswith('"docs/ü.md": {') for line in lines)  # grep finds an entry
    assert Manifest.load(tmp_path).documents == manifest.documents


def test_stamps_another_ctxr_recorded_are_not_trusted(tmp_path: Path) -> None:
    # An upgrade may load a file differently (a better extractor): every file is read once.
    manifest = Manifest(settings=SETTINGS)
    manifest.documents["docs/a.md"] = _entry("docs/a.md", 1, 10)
    manifest.restamp("docs/a.md", (12, 1, 2, 3))
    manifest.save(tmp_path)
    assert Manifest.load(tmp_path).documents["docs/a.md"].stamp == (12, 1, 2, 3)
    body = json.loads((tmp_path / MANIFEST_NAME).read_text(encoding="utf-8"))
    body["stamps_by"] = "0.0.1"
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(body), encoding="utf-8")
    older = Manifest.load(tmp_path)
    assert older.documents["docs/a.md"].stamp is None
    assert not older.is_stamped("docs/a.md", (12, 1, 2, 3), "recipe0001")
