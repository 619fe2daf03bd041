"""The live index's write endpoint: `POST /index/update`, how `ctxr watch` writes beside a server.

A `ctxr serve` on an embedded index owns its shard (`ctxr.index.owner`): no other process can
open it, so a watcher beside the server sends it the paths that changed and the server indexes
them itself, through the store it already has open, with `ctxr index`'s own pipeline
(`ctxr.pipeline.update.update_index`: same loading, splitting, contexts, embedding cache,
writing and read-back check) and this server's settings. Searches go on while it writes (the
shard serves reads and writes from several threads); updates run one at a time.

The endpoint exists only on a server that owns its index, answers only clients on this machine,
and always needs a bearer token, CTXR_API_TOKEN or the owner file's, even where no API token
is set (`Guard`'s private paths): it makes the server read files, which no remote client may
ask. Paths are read as the watcher names them; a relative one means the same file only where
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
from ctxr.config import Settings
from ctxr.index import components
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.manifest import Manifest
from ctxr.index.owner import cwd_mismatch
from ctxr.pipeline.build import OpenIndex
from ctxr.pipeline.report import IndexReport
from ctxr.pipeline.update import update_index


class UpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    roots: list[str] = Field(min_length=1, description="the watched paths, as given to watch")
    changed: list[str] = Field(description="paths that changed under them; the roots: all")
    cwd: str = Field(description="the watcher's working directory")


def add_live_routes(app: FastAPI, holder: ServiceHolder, settings: Settings) -> None:
    @app.post(UPDATE_PATH)
    async def update(body: UpdateRequest) -> dict[str, Any]:
        """Re-index the changed paths under the watched roots (for `ctxr watch`)."""
        mismatch = cwd_mismatch(body.roots, body.cwd, os.getcwd())
        if mismatch:
            raise HTTPException(409, detail=mismatch)
        report = await run_in_threadpool(_update, holder, settings, body)
        return report.to_json()


def _update(holder: ServiceHolder, settings: Settings, body: UpdateRequest) -> IndexReport:
    with holder.writing() as service:
        # A copy to write: searches keep reading the service's until the update is adopted.
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
