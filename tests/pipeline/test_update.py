"""`update_index`, the live index's step: only the changed paths are read, under the same walk
rules as `ctxr index`, and what is gone or now skipped leaves the index."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxr.config import Settings, load_settings
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from ctxr.pipeline.update import changed_targets, update_index
from ctxr.retrieve.service import SearchService
from tests.fakes.hash_embedder import HashEmbedder


def _settings(tmp_path: Path) -> Settings:
    return load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")


def _sources(settings: Settings, query: str) -> set[str]:
    with SearchService(settings, embedder=HashEmbedder()) as service:
        return {hit.source for hit in service.search(query, k=50, mode="bm25")}


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny folder, indexed from its parent as `ctxr index docs` would be."""
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "a.md").write_text("# Alpha\n\nThe aardvark sleeps in the archive.\n")
    (docs / "guide" / "b.md").write_text("# Beta\n\nThe badger guards the backups.\n")
    (docs / ".ctxrignore").write_text("drafts/\n*.tmp\n")
    build_index(["docs"], _settings(tmp_path), embedder=HashEmbedder())
    return docs


def test_only_changed_files_are_read_and_written(corpus: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (corpus / "c.md").write_text("# Gamma\n\nThe gecko counts the candles.\n")
    embedder = HashEmbedder()
    report = update_index(["docs"], [corpus / "c.md"], settings, embedder=embedder)
    assert (report.files_seen, report.documents_indexed, report.documents_removed) == (1, 1, 0)
    assert embedder.texts_embedded == report.chunks_written > 0
    assert _sources(settings, "gecko candles") == {"docs/c.md"}  # the id `ctxr index docs` gives
    # Saved again unchanged: nothing to do.
    again = update_index(["docs"], [str(corpus / "c.md")], settings, embedder=embedder)
    assert (again.documents_unchanged, again.chunks_written) == (1, 0)


def test_a_deleted_file_or_directory_leaves_the_index(corpus: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (corpus / "a.md").unlink()
    report = update_index(["docs"], [corpus / "a.md"], settings, embedder=HashEmbedder())
    assert report.documents_removed == 1 and report.chunks_removed >= 1
    assert "docs/a.md" not in _sources(settings, "aardvark archive")
    (corpus / "guide" / "b.md").unlink()
    (corpus / "guide").rmdir()
    report = update_index(["docs"], [corpus / "guide"], settings, embedder=HashEmbedder())
    assert report.documents_removed == 1
    assert Manifest.load(tmp_path / "idx").documents == {}


def test_files_the_walk_skips_are_not_indexed_and_leave_when_they_become_skipped(
    corpus: Path, tmp_path: Path
) -> None:
    settings = _settings(tmp_path)
    (corpus / "drafts").mkdir()
    (corpus / "drafts" / "d.md").write_text("# Draft\n\nThe dingo drafts.\n")
    (corpus / "e.tmp").write_text("The emu is temporary.\n")
    (corpus / ".hidden.md").write_text("The heron hides.\n")
    (corpus / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    changed = [corpus / n for n in ("drafts/d.md", "e.tmp", ".hidden.md", "logo.png")]
    report = update_index(["docs"], changed, settings, embedder=HashEmbedder())
    assert report.documents_indexed == 0
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert reasons["drafts"] == "ignored directory" and reasons["e.tmp"] == "ignored file"
    assert "logo.png" in reasons and ".hidden.md" not in reasons  # hidden: never even walked
    # An indexed file emptied in the editor is no longer what the index says: it goes.
    (corpus / "a.md").write_text("")
    report = update_index(["docs"], [corpus / "a.md"], settings, embedder=HashEmbedder())
    assert report.documents_removed == 1
    assert "docs/a.md" not in Manifest.load(tmp_path / "idx").documents


def test_a_changed_ignore_file_rereads_the_folder(corpus: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (corpus / ".ctxrignore").write_text("drafts/\n*.tmp\nguide/\n")
    report = update_index(["docs"], [corpus / ".ctxrignore"], settings, embedder=HashEmbedder())
    assert report.documents_removed == 1  # guide/b.md is ignored now
    assert set(Manifest.load(tmp_path / "idx").documents) == {"docs/a.md"}


def test_a_directory_moved_in_is_read_whole(corpus: Path, tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (tmp_path / "outside" / "deep").mkdir(parents=True)
    (tmp_path / "outside" / "deep" / "f.md").write_text("# F\n\nThe ferret fetches.\n")
    (tmp_path / "outside").rename(corpus / "moved")
    report = update_index(["docs"], [corpus / "moved"], settings, embedder=HashEmbedder())
    assert report.documents_indexed == 1
    assert _sources(settings, "ferret fetches") == {"docs/moved/deep/f.md"}


def test_changed_targets_keep_paths_under_roots_spelled_as_the_walk_spells_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    absolute = str(tmp_path / "docs")
    targets = changed_targets(
        ["docs"], [f"{absolute}/x/a.md", f"{absolute}/x", "/elsewhere/b.md", f"{absolute}/c.md"]
    )
    assert targets == [("docs", Path("docs/c.md")), ("docs", Path("docs/x"))]
    assert changed_targets(["."], [f"{tmp_path}/docs/a.md"]) == [(".", Path("docs/a.md"))]
    assert changed_targets(["docs"], [f"{absolute}/.gitignore", f"{absolute}/c.md"]) == [
        ("docs", Path("docs"))
    ]
    hidden = [f"{absolute}/.a.md.swp", f"{absolute}/.git/index", f"{absolute}/x/.b.md"]
    assert changed_targets(["docs"], hidden) == []
    assert update_index(["docs"], hidden, load_settings(index_dir=tmp_path / "none")).seconds == 0
    assert not (tmp_path / "none").exists()  # nothing to read: the index is not even opened


def test_a_link_out_of_the_watched_folders_is_not_followed_unless_asked(
    corpus: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the walrus knows the vault code\n")
    (corpus / "leak.md").symlink_to(secret)
    settings = _settings(tmp_path)

    report = update_index(["docs"], [corpus / "leak.md"], settings, embedder=HashEmbedder())
    assert report.documents_indexed == 0
    assert [s.reason.split(";")[0] for s in report.skipped] == ["link outside the indexed folders"]
    assert _sources(settings, "walrus vault") == set()

    followed = load_settings(
        index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache", follow_links=True
    )
    update_index(["docs"], [corpus / "leak.md"], followed, embedder=HashEmbedder())
    assert _sources(settings, "walrus vault") == {"docs/leak.md"}
    # Without the opt-in the link is skipped again, and its document leaves the index.
    update_index(["docs"], [corpus / "leak.md"], settings, embedder=HashEmbedder())
    assert _sources(settings, "walrus vault") == set()
