"""Each run's report kept in the index: `<index>/reports/index-<UTC time>.json`.

A run's report (`ctxr.pipeline.report`) says what it skipped and why, what failed, what it
wrote and how long each stage took; `ctxr index` prints it and forgets it. Kept beside the
manifest and the LLM ledgers (`<index>/ledgers/`), it lets the page at `/` of `ctxr serve` say
how the index it serves was built. The newest `KEEP` are kept: `ctxr watch` runs one small
update per change, and an index should not grow a file per saved keystroke.

Writing is best effort: a disk that refuses the report loses the report, never the run (what
it indexed is in the manifest already). A file that cannot be read is passed over.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ctxr.atomic_write import write_atomically
from ctxr.pipeline.report import IndexReport

REPORTS_DIR = "reports"
KEEP = 50
_PREFIX = "index-"


def save_report(report: IndexReport, when: datetime | None = None) -> Path | None:
    """Write `report` under its index's reports directory and drop the oldest beyond `KEEP`;
    the path written, or None when the disk refused it."""
    moment = when or datetime.now(UTC)
    folder = Path(report.index_dir) / REPORTS_DIR
    target = folder / f"{_PREFIX}{moment.strftime('%Y%m%dT%H%M%S%fZ')}.json"
    body = {"finished_at": moment.isoformat(timespec="seconds"), **report.to_json()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(target, json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    except OSError:
        return None
    for old in _files(folder)[:-KEEP]:
        with contextlib.suppress(OSError):
            old.unlink()
    return target


def recent_reports(index_dir: str | Path, limit: int = KEEP) -> list[dict[str, Any]]:
    """The newest `limit` reports, newest first, each as `save_report` wrote it."""
    found: list[dict[str, Any]] = []
    for path in reversed(_files(Path(index_dir) / REPORTS_DIR)):
        if len(found) == limit:
            break
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(body, dict):
            found.append(body)
    return found


def _files(folder: Path) -> list[Path]:
    """The report files, oldest first (their names sort by time)."""
    try:
        return sorted(folder.glob(f"{_PREFIX}*.json"))
    except OSError:
        return []
