"""`RichProgress`: the bars `ctxr index` and `ctxr eval` draw on stderr."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import Progress as RichBar


class RichProgress:
    """Bars on stderr, one per phase (files, chunks, embeddings); notes print above them."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._bar = RichBar(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._tasks: dict[str, TaskID] = {}

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
        if phase in self._tasks:
            self._bar.update(self._tasks[phase], total=total)
        else:
            self._tasks[phase] = self._bar.add_task(phase, total=total)

    def advance(self, phase: str, amount: int = 1) -> None:
        if phase not in self._tasks:
            self.start(phase, None)
        self._bar.advance(self._tasks[phase], amount)

    def note(self, message: str) -> None:
        self._bar.console.print(message, highlight=False, markup=False)
