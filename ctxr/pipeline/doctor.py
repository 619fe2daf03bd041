"""`ctxr doctor`: check an index against its manifest, and repair what can be repaired.

The check reads every point back (`ctxr.index.integrity.verify`). The repair keeps what is
sound and forgets the rest, so that the next `ctxr index` redoes only what was lost, at no cost
for anything already paid: contexts come from the response cache and vectors from the embedding
cache, both beside the shard and untouched here.

- Damaged points (a vector that is not unit length, a BM25 weight that is not positive, a
  document with points missing): that document's points are deleted and its manifest entry
  dropped, so the next run indexes it again.
- Points of no recorded document (a killed run's leftovers): deleted.
- A shard that cannot be opened or read at all, or whose seal says its engine structures changed
  (`ctxr.index.store.seal`): it is moved aside, never deleted (the user may want it), and an
  empty one takes its place with an empty manifest of the same settings.
- A disk that refuses a write (full, read-only) is not damage: the `StorageError` goes to the
  user as it is, and nothing is moved or deleted.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ctxr.config import Settings
from ctxr.disk import check_free
from ctxr.errors import IndexCorruptError, IndexError_
from ctxr.index import integrity
from ctxr.index.manifest import Manifest
from ctxr.index.run_lock import index_lock
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import Store
from ctxr.pipeline.space import NEW_SHARD_BYTES


@dataclass(slots=True)
class DoctorReport:
    index_dir: str
    manifest_documents: int = 0
    manifest_chunks: int = 0
    points_stored: int = 0
    points_read: int = 0
    # Points of documents the manifest does not hold, left by a killed run: not damage (the
    # next `ctxr index` clears them), but they are searchable until then.
    leftover_points: int = 0
    problems: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    dropped_sources: list[str] = field(default_factory=list)
    moved_aside: str | None = None
    sound: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_doctor(settings: Settings, repair: bool = False) -> DoctorReport:
    index_dir = Path(settings.index_dir)
    with index_lock(index_dir):  # no `ctxr index` writes while the doctor looks
        manifest = Manifest.load(index_dir)
        report = DoctorReport(str(index_dir), len(manifest.documents), manifest.chunk_count)
        store: Store | None = None
        try:
            store = store_factory.open_store(
                settings.store, index_dir, manifest.settings.dim, every_byte=True
            )
            found = integrity.verify(store, manifest)
        except IndexCorruptError as exc:
            found = integrity.Findings(unreadable=exc.what or str(exc))
        report.points_stored, report.points_read = found.points_stored, found.points_read
        report.problems = list(found.problems)
        if found.unreadable:
            report.problems.insert(0, found.unreadable)
        report.leftover_points = len(found.orphan_ids)
        report.sound = found.sound
        if (report.sound and not found.orphan_docs) or not repair:
            if store is not None:
                store.close()
            return report
        if found.unreadable is None and store is not None:
            _drop_damaged(store, manifest, found, report, index_dir)
            again = integrity.verify(store, manifest)
            store.close()
            if again.sound and not again.orphan_docs:
                report.sound, report.leftover_points = True, 0
                return report
            report.repaired.append("deleting the damaged points was not enough")
        elif store is not None:
            store.close()
        _replace_shard(settings, manifest, report, index_dir)
        report.sound, report.leftover_points = True, 0
        return report


def _drop_damaged(
    store: Store,
    manifest: Manifest,
    found: integrity.Findings,
    report: DoctorReport,
    index_dir: Path,
) -> None:
    damaged = sorted(found.damaged_docs)
    store.delete_documents(sorted(found.orphan_docs | found.damaged_docs))
    store.flush()
    for doc_id in damaged:
        report.dropped_sources.append(manifest.documents.pop(doc_id).source)
    manifest.save(index_dir)
    if found.orphan_docs:
        report.repaired.append(f"deleted the points of {len(found.orphan_docs)} unrecorded "
                               "documents")  # fmt: skip
    if damaged:
        report.repaired.append(f"deleted the points of {len(damaged)} damaged documents and "
                               "dropped them from the manifest")  # fmt: skip
    if not damaged and not found.orphan_docs:
        # Only the shard's seal saw a change (bulk bytes), and every point reads back sound.
        report.repaired.append("every point reads back sound: the changed files are accepted")


def _replace_shard(
    settings: Settings, manifest: Manifest, report: DoctorReport, index_dir: Path
) -> None:
    if settings.store.qdrant_url:
        raise IndexError_(
            f"the collection behind the index at {index_dir} cannot be read; re-index with "
            "--rebuild to recreate it on the server"
        )
    shard = store_factory.shard_path(index_dir)
    aside = shard.with_name(f"{shard.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
    # Room for the new shard before the old one is moved: a full disk leaves both as they are.
    check_free(index_dir, NEW_SHARD_BYTES, "index")
    if shard.exists():
        shard.rename(aside)
        report.moved_aside = str(aside)
    report.dropped_sources.extend(e.source for e in manifest.documents.values())
    store_factory.create_store(settings.store, index_dir, manifest.settings.dim).close()
    Manifest(settings=manifest.settings, document_vectors=True).save(index_dir)
    report.repaired.append(
        f"moved the unreadable shard aside to {aside.name} and started an empty one"
    )
