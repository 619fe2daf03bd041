"""Walking a corpus and loading files: skips with reasons, bad files named, text kept exact."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.enrich.load.documents import kind_of, load_document
from ctxr.enrich.load.kinds import BINARY_REASON
from ctxr.enrich.load.walk import Skipped, walk
from ctxr.errors import BinaryFileError, LoadError, UndecodableFileError
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from ctxr.types import text_hash
from tests.fakes.hash_embedder import HashEmbedder

PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06"


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_bytes(data.encode("utf-8"))
    return path


def _split(items: list[Path | Skipped]) -> tuple[list[str], dict[str, str]]:
    files = [p.as_posix() for p in items if isinstance(p, Path)]
    skipped = {s.path: s.reason for s in items if isinstance(s, Skipped)}
    return files, skipped


def test_walk_skips_hidden_and_ignored_with_reasons(tmp_path: Path) -> None:
    _write(tmp_path / "a.md", "# A\n\ntext\n")
    _write(tmp_path / "sub" / "b.py", "x = 1\n")
    _write(tmp_path / ".secret.md", "hidden\n")
    _write(tmp_path / ".git" / "config", "[core]\n")
    _write(tmp_path / "build" / "out.txt", "generated\n")
    _write(tmp_path / "notes.log", "log line\n")
    _write(tmp_path / "empty.txt", "")
    _write(tmp_path / ".gitignore", "build/\n*.log\n")

    files, skipped = _split(list(walk([tmp_path], max_file_bytes=1_000_000)))

    assert files == [(tmp_path / "a.md").as_posix(), (tmp_path / "sub" / "b.py").as_posix()]
    assert skipped == {
        str(tmp_path / ".git"): "hidden directory",
        str(tmp_path / "build"): "ignored directory",
        str(tmp_path / ".gitignore"): "hidden file",
        str(tmp_path / ".secret.md"): "hidden file",
        str(tmp_path / "notes.log"): "ignored file",
        str(tmp_path / "empty.txt"): "empty file",
    }


def test_walk_ctxrignore_size_limit_missing_and_explicit_hidden(tmp_path: Path) -> None:
    _write(tmp_path / "keep.txt", "keep\n")
    _write(tmp_path / "drafts" / "wip.md", "# WIP\n")
    _write(tmp_path / "big.txt", "x" * 100)
    _write(tmp_path / ".ctxrignore", "drafts/\n")
    hidden = _write(tmp_path / ".hidden.txt", "named explicitly\n")

    items = list(walk([tmp_path, hidden, tmp_path / "nope"], max_file_bytes=50))
    files, skipped = _split(items)

    assert files == [(tmp_path / "keep.txt").as_posix(), hidden.as_posix()]
    assert skipped[str(tmp_path / "drafts")] == "ignored directory"
    assert "CTXR_MAX_FILE_BYTES" in skipped[str(tmp_path / "big.txt")]
    assert skipped[str(tmp_path / "nope")] == "no such file or directory"


def test_binary_file_named(tmp_path: Path) -> None:
    png = _write(tmp_path / "logo.png", PNG_BYTES)
    with pytest.raises(BinaryFileError) as info:
        load_document(png)
    assert info.value.path == png.as_posix()
    assert png.as_posix() in str(info.value)

    # No telling suffix: the NUL bytes give it away.
    blob = _write(tmp_path / "data.txt", b"header\x00\x01\x02rest")
    with pytest.raises(BinaryFileError, match="NUL") as info:
        load_document(blob)
    assert info.value.path == blob.as_posix()


def test_undecodable_file_named_with_fix(tmp_path: Path) -> None:
    latin = _write(tmp_path / "menu.txt", b"caf\xe9 au lait\n")
    with pytest.raises(UndecodableFileError) as info:
        load_document(latin)
    message = str(info.value)
    assert latin.as_posix() in message
    assert "byte 3" in message and "iconv" in message
    assert isinstance(info.value, LoadError)


def test_whitespace_only_file_is_a_load_error(tmp_path: Path) -> None:
    blank = _write(tmp_path / "blank.md", " \n\t\n")
    with pytest.raises(LoadError, match="only whitespace"):
        load_document(blank)


def test_bom_stripped_and_crlf_kept(tmp_path: Path) -> None:
    path = _write(tmp_path / "bom.md", b"\xef\xbb\xbf# Title\r\n\r\nBody \xe2\x80\x94 text.\r\n")
    doc = load_document(path)
    assert doc.text == "# Title\r\n\r\nBody \u2014 text.\r\n"
    assert not doc.text.startswith("\ufeff")
    assert doc.sha256 == text_hash(doc.text)
    assert doc.doc_id == doc.source == path.as_posix()


@pytest.mark.parametrize(
    ("name", "content", "kind", "language", "title"),
    [
        ("guide.md", "intro\n\n# The Guide\n\nbody\n", "markdown", None, "The Guide"),
        ("no_heading.markdown", "just text\n", "markdown", None, "no_heading.markdown"),
        ("app.py", "# a comment, not a title\nx = 1\n", "code", "python", "app.py"),
        ("main.go", "package main\n", "code", "go", "main.go"),
        ("ui.TSX", "export {}\n", "code", "typescript", "ui.TSX"),
        ("notes.txt", "# not markdown here\n", "text", None, "notes.txt"),
        ("README", "plain\n", "text", None, "README"),
    ],
)
def test_kind_language_title(
    tmp_path: Path, name: str, content: str, kind: str, language: str | None, title: str
) -> None:
    doc = load_document(_write(tmp_path / name, content))
    assert (doc.kind, doc.language, doc.title) == (kind, language, title)
    assert kind_of(Path(name)) == (kind, language)


def test_build_index_reports_bad_files_and_indexes_the_rest(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    good_md = _write(corpus / "guide.md", "# Guide\n\nHow to polish brass lanterns.\n")
    good_py = _write(corpus / "tool.py", "def lantern_polish() -> None:\n    pass\n")
    png = _write(corpus / "logo.png", PNG_BYTES)
    nul = _write(corpus / "dump.txt", b"abc\x00def")
    latin = _write(corpus / "menu.txt", b"caf\xe9 au lait\n")
    _write(corpus / "empty.md", "")
    _write(corpus / ".hidden.md", "# hidden\n")
    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")

    report = build_index([corpus], settings, embedder=HashEmbedder())

    # Binaries are skipped (counted), not failures; only the undecodable text fails.
    failed = dict(report.failed)
    assert set(failed) == {latin.as_posix()}
    assert "not valid UTF-8" in failed[latin.as_posix()]
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons == {
        str(corpus / ".hidden.md"): "hidden file",
        str(corpus / "empty.md"): "empty file",
        png.as_posix(): BINARY_REASON,
        nul.as_posix(): "binary content (NUL bytes); convert it to text to index it",
    }
    assert report.documents_indexed == 2
    assert report.points_total == report.chunks_written >= 2
    body = report.to_json()
    entries = body["failed"]
    assert isinstance(entries, list)
    assert {f["path"] for f in entries} == set(failed)
    manifest = Manifest.load(tmp_path / "idx")
    assert set(manifest.documents) == {good_md.as_posix(), good_py.as_posix()}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_and_utf32_files_with_a_byte_order_mark_are_read(
    tmp_path: Path, encoding: str
) -> None:
    # They used to be refused as "binary (NUL bytes)".
    text = "# Notes\n\nCafé au lait, 3 € — résumé.\n"
    path = tmp_path / "notes.md"
    bom = {"utf-16": b"", "utf-16-be": codecs.BOM_UTF16_BE, "utf-32": b""}[encoding]
    path.write_bytes(bom + text.encode(encoding))
    document = load_document(path)
    assert document.text == text and document.kind == "markdown" and document.title == "Notes"
    (tmp_path / "no-bom.txt").write_bytes("plain".encode("utf-16-le"))
    with pytest.raises(BinaryFileError, match="NUL bytes"):
        load_document(tmp_path / "no-bom.txt")
