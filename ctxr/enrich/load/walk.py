"""Walking a corpus: the files under the given paths, minus what ignore rules and size skip.

One bad file never stops a run: `walk` yields skips as values (hidden, ignored, too large), and
the caller records them and moves on.
"""

from __future__ import annotations

import errno
import os
import re
import stat
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


def walk(
    paths: Sequence[str | Path], max_file_bytes: int, *, follow_links: bool = False
) -> Iterator[Path | Skipped]:
    """Every candidate file under `paths`, in a stable order, or a `Skipped` for each excluded one.

    A path named explicitly is always considered, even if hidden or a link; inside directories,
    hidden entries, those matched by the directory's .gitignore/.ctxrignore and links (`Links`)
    are skipped. The walk keeps its own stack, so no depth of folders exhausts recursion.
    """
    links = Links.of(paths, follow_links)
    for given in paths:
        root = Path(given)
        try:
            is_dir = stat.S_ISDIR(os.stat(root).st_mode)
        except OSError as exc:
            yield Skipped(display_path(given), _cannot_stat(exc))
            continue
        if not is_dir:
            yield _size_checked(root, max_file_bytes)
            continue
        yield from _walk_tree(root, root, _ignore_spec(root), max_file_bytes, links)


def walk_changed(
    root: str | Path,
    changed: Sequence[Path],
    max_file_bytes: int,
    *,
    follow_links: bool = False,
    roots: Sequence[str | Path] = (),
) -> Iterator[Path | Skipped]:
    """What `walk([root])` yields for the files at or under `changed`, without walking the rest.

    `changed` are paths under `root`, spelled as the walk spells them (`root / relative`): the
    live index re-reads only what changed, under the same rules as a whole walk (hidden
    entries, the root's ignore files, links, the size limit). A changed directory is walked
    whole; a path that no longer exists yields nothing. `roots` are all the folders watched
    with `root` (a link into any of them is inside); default: `root` alone.
    """
    top = Path(root)
    links = Links.of(roots or [root], follow_links)
    if top.is_file():
        if top in changed:
            yield _size_checked(top, max_file_bytes)
        return
    spec = _ignore_spec(top)
    for path in changed:
        rel = path.relative_to(top)
        excluded = _excluded_ancestor(top, rel, spec, links)
        if excluded is not None:
            yield excluded
        elif _is_dir(path):
            if rel.parts:  # the directory itself, as its parent's walk would judge it
                judged = _judge_dir(path, rel.parent, spec) or links.judge_dir(path)
                if judged is not None:
                    yield judged
                    continue
            yield from _walk_tree(top, path, spec, max_file_bytes, links)
        elif os.path.lexists(path):
            yield _judge_file(path, rel.parent, spec, max_file_bytes, links)


# Why the walk passed over a link or a special file. Each reason's words before the first ";"
# or " (" are its label in the run's summary (`summarize_skips`), so they stay fixed.
LINK_OUTSIDE = (
    "link outside the indexed folders; not followed (to follow links: --follow-links or "
    "CTXR_FOLLOW_LINKS=true)"
)
LINK_INSIDE = "link inside the indexed folders; its target is read under its own name, once"
BROKEN_LINK = "broken link; its target does not exist"
LINK_LOOP = "link loop; it resolves to itself"
ALREADY_WALKED = "folder already walked; a followed link leads back to it"
NOT_REGULAR = "not a regular file (a FIFO, device or socket); only regular files are read"
PATH_TOO_LONG = "path too long for the system (ENAMETOOLONG); move it to a shorter path"


@dataclass(slots=True)
class Links:
    """What the walk does with a symbolic link inside the given folders.

    A link that resolves inside a given path (`roots`, real paths) is skipped: its target is
    walked under its own name, so no file is indexed twice, and no link leads the walk round in
    a loop. A link that resolves outside is skipped too, unless `follow` (``--follow-links``,
    ``CTXR_FOLLOW_LINKS``): a cloned repository must not pull ``~/.aws/credentials`` into an
    index that ``serve`` hands out. Broken links and link loops are skipped by name. While
    following, every folder is walked once (`walked`: device and inode), so a link back to a
    folder already walked is skipped rather than walked again.
    """

    roots: tuple[str, ...]
    follow: bool
    walked: set[tuple[int, int]]

    @classmethod
    def of(cls, paths: Sequence[str | Path], follow: bool) -> Links:
        roots = tuple(os.path.realpath(p) for p in paths if os.path.lexists(p))
        return cls(roots, follow, set())

    def judge(self, path: Path) -> Skipped | None:
        """Why the walk passes over the link `path`, or None to follow it."""
        try:
            target = os.path.realpath(path, strict=True)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return Skipped(display_path(path), LINK_LOOP)
            if exc.errno == errno.ENOENT:
                return Skipped(display_path(path), BROKEN_LINK)
            return Skipped(display_path(path), _cannot_stat(exc))
        if any(target == r or target.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots):
            return Skipped(display_path(path), LINK_INSIDE)
        return None if self.follow else Skipped(display_path(path), LINK_OUTSIDE)

    def judge_dir(self, path: Path) -> Skipped | None:
        return self.judge(path) if path.is_symlink() else None

    def first_visit(self, path: Path) -> bool:
        """Whether the walk enters folder `path` for the first time (always, not following)."""
        if not self.follow:
            return True  # no link is descended, so no folder can be reached twice
        try:
            info = os.stat(path)
        except OSError:
            return True  # the listing that follows names the error
        key = (info.st_dev, info.st_ino)
        if key in self.walked:
            return False
        self.walked.add(key)
        return True


