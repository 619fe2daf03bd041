"""The Ray executor: splitting and embedding on Ray actors, each holding its own model.

`ray.init()` joins the cluster `RAY_ADDRESS` names (Ray's own convention) or starts a local Ray
for the run, shut down at its end; a Ray the caller already started is used and left running.
Actors are made per stage and freed after it: splitters (the tokenizer and ctxr's splitter,
loaded once per actor), then embedders (the ONNX model, loaded once per actor), each asking
`CTXR_RAY_WORKER_CPUS` CPUs of the cluster; embedders also ask `CTXR_RAY_WORKER_GPUS` GPUs,
which places them on GPU nodes (the bundled ONNX MiniLM itself runs on the CPU).

Placement keeps the index the one a local run builds:
- documents go to the splitters in contiguous batches and come back in input order;
- the embedder's texts arrive sorted longest first (`pipeline.write`) and are cut into the
  local embedder's batches, which are dealt to the actors in turn (each gets long and short
  texts alike), so every ONNX batch (and so its padding) is the one a local run makes:
  vectors agree to float rounding
  (past 32 actors a write batch holds more than a local run's 256 chunks and the texts are
  grouped otherwise; that moves no vector of the bundled MiniLM, whose vector for a text is
  the same alone or padded in any batch);
- a given chunker (an evaluation set's own chunks) is a Python object of the caller's, split in
  the driver; an HTTP embedder (`CTXR_EMBEDDER=openai`) stays in the driver too, where one rate
  budget holds for the run (N actors would each spend the whole budget).

Where the points are written depends on the store. The embedded shard is a directory on the
driver's machine: vectors come back to the driver, which keeps them in the run's embedding
cache and writes them (`_DriverWrites`). A Qdrant server (`CTXR_QDRANT_URL=http(s)://...`)
can be written from anywhere: each embedding actor then upserts the points it embedded itself
(`RayEmbedder.submit`), in parallel, so vectors never travel through the driver. Either way
the driver deletes a changed document's old points first and records the manifest once every
point is acknowledged; and while the actors embed a batch, the driver prepares the next (its
BM25 terms, payloads and token counts), which they take up as soon as they finish: past some
tens of actors that preparation, done one batch at a time, would leave them waiting on the
driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ctxr.config import RunSettings, Settings
from ctxr.errors import ConfigError, CtxrError, IndexError_
from ctxr.index import components
from ctxr.index.embed.base import Embedder, EmbedderWrapper, FloatMatrix
from ctxr.index.embed.cache import CachedEmbedder
from ctxr.index.store import factory as store_factory
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline.chunking import Chunker, run_chunker
from ctxr.pipeline.executors.base import PendingWrite, PointWriter, Split, split_documents
from ctxr.pipeline.executors.local import LocalExecutor
from ctxr.types import Document

# Documents a splitter actor is handed at once: enough to amortise a round trip (~1 ms), few
# enough that every actor gets work on a small corpus.
SPLIT_BATCH_DOCUMENTS = 16


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # an optional extra
        raise ConfigError(
            "the Ray executor needs Ray: pip install 'ctxr[ray]', or index without --ray "
            "(CTXR_EXECUTOR=local)"
        ) from None
    return ray


class _SplitWorker:
    """A Ray actor: ctxr's splitter with the run's settings, built once."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder = components.make_embedder(settings)  # its tokenizer sizes chunks
        self._split, self._budget_for = run_chunker(settings, None, self._embedder)

    def split(self, documents: list[Document]) -> list[Split]:
        return list(split_documents(documents, self._split, self._budget_for))


