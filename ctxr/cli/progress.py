"""`RichProgress`: the bars `ctxr index` and `ctxr eval` draw on stderr."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichBar
from rich.text import Text

# What each phase counts, for its rate: the split phase advances once a document.
UNITS = {"files": "files", "split": "docs", "contexts": "chunks", "embeddings": "chunks",
         "questions": "questions"}  # fmt: skip
# Rich estimates speed (and so the ETA) from the advances of this many seconds; its default,
# 30 s, leaves no estimate at all when one step of a slow run takes longer than that.
SPEED_WINDOW_SECONDS = 120.0


class RateColumn(ProgressColumn):
    """Items per second over the recent window, in the phase's own unit (`12.5 chunks/s`)."""

    def render(self, task: Task) -> Text:
        speed = task.speed
        if speed is None:
            return Text("")
        unit = task.fields.get("unit") or "items"
        return Text(f"{speed:,.1f} {unit}/s", style="progress.data.speed")


class RichProgress:
    """Bars on stderr, one per phase (files, split, contexts, embeddings), each with its rate
    and time left; notes print above them."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._bar = RichBar(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            speed_estimate_period=SPEED_WINDOW_SECONDS,
        )
        self._tasks: dict[str, TaskID] = {}
        self._totals: dict[str, int | None] = {}

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bar.stop()

    def start(self, phase: str, total: int | None) -> None:
        """A phase (re)starts from zero: `ctxr eval` indexes once per context mode, and its
        second run used to add to the first (`chunks 180/90`). A phase started without a total
        that is started again with one has learnt its total: its count goes on (the walk knows
        how many files there were only at its end)."""
        task = self._tasks.get(phase)
        learnt = task is not None and total is not None and self._totals.get(phase) is None
        self._totals[phase] = total
        if task is not None and learnt:
            self._bar.update(task, total=total)
            return
        if task is not None:
            self._bar.reset(task, total=total)
        else:
            unit = UNITS.get(phase, "items")
            self._tasks[phase] = self._bar.add_task(phase, total=total, unit=unit)
        # A sample at zero now: the rate and ETA then show from the first step on, not the
        # second (one step of a large file can take several seconds).
        self._bar.advance(self._tasks[phase], 0)

    def advance(self, phase: str, amount: int = 1) -> None:
        if phase not in self._tasks:
            self.start(phase, None)
        self._bar.advance(self._tasks[phase], amount)

    def note(self, message: str) -> None:
        self._bar.console.print(message, highlight=False, markup=False)
