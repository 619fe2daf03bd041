"""Walking a corpus: the files under the given paths, minus what ignore rules and size skip.

One bad file never stops a run: `walk` yields skips as values (hidden, ignored, too large), and
the caller records them and moves on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

IGNORE_FILES = (".gitignore", ".ctxrignore")


def display_path(path: Path | str) -> str:
    """`path` as text that JSON, Qdrant and a terminal accept. A name that is not valid UTF-8
    (bytes from an old disk or an archive, which Python holds as surrogate escapes) keeps each
    undecodable byte as a ``\\xNN`` escape, so the text still names that one file
    (`disk_path` turns it back)."""
    text = Path(path).as_posix()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


_BYTE_ESCAPE = re.compile(rb"\\x([0-9a-f]{2})")


def disk_path(source: str) -> Path:
    """The file `display_path` gave `source` for: its ``\\xNN`` escapes turned back into bytes."""
    raw = _BYTE_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), source.encode("utf-8"))
    return Path(os.fsdecode(raw))


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file the walk passed over, and why (counted in the run's notice)."""

    path: str
    reason: str


def _ignore_spec(root: Path) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        ignore_file = root / name
        if ignore_file.is_file():
            lines.extend(ignore_file.read_text(encoding="utf-8", errors="replace").splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def walk(paths: Sequence[str | Path], max_file_bytes: int) -> Iterator[Path | Skipped]:
    """Every candidate file under `paths`, in a stable order, or a `Skipped` for each excluded one.

    A path named explicitly is always considered, even if hidden; inside directories, hidden
    entries and those matched by the directory's .gitignore/.ctxrignore are skipped.
    """
    for given in paths:
        root = Path(given)
        if root.is_file():
            yield _size_checked(root, max_file_bytes)
            continue
        if not root.is_dir():
            yield Skipped(display_path(given), "no such file or directory")
            continue
        yield from _walk_tree(root, root, _ignore_spec(root), max_file_bytes)


def walk_changed(
    root: str | Path, changed: Sequence[Path], max_file_bytes: int
) -> Iterator[Path | Skipped]:
    """What `walk([root])` yields for the files at or under `changed`, without walking the rest.

    `changed` are paths under `root`, spelled as the walk spells them (`root / relative`): the
    live index re-reads only what changed, under the same rules as a whole walk (hidden
    entries, the root's ignore files, the size limit). A changed directory is walked whole; a
    path that no longer exists yields nothing.
    """
    top = Path(root)
    if top.is_file():
        if top in changed:
            yield _size_checked(top, max_file_bytes)
        return
    spec = _ignore_spec(top)
    for path in changed:
        rel = path.relative_to(top)
        excluded = _excluded_ancestor(top, rel, spec)
        if excluded is not None:
            yield excluded
        elif path.is_dir():
            if rel.parts:  # the directory itself, as its parent's walk would judge it
                judged = _judge_dir(path, rel.parent, spec)
                if judged is not None:
                    yield judged
                    continue
            yield from _walk_tree(top, path, spec, max_file_bytes)
        elif path.is_file():
            yield _judge_file(path, rel.parent, spec, max_file_bytes)


def _excluded_ancestor(
    top: Path, rel: Path, spec: pathspec.GitIgnoreSpec | None
) -> Skipped | None:
    """The `Skipped` of the first directory between `top` and `rel` that the walk passes over."""
    parts = rel.parts[:-1]
    for depth, _ in enumerate(parts):
        judged = _judge_dir(top.joinpath(*parts[: depth + 1]), Path(*parts[:depth]), spec)
        if judged is not None:
            return judged
    return None


def _walk_tree(
    root: Path, top: Path, spec: pathspec.GitIgnoreSpec | None, max_file_bytes: int
) -> Iterator[Path | Skipped]:
    """The walk of `top` (root itself or a directory under it) under `root`'s ignore rules."""
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        kept_dirs = []
        for name in sorted(dirnames):
            judged = _judge_dir(here / name, rel_dir, spec)
            if judged is not None:
                yield judged
            else:
                kept_dirs.append(name)
        dirnames[:] = kept_dirs  # os.walk descends only into what we keep
        for name in sorted(filenames):
            yield _judge_file(here / name, rel_dir, spec, max_file_bytes)


def _judge_dir(path: Path, rel_dir: Path, spec: pathspec.GitIgnoreSpec | None) -> Skipped | None:
    if path.name.startswith("."):
        return Skipped(display_path(path), "hidden directory")
    if spec is not None and spec.match_file((rel_dir / path.name).as_posix() + "/"):
        return Skipped(display_path(path), "ignored directory")
    return None


def _judge_file(
    path: Path, rel_dir: Path, spec: pathspec.GitIgnoreSpec | None, max_file_bytes: int
) -> Path | Skipped:
    if path.name.startswith("."):
        return Skipped(display_path(path), "hidden file")
    if spec is not None and spec.match_file((rel_dir / path.name).as_posix()):
        return Skipped(display_path(path), "ignored file")
    return _size_checked(path, max_file_bytes)


def _size_checked(path: Path, max_file_bytes: int) -> Path | Skipped:
    try:
        size = path.stat().st_size
    except OSError as exc:
        return Skipped(display_path(path), f"cannot stat: {exc.strerror}")
    if size > max_file_bytes:
        return Skipped(
            display_path(path),
            f"larger than CTXR_MAX_FILE_BYTES ({size:,} > {max_file_bytes:,} bytes); "
            "raise the limit to include it",
        )
    if size == 0:
        return Skipped(display_path(path), "empty file")
    return path
