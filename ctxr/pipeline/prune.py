"""Removing documents from an index: the ones gone from disk, or skipped where they were found.

`ctxr index DIR` prunes what disappeared from DIR; the live index (`ctxr watch`) prunes what
disappeared at or under the paths that changed. Both decide here, so a document leaves the
index the same way whichever command noticed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from ctxr.enrich.load.walk import disk_path
from ctxr.index.manifest import Manifest
from ctxr.index.store.base import Store
from ctxr.pipeline.report import IndexReport


def gone_documents(
    manifest: Manifest,
    targets: Sequence[str],
    skipped: Collection[str] = (),
    found: Collection[str] = (),
) -> list[str]:
    """Documents indexed at or under one of `targets` (display paths) that are no longer on
    disk, or that a walk of them passed over now: `skipped` names files, or directories whose
    documents all go. `found` names documents the walk just found on disk, spared a second
    stat (a fifth of a no-change run over 20,000 files)."""
    skipped_dirs = [s.rstrip("/") for s in skipped]
    return [
        doc_id
        for doc_id, entry in manifest.documents.items()
        if any(_at_or_under(entry.source, target) for target in targets)
        and (
            (doc_id not in found and not _on_disk(entry.source))
            or entry.source in skipped
            or any(_under(entry.source, d) for d in skipped_dirs)
        )
    ]


def remove_documents(
    doc_ids: Sequence[str], manifest: Manifest, store: Store, report: IndexReport
) -> None:
    """Delete the documents' points, then drop them from the manifest and save it."""
    if not doc_ids:
        return
    store.delete_documents(doc_ids)
    for doc_id in doc_ids:
        report.chunks_removed += manifest.documents.pop(doc_id).chunks
    manifest.save(Path(report.index_dir))
    report.documents_removed += len(doc_ids)


def _on_disk(source: str) -> bool:
    # A source with byte escapes names a file whose name is not UTF-8 (see `display_path`).
    return Path(source).exists() or disk_path(source).exists()


def _at_or_under(source: str, target: str) -> bool:
    return source == target or _under(source, target.rstrip("/"))


def _under(source: str, root: str) -> bool:
    # The walk writes files under "." without the "./" (`docs/a.md`, not `./docs/a.md`).
    if root == ".":
        return not source.startswith("/")
    return source.startswith(root + "/")
