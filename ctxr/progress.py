"""Progress reporting, kept apart from the work so pure stages never import a terminal library.

The indexer talks to a `Progress`; the CLI passes a rich-backed one, tests and the Python API
the silent `NullProgress`.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, phase: str, total: int | None) -> None: ...

    def advance(self, phase: str, amount: int = 1) -> None: ...

    def note(self, message: str) -> None: ...


class NullProgress:
    def start(self, phase: str, total: int | None) -> None:
        pass

    def advance(self, phase: str, amount: int = 1) -> None:
        pass

    def note(self, message: str) -> None:
        pass