class _EmbedWorker:
    """A Ray actor: the run's embedder, its model loaded once; and, when the run writes to a
    Qdrant server, its own connection to it, opened at the first write."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._embedder = components.make_embedder(settings)
        self._store: Store | None = None

    def embed(self, texts: list[str]) -> FloatMatrix:
        return self._embedder.embed(texts)

    def embed_and_write(self, texts: list[str], points: list[StoredPoint]) -> int:
        vectors = self._embedder.embed(texts)
        filled = [replace(p, dense=row.tolist()) for p, row in zip(points, vectors, strict=True)]
        try:
            if self._store is None:
                settings = self._settings
                dim = self._embedder.dim
                self._store = store_factory.open_store(settings.store, Path(settings.index_dir),
                                                       dim)  # fmt: skip
            self._store.upsert(filled)  # returns once the server has acknowledged every point
        except IndexError_ as exc:
            # Said from where it happened: a server the driver reaches may be out of a
            # worker's reach (a URL of localhost, a firewall between nodes).
            node = _ray().util.get_node_ip_address()
            raise IndexError_(f"on the Ray worker at {node}: {exc}") from None
        return len(filled)


def _results(refs: list[Any]) -> list[Any]:
    """`ray.get(refs)`, with an actor's ctxr error raised as itself: its message names the
    thing and the fix, where Ray's wrapper would lead with the actor's traceback."""
    ray = _ray()
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as exc:
        if isinstance(exc.cause, CtxrError):
            raise exc.cause from None
        raise


def _as_done(refs: list[Any]) -> Iterator[tuple[int, Any]]:
    """Each of `refs` as it completes: its position and its result (errors as `_results`)."""
    ray = _ray()
    position = {ref: i for i, ref in enumerate(refs)}
    waiting = list(refs)
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1)
        for ref in done:
            yield position[ref], _results([ref])[0]


@dataclass(frozen=True, slots=True)
class _Started:
    """Texts handed to the embedding actors: each actor's call and the rows it embeds."""

    refs: list[Any]
    rows: list[list[int]]
    count: int
    dim: int

    def vectors(self, done: Callable[[list[int]], None] | None = None) -> FloatMatrix:
        """The vectors, once every actor has answered; `done` is told each actor's rows as
        its answer comes."""
        out = np.zeros((self.count, self.dim), dtype=np.float32)
        for share, got in _as_done(self.refs):
            out[self.rows[share]] = got
            if done is not None:
                done(self.rows[share])
        return out


@dataclass(frozen=True, slots=True)
class _ActorWrites:
    """`PendingWrite`: one batch's calls to the embedding actors, which upsert it."""

    refs: list[Any]

    def wait(self, advance: Callable[[int], None]) -> None:
        for _, written in _as_done(self.refs):
            advance(written)


@dataclass(frozen=True, slots=True)
class _ActorVectors:
    """`PendingWrite`: one batch being embedded by the actors, which the driver then keeps in
    the run's embedding cache and upserts into its own store."""

    started: _Started | None  # the texts the cache lacks, being embedded (None: it has all)
    vectors: FloatMatrix  # the batch's rows; those found in the cache already filled in
    missing: dict[str, list[int]]  # each text the actors embed, with its rows
    points: list[StoredPoint]
    cache: CachedEmbedder
    store: Store

    def wait(self, advance: Callable[[int], None]) -> None:
        points_of = [len(rows) for rows in self.missing.values()]  # a text may be in several
        cached = len(self.points) - sum(points_of)
        if cached:
            advance(cached)
        if self.started is not None:
            fresh = self.started.vectors(lambda rows: advance(sum(points_of[r] for r in rows)))
            self.cache.keep(self.vectors, self.missing, fresh)
        self.store.upsert([replace(p, dense=row.tolist())
                           for p, row in zip(self.points, self.vectors, strict=True)])  # fmt: skip


@dataclass(frozen=True, slots=True)
class _DriverWrites:
    """`PointWriter` for a store the driver alone holds (the embedded shard, a `file:` URL):
    the actors embed a batch's texts the run's embedding cache lacks while the driver prepares
    the next batch; the driver then caches the vectors and upserts the points, as a local run
    does."""

    pool: RayEmbedder
    cache: CachedEmbedder
    store: Store
    by_workers: bool = False

    def submit(self, texts: Sequence[str], points: Sequence[StoredPoint]) -> PendingWrite:
        vectors, missing = self.cache.lookup(texts)
        started = self.pool.start(list(missing)) if missing else None
        return _ActorVectors(started, vectors, missing, list(points), self.cache, self.store)