def _excluded_ancestor(
    top: Path, rel: Path, spec: pathspec.GitIgnoreSpec | None, links: Links
) -> Skipped | None:
    """The `Skipped` of the first directory between `top` and `rel` that the walk passes over."""
    parts = rel.parts[:-1]
    for depth, _ in enumerate(parts):
        folder = top.joinpath(*parts[: depth + 1])
        judged = _judge_dir(folder, Path(*parts[:depth]), spec) or links.judge_dir(folder)
        if judged is not None:
            return judged
    return None


def _is_dir(path: Path | os.DirEntry[str]) -> bool:
    try:
        return path.is_dir()  # through a link: a link to a folder is judged as a folder
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False  # it cannot be looked at: the stat that follows names why


def _walk_tree(
    root: Path,
    top: Path,
    spec: pathspec.GitIgnoreSpec | None,
    max_file_bytes: int,
    links: Links,
) -> Iterator[Path | Skipped]:
    """The walk of `top` (root itself or a directory under it) under `root`'s ignore rules.

    Depth first, top down, in name order (as `os.walk`, whose recursion a deep tree exhausts):
    each folder's skipped subfolders, then its files, then each kept subfolder in turn."""
    stack = [top]
    while stack:
        here = stack.pop()
        if not links.first_visit(here):
            yield Skipped(display_path(here), ALREADY_WALKED)
            continue
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as exc:
            yield Skipped(display_path(here), _cannot_list(exc))
            continue
        rel_dir = here.relative_to(root)
        descend: list[Path] = []
        for entry in entries:
            if not _is_dir(entry):
                continue
            path = here / entry.name
            judged = _judge_dir(path, rel_dir, spec)
            if judged is None and _is_link(entry):
                judged = links.judge(path)
            if judged is not None:
                yield judged
            else:
                descend.append(path)
        for entry in entries:
            if not _is_dir(entry):
                path = here / entry.name
                yield _judge_file(path, rel_dir, spec, max_file_bytes, links, _is_link(entry))
        stack.extend(reversed(descend))


def _judge_dir(path: Path, rel_dir: Path, spec: pathspec.GitIgnoreSpec | None) -> Skipped | None:
    if path.name.startswith("."):
        return Skipped(display_path(path), "hidden directory")
    if spec is not None and spec.match_file((rel_dir / path.name).as_posix() + "/"):
        return Skipped(display_path(path), "ignored directory")
    return None


def _judge_file(
    path: Path,
    rel_dir: Path,
    spec: pathspec.GitIgnoreSpec | None,
    max_file_bytes: int,
    links: Links,
    is_link: bool | None = None,
) -> Path | Skipped:
    """`path` if the walk reads it, else why not; `is_link` when the caller's listing knows."""
    if path.name.startswith("."):
        return Skipped(display_path(path), "hidden file")
    if spec is not None and spec.match_file((rel_dir / path.name).as_posix()):
        return Skipped(display_path(path), "ignored file")
    if path.is_symlink() if is_link is None else is_link:
        judged = links.judge(path)
        if judged is not None:
            return judged
    return _size_checked(path, max_file_bytes)


def _size_checked(path: Path, max_file_bytes: int) -> Path | Skipped:
    try:
        info = os.stat(path)
    except OSError as exc:
        return Skipped(display_path(path), _cannot_stat(exc))
    if not stat.S_ISREG(info.st_mode):  # reading a FIFO waits for a writer; /dev/zero never ends
        return Skipped(display_path(path), NOT_REGULAR)
    size = info.st_size
    if size > max_file_bytes:
        return Skipped(
            display_path(path),
            f"larger than CTXR_MAX_FILE_BYTES ({size:,} > {max_file_bytes:,} bytes); "
            "raise the limit to include it",
        )
    if size == 0:
        return Skipped(display_path(path), "empty file")
    return path


def _cannot_stat(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return PATH_TOO_LONG
    if exc.errno == errno.ENOENT:
        return "no such file or directory"
    return f"cannot stat: {exc.strerror}"


def _cannot_list(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return PATH_TOO_LONG
    return f"cannot list this folder ({exc.strerror}); check its permissions"
