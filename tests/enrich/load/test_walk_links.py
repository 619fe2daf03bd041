"""The corpus walk and what it must not read: links out of the corpus, FIFOs and devices,
trees too deep for recursion, paths too long for the system."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxr.cli import main as cli
from ctxr.config import load_settings
from ctxr.enrich.load.kinds import summarize_skips
from ctxr.enrich.load.walk import Skipped, walk, walk_changed
from ctxr.index.manifest import Manifest
from ctxr.pipeline.build import build_index
from tests.fakes.hash_embedder import HashEmbedder


def _split(items: list[Path | Skipped]) -> tuple[list[str], dict[str, str]]:
    files = [p.as_posix() for p in items if isinstance(p, Path)]
    skipped = {s.path: s.reason for s in items if isinstance(s, Skipped)}
    return files, skipped


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """A corpus with a secret beside it (outside), as a home directory holds ~/.aws."""
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "credentials").write_text("aws_secret=hunter2\n", encoding="utf-8")
    root = tmp_path / "corpus"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    return root


def test_a_file_link_out_of_the_corpus_is_skipped_by_reason(corpus: Path) -> None:
    (corpus / "x.txt").symlink_to(corpus.parent / "secret" / "credentials")

    files, skipped = _split(list(walk([corpus], 1_000_000)))

    assert files == [(corpus / "docs" / "a.md").as_posix()]
    reason = skipped[(corpus / "x.txt").as_posix()]
    assert reason.startswith("link outside the indexed folders")
    assert "--follow-links" in reason and "CTXR_FOLLOW_LINKS" in reason
    assert "1 link outside the indexed folders" in summarize_skips(skipped.values())


def test_a_directory_link_out_of_the_corpus_is_skipped_by_reason(corpus: Path) -> None:
    (corpus / "aws").symlink_to(corpus.parent / "secret", target_is_directory=True)

    files, skipped = _split(list(walk([corpus], 1_000_000)))

    assert files == [(corpus / "docs" / "a.md").as_posix()]
    assert skipped[(corpus / "aws").as_posix()].startswith("link outside the indexed folders")


def test_follow_links_is_an_explicit_opt_in(corpus: Path) -> None:
    (corpus / "x.txt").symlink_to(corpus.parent / "secret" / "credentials")
    (corpus / "aws").symlink_to(corpus.parent / "secret", target_is_directory=True)

    files, skipped = _split(list(walk([corpus], 1_000_000, follow_links=True)))

    assert files == [
        (corpus / "x.txt").as_posix(),
        (corpus / "aws" / "credentials").as_posix(),
        (corpus / "docs" / "a.md").as_posix(),
    ]
    assert skipped == {}


def test_a_link_inside_the_corpus_is_read_once_under_its_own_name(corpus: Path) -> None:
    (corpus / "alias.md").symlink_to(corpus / "docs" / "a.md")
    (corpus / "docs2").symlink_to(corpus / "docs", target_is_directory=True)
    (corpus / "up").symlink_to(corpus, target_is_directory=True)  # a loop, inside

    for follow in (False, True):
        files, skipped = _split(list(walk([corpus], 1_000_000, follow_links=follow)))
        assert files == [(corpus / "docs" / "a.md").as_posix()]
        for name in ("alias.md", "docs2", "up"):
            assert skipped[(corpus / name).as_posix()].startswith("link inside the indexed folders")


def test_a_link_into_another_given_root_counts_as_inside(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
    (tmp_path / "one" / "b.md").symlink_to(tmp_path / "two" / "b.md")

    files, skipped = _split(list(walk([tmp_path / "one", tmp_path / "two"], 1_000_000)))

    assert files == [(tmp_path / "two" / "b.md").as_posix()]
    assert skipped[(tmp_path / "one" / "b.md").as_posix()].startswith("link inside")


def test_broken_links_link_loops_and_loops_through_followed_links(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "keep.txt").write_text("kept\n", encoding="utf-8")
    (root / "gone.md").symlink_to(tmp_path / "nothing-here")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("outside\n", encoding="utf-8")
    (outside / "again").symlink_to(outside, target_is_directory=True)  # loops on itself
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "out2").symlink_to(outside, target_is_directory=True)  # the same folder again

    files, skipped = _split(list(walk([root], 1_000_000)))
    assert files == [(root / "keep.txt").as_posix()]
    assert skipped[(root / "gone.md").as_posix()].startswith("broken link")
    assert skipped[(root / "loop-a").as_posix()].startswith("link loop")
    assert skipped[(root / "loop-b").as_posix()].startswith("link loop")

    files, skipped = _split(list(walk([root], 1_000_000, follow_links=True)))
    assert files == [(root / "keep.txt").as_posix(), (root / "out" / "o.txt").as_posix()]
    assert skipped[(root / "out" / "again").as_posix()].startswith("folder already walked")
    assert skipped[(root / "out2").as_posix()].startswith("folder already walked")


def test_fifos_and_devices_are_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    (root / "zero.txt").symlink_to("/dev/zero")
    (root / "ok.md").write_text("# Ok\n\nfine\n", encoding="utf-8")

    # Following links too: a link to a device is not a file, wherever it points.
    for follow in (False, True):
        files, skipped = _split(list(walk([root], 1_000_000, follow_links=follow)))
        assert files == [(root / "ok.md").as_posix()]
        assert skipped[(root / "pipe.txt").as_posix()].startswith("not a regular file")
        if follow:
            assert skipped[(root / "zero.txt").as_posix()].startswith("not a regular file")
    # Named explicitly, a FIFO is still not read (opening it would wait for a writer).
    (named,) = list(walk([root / "pipe.txt"], 1_000_000))
    assert isinstance(named, Skipped) and named.reason.startswith("not a regular file")


def _deep_tree(root: Path, depth: int, name: str) -> Path:
    """`depth` nested folders `name` under `root`, made through folder descriptors so that the
    path may exceed PATH_MAX; returns the innermost as a (possibly too long) path."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"# Deep\n\nthe bottom of the well\n")
        os.close(leaf)
    finally:
        os.close(fd)
    return root.joinpath(*[name] * depth)


