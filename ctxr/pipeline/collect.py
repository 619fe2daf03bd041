"""The corpus walk that the indexer and the estimate share: files in, Documents out.

One loop, so a dry run and a real run can never disagree about which files they load, skip
or fail on. What it passes over is tallied on the run's report (`IndexReport` or `Estimate`,
both `Tally`s); one bad file is recorded and the walk goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ctxr.enrich.load.documents import load_document
from ctxr.enrich.load.kinds import non_document, skip_reason
from ctxr.enrich.load.walk import Skipped, display_path, walk
from ctxr.errors import LoadError, SkipFileError
from ctxr.file_stamp import Stamp, stamp_file
from ctxr.progress import NullProgress, Progress
from ctxr.types import Document


class Tally(Protocol):
    files_seen: int
    skipped: list[Skipped]
    failed: list[tuple[str, str]]


@dataclass(slots=True)
class LoadTally:
    """A `Tally` of its own, for a caller that counts before it has a report."""

    files_seen: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def load_paths(
    paths: Sequence[str | Path],
    max_file_bytes: int,
    tally: Tally,
    progress: Progress | None = None,
    include: Collection[str] = (),
    follow_links: bool = False,
    unchanged: Callable[[str, Stamp], bool] | None = None,
) -> Iterator[Document]:
    """Every loadable document under `paths`, in walk order; skips and failures go to `tally`.

    Binaries and text that is not a document (`ctxr.enrich.load.kinds`) are skips, not
    failures; `include` names the non-documents to load anyway (``CTXR_INCLUDE``). A file
    for which `unchanged(doc_id, stamp)` says so is passed over unread (`ctxr.file_stamp`);
    each document carries the stamp its file had before it was read.
    """
    progress = progress or NullProgress()
    progress.start("files", None)
    for item in walk(paths, max_file_bytes, follow_links=follow_links):
        if isinstance(item, Skipped):
            tally.skipped.append(item)
            continue
        tally.files_seen += 1
        progress.advance("files")
        kind = non_document(item, include)
        if kind is not None:
            tally.skipped.append(Skipped(display_path(item), skip_reason(kind)))
            continue
        stamp = stamp_file(item)  # before the read: a change during it leaves newer times
        if stamp is not None and unchanged is not None and unchanged(display_path(item), stamp):
            continue
        try:
            document = load_document(item, max_file_bytes=max_file_bytes)
        except SkipFileError as exc:  # a binary (NUL bytes), a FIFO, a zip bomb: not a fault
            tally.skipped.append(Skipped(exc.path, exc.reason))
            continue
        except LoadError as exc:
            tally.failed.append((exc.path, exc.reason))
            progress.note(f"skipped {exc}")
            continue
        yield document if stamp is None else dataclasses.replace(document, file_stamp=stamp)
    # The walk's total is known only now: giving it ends the bar (its clock stops) instead of
    # leaving `files 90/?` running through the rest of the run.
    progress.start("files", tally.files_seen)