class RayEmbedder(EmbedderWrapper):
    """An `Embedder` whose `embed` runs on Ray actors; the rest (name, sizes, token counts)
    is answered by an unloaded local embedder, which reads only its tokenizer.

    The actors are made at the first `embed`: a run opens its embedder before it splits, and
    embedders holding every CPU would leave the splitter actors waiting for one forever."""

    by_workers = True  # as a `PointWriter` (`submit`): the actors upsert

    def __init__(
        self, local: Embedder, make_actors: Callable[[], list[Any]], batch: int, workers: int
    ) -> None:
        super().__init__(local)
        self._make_actors = make_actors
        self._actors: list[Any] = []
        self._batch = batch  # slices are multiples of it (see the module's docstring)
        self._workers = workers

    @property
    def texts_per_call(self) -> int:
        """One embedder batch per actor: a call with fewer texts leaves actors idle."""
        return self._workers * self._batch

    def _shares(self, count: int) -> list[tuple[Any, list[int]]]:
        """Each actor with its rows of `count` texts: whole embedder batches (runs of `batch`
        rows, the batches a local run makes of texts sorted longest first), dealt out in turn,
        so every actor gets long and short texts alike. (Contiguous halves of a batch gave
        one actor all the long texts while the other waited.)"""
        if not self._actors:
            self._actors = self._make_actors()
        starts = range(0, count, self._batch)
        shares = []
        for turn, actor in enumerate(self._actors):
            rows = [r for i in starts[turn :: len(self._actors)]
                    for r in range(i, min(i + self._batch, count))]  # fmt: skip
            if rows:
                shares.append((actor, rows))
        return shares

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.start(texts).vectors()

    def start(self, texts: Sequence[str]) -> _Started:
        """Hand `texts` to the actors, each its share; their vectors, in order, once got."""
        shares = self._shares(len(texts))
        refs = [actor.embed.remote([texts[i] for i in rows]) for actor, rows in shares]
        return _Started(refs, [rows for _, rows in shares], len(texts), self.dim)

    def submit(self, texts: Sequence[str], points: Sequence[StoredPoint]) -> PendingWrite:
        """`PointWriter.submit`: each actor embeds its share and upserts those points itself.
        An actor runs its calls in order, so a batch submitted while one is in flight is
        queued behind it and starts the moment the actor is free."""
        refs = [
            actor.embed_and_write.remote([texts[i] for i in rows], [points[i] for i in rows])
            for actor, rows in self._shares(len(texts))
        ]
        return _ActorWrites(refs)

    def close(self) -> None:
        ray = _ray()
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
        self.close_inner()


class RayExecutor:
    name = "ray"

    def __init__(self, run: RunSettings) -> None:
        ray = _ray()
        self._run = run
        self._started = False
        self._embedder: RayEmbedder | None = None  # the run's, once `embedder` made it
        if not ray.is_initialized():
            # RAY_ADDRESS, when set, is read by ray.init itself; unset, a local Ray starts.
            ray.init(
                num_cpus=run.ray_local_cpus,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
            self._started = True
        self._ray = ray

    def _workers(self) -> int:
        if self._run.ray_workers is not None:
            return self._run.ray_workers
        cpus = float(self._ray.cluster_resources().get("CPU", 1))
        return max(1, int(cpus // self._run.ray_worker_cpus))

    def _actors(self, cls: type, settings: Settings, count: int, gpus: float = 0.0) -> list[Any]:
        remote = self._ray.remote(num_cpus=self._run.ray_worker_cpus, num_gpus=gpus)(cls)
        # Each actor's onnxruntime uses the CPUs the actor asked for, not the whole host's.
        threads = max(1, int(self._run.ray_worker_cpus))
        placed = settings.replace(embed_threads=settings.embed.embed_threads or threads)
        return [remote.remote(placed) for _ in range(count)]

    def embedder(self, settings: Settings) -> Embedder:
        local = components.make_embedder(settings)
        if settings.embed.embedder != "local":
            return local  # HTTP: one rate budget, in the driver (see the module's docstring)
        workers = self._workers()
        self._embedder = RayEmbedder(
            local,
            lambda: self._actors(_EmbedWorker, settings, workers, self._run.ray_worker_gpus),
            settings.embed.embed_batch_size,
            workers,
        )
        return self._embedder

    def point_writer(
        self, settings: Settings, store: Store, embedder: Embedder
    ) -> PointWriter | None:
        """The embedding actors, when the run embeds on them: they upsert the points
        themselves where they can reach the store (a Qdrant server over http(s)); for the
        embedded shard, and qdrant-client's local mode (a `file:` URL), directories one
        process holds, they embed and the driver writes. Either way the driver prepares the
        next batch meanwhile. None for an embedder of the caller's or an HTTP one."""
        if self._embedder is None:
            return None
        url = settings.store.qdrant_url or ""
        if url.startswith(("http://", "https://")):
            return self._embedder
        if isinstance(embedder, CachedEmbedder) and embedder.inner is self._embedder:
            return _DriverWrites(self._embedder, embedder, store)
        return None

    def split(
        self,
        documents: Sequence[Document],
        settings: Settings,
        chunker: Chunker | None,
        embedder: Embedder,
    ) -> Iterator[Split]:
        if chunker is not None or not documents:
            yield from LocalExecutor().split(documents, settings, chunker, embedder)
            return
        batches = [
            list(documents[i : i + SPLIT_BATCH_DOCUMENTS])
            for i in range(0, len(documents), SPLIT_BATCH_DOCUMENTS)
        ]
        actors = self._actors(_SplitWorker, settings, min(self._workers(), len(batches)))
        try:
            from ray.util import ActorPool

            pool = ActorPool(actors)
            # map keeps input order; each actor takes the next batch when it is free.
            for result in pool.map(lambda actor, batch: actor.split.remote(batch), batches):
                yield from result
        finally:
            for actor in actors:
                self._ray.kill(actor)

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
