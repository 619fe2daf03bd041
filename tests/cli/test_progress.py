"""The bars `ctxr index` draws (`ctxr.cli.progress.RichProgress`), rendered to a string."""

from __future__ import annotations

import io
import re

from rich.console import Console

from ctxr.cli.progress import RichProgress


def _render(steps: list[tuple[str, str, int | None]]) -> str:
    out = io.StringIO()
    bar = RichProgress(Console(file=out, width=150))
    with bar:
        for action, phase, amount in steps:
            if action == "start":
                bar.start(phase, amount)
            else:
                bar.advance(phase, amount or 1)
    return out.getvalue()


def test_rate_and_eta_show_after_the_first_step() -> None:
    # One step of a large file can take seconds: the rate and time left must not wait for a
    # second one (they read "-:--:--" until then).
    shown = _render([("start", "embeddings", 640), ("advance", "embeddings", 64)])
    line = next(row for row in shown.splitlines() if row.startswith("embeddings"))
    assert " 64/640 " in line and re.search(r"[\d,.]+ chunks/s", line), line
    assert re.search(r"ETA \d+:\d\d:\d\d", line), line


def test_a_restarted_phase_counts_from_zero() -> None:
    steps: list[tuple[str, str, int | None]] = [
        ("start", "split", 3), *[("advance", "split", 1)] * 3
    ] * 2
    shown = _render(steps)
    assert " 3/3 " in shown and "6/3" not in shown


def test_a_phase_that_learns_its_total_keeps_its_count() -> None:
    # The walk knows how many files there were only at its end: `files 24/?` becomes 24/24.
    shown = _render([("start", "files", None), *[("advance", "files", 1)] * 24,
                     ("start", "files", 24)])  # fmt: skip
    line = next(row for row in shown.splitlines() if row.startswith("files"))
    assert " 24/24 " in line, line
