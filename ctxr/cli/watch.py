"""`ctxr watch`: a live index. Folders are watched and what changes is re-indexed as it changes.

Each update is `ctxr index`'s own pipeline over the changed paths only
(`ctxr.pipeline.update.update_index`). Where it runs follows the one rule of the embedded index
(`ctxr.index.owner`): while a `ctxr serve` owns the index, the changes go to that server, which
writes them through its open shard; otherwise the watcher opens the index for the update and
closes it again, so `ctxr search` works between updates. The rule is looked at again before
every update: a server started or stopped while the watcher runs is used or left, and an update
that meets a server that has just taken the index is sent to it.

Changes are debounced (written once the folders have been quiet for `--debounce` ms, or after
at most `MAX_WAIT_MS` of steady change). An update that fails for a reason that can pass (the
index in use, a provider error) keeps its paths and is tried again; a bad setting stops the
watcher with the error, and so does an index that is gone (deleted, or never built): an update
never creates one, since into a deleted index it would write one of the few files that just
changed, which a server would then serve as the whole; the error says what to run. Ctrl-C stops
it cleanly, between updates or in one (a killed update loses at most its last batch, as for
`ctxr index`).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxr.cli.options import follow_links_option, index_option
from ctxr.config import Settings, load_settings
from ctxr.errors import ConfigError, CtxrError, IndexInUseError, IndexNotFoundError

if TYPE_CHECKING:
    from ctxr.index.embed.base import Embedder

MAX_WAIT_MS = 1600  # the longest a stream of changes is held before an update
TICK_MS = 250  # how often the loop wakes without changes, to retry a failed update
RETRY_SECONDS = 0.25  # an index held by a search or a run is usually free again soon


@click.command("watch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@index_option
@click.option(
    "--debounce",
    type=click.IntRange(10, 60_000),
    default=200,
    show_default=True,
    help="milliseconds of quiet before the changes are indexed",
)
@follow_links_option
def watch_command(
    paths: tuple[Path, ...], index_dir: Path | None, debounce: int, follow_links: bool | None
) -> None:
    """Keep an index in step with folders: changed, added and deleted files are re-indexed as
    they change, one line per update, until Ctrl-C. Beside a running `ctxr serve` on the same
    index the updates go through the server."""
    import watchfiles

    from ctxr.pipeline.update import changed_targets

    settings = load_settings(index_dir=index_dir, follow_links=follow_links)
    roots = [str(p) for p in paths]
    updater = Updater(roots, settings)
    index = Path(settings.index_dir).resolve()
    _say(f"watching {', '.join(roots)} for {settings.index_dir}; Ctrl-C to stop")
    pending: set[str] = set(roots)  # first, bring the index in step with the folders
    last_try = 0.0
    try:
        for changes in watchfiles.watch(
            *watched_paths(roots),
            watch_filter=lambda _, path: not Path(path).resolve().is_relative_to(index),
            debounce=max(MAX_WAIT_MS, debounce),
            step=debounce,
            rust_timeout=TICK_MS,
            yield_on_timeout=True,
        ):
            pending.update(path for _, path in changes)
            if not pending or (not changes and time.monotonic() - last_try < RETRY_SECONDS):
                continue
            batch = sorted(pending)
            if not changed_targets(roots, batch):  # hidden files, outside the roots: nothing
                pending.clear()
                continue
            last_try = time.monotonic()
            try:
                report, via = updater.apply(batch)
            except (ConfigError, IndexNotFoundError):
                raise
            except CtxrError as exc:
                _say(f"{_now()}  update failed, kept for the next one: {exc}")
                continue
            pending.clear()
            click.echo(update_line(len(batch), report, via))
            sys.stdout.flush()  # a pipe (a log, a test) sees each line as it happens
    except KeyboardInterrupt:
        _say("stopped")
    finally:
        updater.close()


def watched_paths(roots: list[str]) -> list[str]:
    """What the OS watches: folders as given, and a file's folder rather than the file (an
    editor that saves by renaming a new file over it would leave a watch on the file blind to
    the next save); events beside the file are dropped by `changed_targets`."""
    watched = {os.path.abspath(r if os.path.isdir(r) else os.path.dirname(r) or ".") for r in roots}
    return sorted(watched)


class Updater:
    """Applies one update to the index: through the server that owns it, or locally."""

    def __init__(self, roots: list[str], settings: Settings) -> None:
        self.roots = roots
        self.settings = settings
        self._embedder: Embedder | None = None  # loaded for the first local update, then kept

    def apply(self, changed: list[str]) -> tuple[dict[str, Any], str | None]:
        """The update's report (as JSON) and the server it went through, if any."""
        via = self._served(changed)
        if via is not None:
            return via
        from ctxr.index import components
        from ctxr.pipeline.update import update_index

        if self._embedder is None:
            self._embedder = components.make_embedder(self.settings, cached=True)
        try:
            report = update_index(self.roots, changed, self.settings, embedder=self._embedder)
        except IndexInUseError:
            via = self._served(changed)  # a server took the index as this update began
            if via is None:
                raise
            return via
        return report.to_json(), None

    def _served(self, changed: list[str]) -> tuple[dict[str, Any], str] | None:
        if self.settings.store.qdrant_url:
            return None  # a Qdrant server takes every process's writes: nobody owns it
        from ctxr.api.client import ServedIndex
        from ctxr.index.owner import live_owner

        owner = live_owner(Path(self.settings.index_dir))
        if owner is None:
            return None
        return ServedIndex(owner).update(self.roots, changed), owner.describe()

    def close(self) -> None:
        close = getattr(self._embedder, "close", None)
        if callable(close):
            close()


def update_line(paths: int, report: dict[str, Any], via: str | None) -> str:
    """One line per update: what changed, what was written and removed, and how long it took."""
    failed = report.get("failed") or []
    parts = [
        f"{_now()}  {paths} path{'s' if paths != 1 else ''} changed:",
        f"{report.get('documents_indexed', 0)} indexed, {report.get('documents_removed', 0)}"
        f" removed, {report.get('documents_unchanged', 0)} unchanged;",
        f"chunks {report.get('chunks_written', 0)} written, {report.get('chunks_removed', 0)}"
        f" removed; {float(report.get('seconds', 0.0)):.2f} s",
    ]
    if failed:
        first = failed[0]
        parts.append(f"; {len(failed)} failed ({first.get('path')}: {first.get('reason')})")
    if via:
        parts.append(f"(through {via})")
    return " ".join(parts)


def _now() -> str:
    return time.strftime("%H:%M:%S")


def _say(line: str) -> None:
    click.echo(f"ctxr watch: {line}", err=True)
