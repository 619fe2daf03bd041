"""`build_index`: files in, one Qdrant point per chunk out, incrementally and resumably.

Flow: walk and load files, a window at a time (`ctxr.pipeline.windows`); split and situate the
window's documents that are new or changed, analyse every chunk for BM25, then embed and write
them in batches. The manifest records each batch once its points are written, and is saved,
after a flush of the store, when due (`ctxr.pipeline.manifest_pace`), so a killed run loses no
paid work and the next run picks up where it stopped. Unchanged documents cost nothing;
documents gone from an indexed directory are removed (pruned).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxr.config import Settings
from ctxr.enrich.load.walk import display_path
from ctxr.enrich.situate.contexts import ContextPlan, Situator, resolve_context
from ctxr.errors import IndexNotFoundError
from ctxr.file_stamp import Stamp
from ctxr.index import components, integrity
from ctxr.index.bm25.analyzer import Bm25Analyzer
from ctxr.index.embed.base import Embedder
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.index.owner import refuse_if_owned
from ctxr.index.roots import record_roots
from ctxr.index.run_lock import index_lock
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import Store
from ctxr.pipeline import space
from ctxr.pipeline.chunk_sizes import ChunkSizes
from ctxr.pipeline.chunking import Chunker
from ctxr.pipeline.collect import load_paths
from ctxr.pipeline.executors import Executor, LocalExecutor, make_executor
from ctxr.pipeline.prepare import incomplete_notice, prepare
from ctxr.pipeline.prune import gone_documents, remove_documents
from ctxr.pipeline.recipe import document_recipe
from ctxr.pipeline.report import IndexInterrupted, IndexReport
from ctxr.pipeline.reports import save_report
from ctxr.pipeline.windows import UNBOUNDED, WINDOW_TEXT_CHARS, WindowedProgress, windows
from ctxr.pipeline.write import build_hnsw, truncation_notice, write
from ctxr.progress import NullProgress, Progress
from ctxr.types import Document

# Up to this many points `ctxr index` reads every one back at its end (about 2 s at 20k).
FULL_CHECK_POINTS = 20_000


def open_or_create(
    index_dir: Path,
    settings: Settings,
    embedder: Embedder,
    analyzer: Bm25Analyzer,
    rebuild: bool,
    create: bool = True,
) -> tuple[Manifest, Store]:
    """The index's manifest and store; a new index when there is none, unless `create` is
    False (an update: see `refuse_missing`)."""
    wanted = components.index_settings(settings, embedder, analyzer)
    shard = store_factory.shard_path(index_dir)
    if rebuild:
        # Only what this index owns (the shard dir, or the server's collection); the embedding
        # cache survives, so a rebuild re-embeds nothing.
        store_factory.drop_store(settings.store, index_dir)
        (index_dir / MANIFEST_NAME).unlink(missing_ok=True)
    if (index_dir / MANIFEST_NAME).exists():
        manifest = Manifest.load(index_dir)
        manifest.check_compatible(wanted, index_dir)
        store = store_factory.open_store(
            settings.store, index_dir, manifest.settings.dim, writer_points=manifest.chunk_count
        )
        try:  # say so before a long run, not after it
            integrity.check(store, manifest, index_dir, integrity.OPEN_SAMPLE)
        except BaseException:
            store.close()
            raise
        return manifest, store
    if not create:
        refuse_missing(index_dir)
    # No manifest: a new index, or a shard orphaned by a run that died before writing its
    # manifest. Nothing in an orphan is recorded as indexed, so it is recreated, not trusted.
    shutil.rmtree(shard, ignore_errors=True)
    store = store_factory.create_store(settings.store, index_dir, embedder.dim)
    manifest = Manifest(settings=wanted, document_vectors=True)  # the store has `bm25_doc`
    manifest.save(index_dir)
    return manifest, store


def refuse_missing(index_dir: Path) -> None:
    """Raise `IndexNotFoundError` when the index has no manifest. An update (`ctxr watch`, a
    served update) never creates an index: into a deleted one it would write an index of the
    few files that just changed, which a server would then serve as the whole."""
    if not (index_dir / MANIFEST_NAME).exists():
        raise IndexNotFoundError(
            f"no ctxr index at {index_dir} (missing {MANIFEST_NAME}; deleted?): an update never "
            f"creates one; build it with `ctxr index PATH... --index {index_dir}`, then start "
            "`ctxr watch` again"
        )


# The documents to (re)index, given the open manifest and store; read lazily, window by window.
Collector = Callable[[Manifest, Store, str, IndexReport, Progress], Iterable[Document]]


@dataclass(frozen=True, slots=True)
class OpenIndex:
    """An index its caller already holds open (a server's shard): written in place, not closed.

    The manifest is the caller's to hand over (a copy, if other threads read theirs)."""

    manifest: Manifest
    store: Store


def build_index(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    prune: bool = True,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> IndexReport:
    """Index files and folders: new and changed documents are written, the rest skipped."""

    def collect(
        manifest: Manifest, store: Store, recipe: str, report: IndexReport, bar: Progress
    ) -> Iterator[Document]:
        # A generator: the walk is read a window at a time, and what is gone is pruned at its
        # end, before the last window is written (`ctxr.pipeline.windows`).
        record_roots(Path(settings.index_dir), paths, fresh=rebuild)  # what updates may read
        found: set[str] = set()
        yield from changed_documents(paths, settings, manifest, recipe, report, bar, found)
        if prune:
            # Gone from a given path, or passed over by this walk for any reason (emptied,
            # newly ignored, hidden, too large, a link not followed, a binary or non-document),
            # as `ctxr watch` prunes: the index must not answer with what a file no longer
            # says. A file that failed to load keeps its last good version.
            targets = [display_path(p).rstrip("/") or "/" for p in paths]
            skipped = {s.path for s in report.skipped}
            gone = gone_documents(manifest, targets, skipped, found)
            remove_documents(gone, manifest, store, report)

    executor = make_executor(settings.run)
    try:
        return run_index(collect, settings, None, "split", rebuild, embedder, progress,
                         executor=executor)  # fmt: skip
    finally:
        executor.close()


def index_documents(
    documents: Sequence[Document],
    settings: Settings,
    *,
    chunker: Chunker | None = None,
    chunker_name: str = "split",
    rebuild: bool = False,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
) -> IndexReport:
    """Index documents already in memory (evaluation sets, other loaders).

    `chunker` replaces ctxr's splitter (an evaluation set that brings its own chunks);
    `chunker_name` goes into each document's recipe so that a different chunker re-indexes.
    """

    def collect(
        manifest: Manifest, store: Store, recipe: str, report: IndexReport, bar: Progress
    ) -> list[Document]:
        report.files_seen = len(documents)
        todo = []
        for document in documents:
            if manifest.is_current(document.doc_id, document.sha256, recipe):
                report.documents_unchanged += 1
            else:
                todo.append(document)
        return todo

    return run_index(collect, settings, chunker, chunker_name, rebuild, embedder, progress)


def run_index(
    collect: Collector,
    settings: Settings,
    chunker: Chunker | None,
    chunker_name: str,
    rebuild: bool,
    embedder: Embedder | None,
    progress: Progress | None,
    opened: OpenIndex | None = None,
    create: bool = True,
    executor: Executor | None = None,
) -> IndexReport:
    """One run over the index; `create=False` (an update) refuses an index that is gone.
    `executor` places splitting and embedding (`ctxr.pipeline.executors`): in this process
    unless given."""
    started = time.perf_counter()
    progress = progress or NullProgress()
    plan = resolve_context(settings.llm)
    index_dir = Path(settings.index_dir)
    if opened is None:  # before --rebuild could delete a shard a server has open
        refuse_if_owned(index_dir, "index it")
        if not create:
            refuse_missing(index_dir)  # before the lock would make its directory
    executor = executor or LocalExecutor()
    report = IndexReport(index_dir=str(index_dir), context_kind=plan.kind, executor=executor.name)
    try:
        with index_lock(index_dir):  # before anything is created: one run per index at a time
            try:
                _locked_run(collect, settings, chunker, chunker_name, rebuild, embedder,
                            progress, plan, report, opened, create, executor)  # fmt: skip
            except KeyboardInterrupt:
                report.interrupted = True
                _keep(report, started)  # what the interrupted run kept, kept with the index
                raise
            _keep(report, started)
    except KeyboardInterrupt:
        # Ctrl-C: every batch written so far is flushed and in the manifest, every LLM answer
        # in the response cache; the report says so, and the next run resumes from there.
        report.interrupted = True
        raise IndexInterrupted(report) from None
    finally:
        report.seconds = time.perf_counter() - started
    return report


def _keep(report: IndexReport, started: float) -> None:
    """Keep the run's report in the index (`ctxr.pipeline.reports`), while it holds the lock."""
    report.seconds = time.perf_counter() - started
    save_report(report)


def _locked_run(
    collect: Collector,
    settings: Settings,
    chunker: Chunker | None,
    chunker_name: str,
    rebuild: bool,
    embedder: Embedder | None,
    progress: Progress,
    plan: ContextPlan,
    report: IndexReport,
    opened: OpenIndex | None,
    create: bool,
    executor: Executor,
) -> None:
    index_dir = Path(settings.index_dir)
    own_embedder = embedder is None  # a caller's embedder stays open for its next run
    with report.timed("open"):
        embedder = embedder or components.with_cache(executor.embedder(settings), settings)
        analyzer = components.make_analyzer(settings)
        if opened is None:
            # before creating the shard
            space.check_shard_room(index_dir, rebuild, settings.corpus.min_free_mb)
            manifest, store = open_or_create(
                index_dir, settings, embedder, analyzer, rebuild, create
            )
        else:
            manifest, store = opened.manifest, opened.store
        # Only an embedder the executor made can write where it embeds (`executors.ray`).
        writer = executor.point_writer(settings, store, embedder) if own_embedder else None
    try:
        recipe = document_recipe(settings, plan, chunker_name)
        cache_dir = components.cache_dir(settings)
        windowed = WindowedProgress(progress)
        documents = collect(manifest, store, recipe, report, windowed)
        situator: Situator | None = None  # made at the first window: a run with nothing new
        # asks no server anything
        sizes = ChunkSizes()
        incomplete: set[str] = set()
        first_error: str | None = None
        one_batch = plan.kind == "llm" and settings.llm.llm_batch  # one window: `windows.py`
        per_window = UNBOUNDED if one_batch else settings.run.window_documents
        max_chars = UNBOUNDED if one_batch else WINDOW_TEXT_CHARS
        for window, last in windows(documents, per_window, lambda: report.timed("load"),
                                    max_chars):  # fmt: skip
            windowed.last = last
            # Room for what this window writes, before it pays for a context (a full disk
            # would kill the engine's mapped writes with SIGBUS, answers in flight lost).
            space.check_room(index_dir, cache_dir, window, embedder.dim,
                             not manifest.documents, settings.corpus.min_free_mb)  # fmt: skip
            if situator is None:
                situator = Situator(settings.llm, settings.split.encoding, plan, index_dir,
                                    cache_dir, windowed)  # fmt: skip
            splits = executor.split(window, settings, chunker, embedder)
            prepared, run = prepare(window, splits, situator, settings, analyzer, report,
                                    windowed, sizes)  # fmt: skip
            incomplete |= run.incomplete
            first_error = first_error or run.first_error
            write(prepared, manifest, store, embedder, analyzer, settings, recipe, report,
                  windowed, writer)  # fmt: skip
        if incomplete:
            report.notices.append(incomplete_notice(len(incomplete), first_error))
        if own_embedder:
            # Every chunk is embedded: free the model before the HNSW build and the read-back
            # check, or the run's peak memory is the model plus the new segment's pages.
            _close(embedder)
        if report.chunks_truncated:
            report.notices.append(
                truncation_notice(report, embedder.max_tokens, chunker is not None, settings)
            )
        with report.timed("write"):
            store.flush()
            if manifest.restamped:  # stamps of files found current by content, for next time
                manifest.save(index_dir)
        report.points_total = store.count()
        _optimize(store, settings, report, progress)
        with report.timed("check"):
            _verify(store, manifest, index_dir, report)
        report.points_total = store.count()
    finally:
        if opened is None:
            store.close()
        if own_embedder:
            _close(embedder)


def _close(embedder: Embedder) -> None:
    close = getattr(embedder, "close", None)
    if callable(close):
        close()  # idempotent: the run's end closes again after an early close


def _optimize(store: Store, settings: Settings, report: IndexReport, progress: Progress) -> None:
    """Build the HNSW index after a run that changed an index of `optimize_min_points` or more.

    A bulk load leaves plain segments (exact search: 8 ms a dense query at 100k points, under
    1 ms at a few thousand), so small indexes, the test suite's among them, skip this. Above the
    threshold Qdrant's optimizer decides what to build: it indexes only segments past its own
    indexing threshold, so a small incremental run costs microseconds here (measured at 100k:
    30-60 us when nothing is due, 6.5 s when 8,000 new points crossed the threshold, 20-40 s
    for a 100k bulk load; docs/explanation/benchmarks.md).
    """
    changed = report.chunks_written or report.documents_removed
    if not changed or report.points_total < settings.store.optimize_min_points:
        return
    progress.note(f"building the HNSW index over {report.points_total:,} points...")
    build_hnsw(store, report)


def _verify(store: Store, manifest: Manifest, index_dir: Path, report: IndexReport) -> None:
    """Read the points back: a run never ends with success over a store it left damaged.

    Every point is read when the index is small or this run wrote a tenth of it or more; a
    full read costs ~9 s at 100k points, too much for a run that changed one file of a large
    index, which reads the open check's sample instead (`ctxr doctor` reads everything).
    Points of documents the manifest does not hold are a killed run's leftovers: removed here.
    """
    points = report.points_total
    full = points <= FULL_CHECK_POINTS or report.chunks_written * 10 >= points
    limit = None if full else integrity.OPEN_SAMPLE
    found = integrity.verify(store, manifest, limit)
    if found.orphan_docs and found.unreadable is None:
        store.delete_documents(sorted(found.orphan_docs))
        store.flush()
        found = integrity.verify(store, manifest, limit)
    if not found.sound:
        raise integrity.corrupt(index_dir, found.summary())


def changed_documents(
    paths: Sequence[str | Path],
    settings: Settings,
    manifest: Manifest,
    recipe: str,
    report: IndexReport,
    progress: Progress,
    found: set[str] | None = None,
) -> Iterator[Document]:
    """The documents under `paths` that are new or changed since the manifest, read lazily;
    `found`, when given, gets the id of every document found on disk, read or not.

    A file whose stamp (size, times, inode) is the one the manifest recorded is passed over
    unread, unless ``CTXR_TRUST_FILE_STAMPS`` is off; one read and found current by its content
    has its stamp recorded, for the next run (`ctxr.file_stamp`)."""
    seen = found if found is not None else set()

    def unchanged(doc_id: str, stamp: Stamp) -> bool:
        if manifest.is_stamped(doc_id, stamp, recipe):
            seen.add(doc_id)
            report.documents_unchanged += 1
            report.documents_unread += 1
            return True
        return False

    for document in load_paths(
        paths,
        settings.corpus.max_file_bytes,
        report,
        progress,
        include=settings.corpus.include,
        follow_links=settings.corpus.follow_links,
        unchanged=unchanged if settings.corpus.trust_file_stamps else None,
    ):
        seen.add(document.doc_id)
        if manifest.is_current(document.doc_id, document.sha256, recipe):
            report.documents_unchanged += 1
            manifest.restamp(document.doc_id, document.file_stamp)
        else:
            yield document


def load_changed(
    paths: Sequence[str | Path],
    settings: Settings,
    manifest: Manifest,
    recipe: str,
    report: IndexReport,
    progress: Progress,
) -> list[Document]:
    """`changed_documents`, all read at once (an update's few files)."""
    return list(changed_documents(paths, settings, manifest, recipe, report, progress))