def _remove_deep(root: Path, depth: int, name: str) -> None:
    """Remove `_deep_tree` bottom up without recursion (shutil.rmtree recurses per level)."""
    fds = [os.open(root, os.O_RDONLY)]
    for _ in range(depth):
        fds.append(os.open(name, os.O_RDONLY, dir_fd=fds[-1]))
    os.unlink("deep.md", dir_fd=fds[-1])
    while len(fds) > 1:
        os.close(fds.pop())
        os.rmdir(name, dir_fd=fds[-1])
    os.close(fds[0])


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "deep"
    root.mkdir()
    _deep_tree(root, 1000, "d")
    yield root
    _remove_deep(root, 1000, "d")


def test_a_tree_a_thousand_levels_deep_is_walked_and_indexed(deep: Path, tmp_path: Path) -> None:
    files, skipped = _split(list(walk([deep], 1_000_000)))
    assert files == [deep.joinpath(*["d"] * 1000, "deep.md").as_posix()]
    assert skipped == {}

    settings = load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache")
    report = build_index([deep], settings, embedder=HashEmbedder())
    assert report.documents_indexed == 1 and report.failed == []


def test_a_path_longer_than_the_system_allows_is_a_named_skip(tmp_path: Path) -> None:
    root = tmp_path / "long"
    root.mkdir()
    name = "n" * 200
    depth = 4096 // 201 + 2  # past PATH_MAX
    _deep_tree(root, depth, name)
    (root / "short.md").write_text("# Short\n\nreachable\n", encoding="utf-8")
    try:
        files, skipped = _split(list(walk([root], 1_000_000)))
        assert files == [(root / "short.md").as_posix()]
        assert len(skipped) == 1
        ((where, reason),) = skipped.items()
        assert where.startswith(root.as_posix()) and len(where) > 3800
        assert reason.startswith("path too long")
    finally:
        _remove_deep(root, depth, name)


def test_walk_changed_judges_a_changed_link_as_the_whole_walk_does(corpus: Path) -> None:
    link = corpus / "docs" / "x.txt"
    link.symlink_to(corpus.parent / "secret" / "credentials")

    items = list(walk_changed(corpus, [link], 1_000_000))
    assert [(s.path, s.reason.split(";")[0]) for s in items if isinstance(s, Skipped)] == [
        (link.as_posix(), "link outside the indexed folders")
    ]
    assert list(walk_changed(corpus, [link], 1_000_000, follow_links=True)) == [link]


def test_index_keeps_secrets_out_and_follows_links_on_request(corpus: Path, tmp_path: Path) -> None:
    (corpus / "x.txt").symlink_to(corpus.parent / "secret" / "credentials")
    index_dir = tmp_path / "idx"
    env = {"CTXR_CACHE_DIR": str(tmp_path / "cache"), "CTXR_EMBEDDER": "local"}
    settings = load_settings(index_dir=index_dir, cache_dir=tmp_path / "cache")
    build_index([corpus], settings, embedder=HashEmbedder())
    assert sorted(Manifest.load(index_dir).documents) == [(corpus / "docs" / "a.md").as_posix()]

    followed = load_settings(index_dir=index_dir, cache_dir=tmp_path / "cache", follow_links=True)
    build_index([corpus], followed, embedder=HashEmbedder())
    assert (corpus / "x.txt").as_posix() in Manifest.load(index_dir).documents

    # Without the opt-in again, the next run takes the link's document out.
    build_index([corpus], settings, embedder=HashEmbedder())
    assert (corpus / "x.txt").as_posix() not in Manifest.load(index_dir).documents

    for command in ("index", "watch"):
        shown = CliRunner().invoke(cli, [command, "--help"], env=env)
        assert "--follow-links" in shown.output
