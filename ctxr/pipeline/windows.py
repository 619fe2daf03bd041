"""A run's documents in windows: loaded, split, situated and written a window at a time.

A run used to load every changed document, split and situate all of them, and only then write:
its memory grew with the corpus (8.1 GB at 500k chunks against 1.07 GB at 50k). A window is at
most `window_documents` documents (``CTXR_WINDOW_DOCUMENTS``) or `WINDOW_TEXT_CHARS` characters
of text, whichever comes first; only one window's documents, chunks and contexts are held at
once, so a run's memory is the model, the store and one window, whatever the corpus.

What a corpus of one window gets is what it always got. Across windows two things differ:

- BM25's length normalisation uses the mean chunk length of what the index holds once the
  window is written (the documents kept, the windows before, this one), a running mean; a
  corpus whose chunks are alike in length gets nearly the mean of the whole (the terms' IDF is
  exact either way: Qdrant computes it at query time).
- The progress bars count on across windows, their totals known once the walk has ended.

A batch-API run (``CTXR_LLM_BATCH``) is one window whatever its size: its requests are sent as
one batch, and a provider takes up to a day to answer each, so windows would wait in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager

from ctxr.progress import Progress
from ctxr.types import Document

# ~8 MB of text: ~10k chunks of 200 tokens. A chunk in flight costs ~17 KB (its document, text,
# context, payload and BM25 counts as Python objects: 905 against 575 MiB peak for 20k chunks
# in one window against windows of 200 documents), so a window is ~170 MB at most.
WINDOW_TEXT_CHARS = 8 * 2**20
UNBOUNDED = 2**62


def windows(
    documents: Iterable[Document],
    max_documents: int,
    timed_load: Callable[[], AbstractContextManager[object]],
    max_chars: int = WINDOW_TEXT_CHARS,
) -> Iterator[tuple[list[Document], bool]]:
    """`documents` cut into windows, each with whether it is the last.

    Pulling a document is timed under `timed_load` (the walk reads files lazily). One document
    beyond the window is read ahead, to know whether the window is the last: the walk's end
    (and what a run does there, such as pruning) comes before the last window is written.
    """
    source = iter(documents)

    def pull() -> Document | None:
        with timed_load():
            return next(source, None)

    pending = pull()
    while pending is not None:
        window: list[Document] = []
        chars = 0
        while pending is not None and (
            not window or (len(window) < max_documents and chars < max_chars)
        ):
            window.append(pending)
            chars += len(pending.text)
            pending = pull()
        yield window, pending is None


class WindowedProgress:
    """A `Progress` whose phases count on across windows instead of restarting at each.

    Each window starts its phases with its own total. The first start of a phase passes no
    total unless the window is the last (the run's total is not known yet); later starts only
    add; the last window's start gives the run's total, which the bar learns while its count
    goes on (`ctxr.cli.progress`). A run of one window starts each phase exactly as before.
    The walk's own phase (`files`) passes through: the walk counts it itself."""

    PASS_THROUGH = frozenset({"files"})

    def __init__(self, inner: Progress) -> None:
        self.inner = inner
        self.last = False
        self._sums: dict[str, int] = {}

    def start(self, phase: str, total: int | None) -> None:
        if phase in self.PASS_THROUGH:
            self.inner.start(phase, total)
            return
        first = phase not in self._sums
        self._sums[phase] = self._sums.get(phase, 0) + (total or 0)
        if first:
            self.inner.start(phase, total if self.last else None)
        elif self.last:
            self.inner.start(phase, self._sums[phase])

    def advance(self, phase: str, amount: int = 1) -> None:
        self.inner.advance(phase, amount)

    def note(self, message: str) -> None:
        self.inner.note(message)
