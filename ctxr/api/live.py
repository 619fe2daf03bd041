"""The live index's write endpoint: `POST /index/update`, how `ctxr watch` writes beside a server.

A `ctxr serve` on an embedded index owns its shard (`ctxr.index.owner`): no other process can
open it, so a watcher beside the server sends it the paths that changed and the server indexes
them itself, through the store it already has open, with `ctxr index`'s own pipeline
(`ctxr.pipeline.update.update_index`: same loading, splitting, contexts, embedding cache,
writing and read-back check) and this server's settings. Searches go on while it writes (the
shard serves reads and writes from several threads); updates run one at a time.

The endpoint makes the server read files and serve them to every searcher, so it is guarded
apart from search:

- it exists only on a server that owns its index and answers only clients on this machine;
- it needs the owner file's token (readable only by the server's user; what `ctxr watch`
  sends) or CTXR_API_UPDATE_TOKEN, even where no API token is set; CTXR_API_TOKEN, which lets
  a client search, is refused 403 (`Guard`'s private paths);
- every root it names must resolve (links followed) inside a root the index was built from
  (`ctxr.index.roots`) or one the server was started with (`--root`, CTXR_API_UPDATE_ROOTS);
  anything else is refused 403 naming the root and the fix;
- it never creates an index: into one that was deleted it answers 503 saying what to run.

Paths are read as the watcher names them; a relative one means the same file only where
both processes run in the same directory, so a watcher elsewhere is refused (409) with the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ctxr.api.client import UPDATE_PATH
from ctxr.api.holder import ServiceHolder
from ctxr.api.models import ErrorResponse
from ctxr.config import Settings
from ctxr.errors import IndexNotFoundError
from ctxr.index import components
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.manifest import Manifest
from ctxr.index.owner import cwd_mismatch
from ctxr.index.roots import inside, recorded_roots, resolved
from ctxr.pipeline.build import OpenIndex, refuse_missing
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.update import update_index


class UpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    roots: list[str] = Field(min_length=1, description="the watched paths, as given to watch")
    changed: list[str] = Field(description="paths that changed under them; the roots: all")
    cwd: str = Field(description="the watcher's working directory")


# What the endpoint itself answers besides its report (the guard's 401/403 are added to the
# schema by `ctxr.api.openapi`); the body is {"detail": a sentence}.
_ANSWERS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": why}
    for status, why in [
        (403, "a root outside those the index was built from or the server may read"),
        (409, "the watcher runs in another directory and names relative paths"),
        (410, "the index was deleted: the watcher stops"),
        (503, "the index cannot be used"),
    ]
}


def add_live_routes(app: FastAPI, holder: ServiceHolder, settings: Settings) -> None:
    @app.post(UPDATE_PATH, responses=_ANSWERS)
    async def update(body: UpdateRequest) -> dict[str, Any]:
        """Re-index the changed paths under the watched roots (for `ctxr watch`)."""
        mismatch = cwd_mismatch(body.roots, body.cwd, os.getcwd())
        if mismatch:
            raise HTTPException(409, detail=mismatch)
        try:
            refuse_missing(holder.index_dir)
        except IndexNotFoundError as exc:  # 410: the watcher stops rather than retry
            raise HTTPException(410, detail=str(exc)) from None
        outside = _outside_roots(body.roots, holder, settings)
        if outside:
            raise HTTPException(403, detail=outside)
        report = await run_in_threadpool(_update, holder, settings, body)
        return report.to_json()


def _outside_roots(roots: list[str], holder: ServiceHolder, settings: Settings) -> str | None:
    """Why an update's roots may not be read, or None: each must resolve inside an allowed root."""
    allowed = [
        *recorded_roots(holder.index_dir),
        *(resolved(r) for r in settings.api.api_update_roots),
    ]
    for root in roots:
        if not inside(root, allowed):
            shown = root if len(root) <= 200 else root[:200] + "..."
            where = ", ".join(allowed) if allowed else "none recorded for this index"
            return (
                f"{shown!r} resolves to {resolved(root)!r}, outside the folders this index was "
                f"built from or the server was given ({where}); an update reads only those. "
                f"Index it on purpose with `ctxr index {shown} --index {holder.index_dir}` "
                "(stop the server first), or start `ctxr serve` with --root for it"
            )
    return None


def _update(holder: ServiceHolder, settings: Settings, body: UpdateRequest) -> IndexReport:
    with holder.writing() as service:
        # A copy to write: searches keep reading the service's until the update is adopted.
        refuse_missing(Path(settings.index_dir))  # gone under the server: nothing to update
        manifest = Manifest.load(Path(settings.index_dir))
        embedder = CachedEmbedder(
            service.embedder, components.cache_dir(settings) / "embeddings", owns_inner=False
        )
        try:
            return update_index(
                body.roots,
                body.changed,
                settings,
                embedder=embedder,
                opened=OpenIndex(manifest, service.store),
            )
        finally:
            embedder.close()
            service.adopt_manifest(manifest)  # as far as the run got, even if it failed
