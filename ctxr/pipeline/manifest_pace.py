"""How often a run flushes the store and saves its manifest: after each batch while that is
cheap, less often as the index grows.

The manifest is one JSON file rewritten whole (`ctxr.index.manifest`). Saved after every batch
of 256 chunks, a large index paid for its size on every batch: at 100k documents the file is
tens of MB and a save took seconds (2.8 s at 100k documents; 0.6 s since each document is
one line from the C encoder), thousands of times a run; and the shard's flush, which must come
first, took ~0.3 s a batch whatever the index's size. So a
save after a batch is skipped while the last one is recent compared with what it cost: at most
`SAVE_SHARE` of a run's time goes to flushing and saving. A small index (milliseconds a save)
is still saved after nearly every batch.

Nothing paid for can be lost by a skipped save. Every save flushes the store first, so the
manifest on disk only ever counts points that are on disk; a run killed between saves leaves
points of documents the manifest does not count, which the next run clears and writes again
with vectors and contexts from the caches. A run that ends, or stops on an error or Ctrl-C,
saves what it recorded. Removals are saved at once (`save_now`): a document leaves the saved
manifest before its points are deleted, never after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ctxr.index.manifest import Manifest

# The largest share of a run's time spent flushing and saving after batches.
SAVE_SHARE = 0.05


class PacedSaves:
    """Flushes the store (`flush`) and saves `manifest` to `index_dir` when due (module doc)."""

    def __init__(
        self,
        manifest: Manifest,
        index_dir: Path,
        flush: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.manifest = manifest
        self.index_dir = index_dir
        self._flush = flush
        self._clock = clock
        self._cost = 0.0  # seconds the last save took
        self._saved_at = clock()
        self.pending = False  # recorded, not saved yet

    def recorded(self) -> None:
        """The manifest holds new entries: saved now if due, else at the next due batch."""
        self.pending = True
        if self._clock() - self._saved_at >= self._cost / SAVE_SHARE:
            self.save_now()

    def save_now(self) -> None:
        started = self._clock()
        self._flush()  # first: the manifest never counts a point that is not on disk
        self.manifest.save(self.index_dir)
        self._saved_at = self._clock()
        self._cost = self._saved_at - started
        self.pending = False

    def finish(self) -> None:
        """Save what is recorded and not saved yet."""
        if self.pending:
            self.save_now()
