"""How often a run saves its manifest: after each batch while that is cheap, less often as the
manifest grows.

The manifest is one JSON file rewritten whole (`ctxr.index.manifest`). Saved after every batch
of 256 chunks, a large index paid for its size on every batch: at 100k documents the file is
tens of MB and a save takes a few hundred milliseconds, thousands of times a run. So a save
after a batch is skipped while the last save is recent compared with what it cost: at most
`SAVE_SHARE` of a run's time goes to saving it. A small manifest (milliseconds a save) is
still saved after nearly every batch.

Nothing paid for can be lost by a skipped save. The points of a batch are flushed before its
documents are recorded, so the manifest on disk only ever lags the store; a run killed in that
lag leaves points of documents the manifest does not count, which the next run clears and
writes again with vectors and contexts from the caches. A run that ends, or stops on an error
or Ctrl-C, saves what it recorded. Removals are saved at once (`save_now`): a document leaves
the saved manifest before its points are deleted, never after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ctxr.index.manifest import Manifest

# The largest share of a run's time spent saving the manifest after batches.
SAVE_SHARE = 0.05


class PacedSaves:
    """Saves `manifest` to `index_dir` when due (module doc)."""

    def __init__(
        self,
        manifest: Manifest,
        index_dir: Path,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.manifest = manifest
        self.index_dir = index_dir
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
        self.manifest.save(self.index_dir)
        self._saved_at = self._clock()
        self._cost = self._saved_at - started
        self.pending = False

    def finish(self) -> None:
        """Save what is recorded and not saved yet."""
        if self.pending:
            self.save_now()
