"""`update_index`: the live index's step: re-index only what changed under watched folders.

`ctxr watch` hands it the paths a file-system watcher reported (added, modified, deleted,
moved; files or directories). It runs `ctxr index`'s own run (`build.run_index`: the same lock,
loading, splitting, contexts, embedding, writing and read-back check), with a collector that
looks only at those paths, under the same walk rules as a whole walk of their folder (hidden
entries, the folder's .gitignore/.ctxrignore, the size limit, binaries and non-documents):

- a changed file that the walk would index is loaded, and re-indexed if its content changed;
- a path that is gone takes its documents (the file's, or every one under a directory) out;
- a changed file that the walk now passes over (emptied, ignored, too large, not a document)
  leaves the index too: a live index must not keep answering with what a file no longer says;
- a change to a folder's own .gitignore/.ctxrignore re-reads the whole folder.

Unchanged documents cost nothing, as in `ctxr index`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ctxr.config import Settings
from ctxr.enrich.load.walk import IGNORE_FILES, Skipped, display_path, walk_changed
from ctxr.index.embed.base import Embedder
from ctxr.index.manifest import Manifest
from ctxr.index.store.base import Store
from ctxr.pipeline.build import OpenIndex, load_changed, run_index
from ctxr.pipeline.prune import gone_documents, remove_documents
from ctxr.pipeline.report import IndexReport
from ctxr.progress import Progress
from ctxr.types import Document

Target = tuple[str, Path]  # (a watched root as given, a changed path under it, as walked)


def update_index(
    roots: Sequence[str | Path],
    changed: Iterable[str | Path],
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    opened: OpenIndex | None = None,
) -> IndexReport:
    """Re-index the `changed` paths (absolute or relative to the working directory) under the
    watched `roots`; paths outside every root are ignored. `changed=roots` syncs the roots
    whole, as `ctxr index ROOTS` does."""
    targets = changed_targets(roots, changed)
    if not targets:  # nothing the walk would read: the index is not even opened
        return IndexReport(index_dir=str(settings.index_dir), context_kind="none")

    def collect(
        manifest: Manifest, store: Store, recipe: str, report: IndexReport, bar: Progress
    ) -> list[Document]:
        files: list[Path] = []
        for root, path in targets:
            for item in walk_changed(
                root, [path], settings.corpus.max_file_bytes,
                follow_links=settings.corpus.follow_links, roots=roots,
            ):  # fmt: skip
                if isinstance(item, Skipped):
                    report.skipped.append(item)
                else:
                    files.append(item)
        todo = load_changed(files, settings, manifest, recipe, report, bar)
        skipped = {s.path for s in report.skipped}  # the load's kind skips included
        gone = gone_documents(manifest, [display_path(p) for _, p in targets], skipped)
        remove_documents(gone, manifest, store, report)
        return todo

    # create=False: an update into an index that is gone is refused, never a new index.
    return run_index(
        collect, settings, None, "split", False, embedder, progress, opened=opened, create=False
    )


def changed_targets(roots: Sequence[str | Path], changed: Iterable[str | Path]) -> list[Target]:
    """Each changed path under a root, spelled as the walk of that root spells it, minus hidden
    ones and the ones inside another target (a changed directory is walked whole)."""
    found: dict[Path, str] = {}
    for raw in changed:
        where = os.path.abspath(raw)
        for root in roots:
            top = os.path.abspath(root)
            if where != top and not where.startswith(top.rstrip(os.sep) + os.sep):
                continue
            rel = Path(os.path.relpath(where, top))
            walked = Path(root) if rel == Path(".") else Path(root) / rel
            if rel.parent == Path(".") and rel.name in IGNORE_FILES:
                walked = Path(root)  # the folder's ignore rules changed: read it again whole
            elif any(part.startswith(".") for part in rel.parts if part != "."):
                break  # the walk never reads hidden entries (an editor's swap file, .git)
            found.setdefault(walked, str(root))
            break
    targets = sorted(found.items())
    return [
        (root, path)
        for path, root in targets
        if not any(other != path and other in path.parents for other, _ in targets)
    ]
