"""How many actors the driver keeps busy when Ray actors write to a Qdrant server: the driver
preparing batch n+1 while the actors embed and upsert batch n (what `ctxr index --ray` does),
against the driver waiting for each batch before it prepares the next.

The driver's share is ctxr's own: `build_index` of the anthropic-codebase files
(`bench.common.codebase`, ``--copies`` times), outline contexts, the bundled MiniLM's tokenizer
counting, BM25 terms, payloads, the manifest. The actors are not: each batch takes the time W
one-core actors at ``--rate`` chunks/s each (12.8, measured by `bench.speed.ray_index`) would
take to embed and upsert it, slept in a thread, for W in ``--workers``. Their points are then
upserted into the run's embedded shard by the driver, at the same moment in both modes, so the
run's read-back check holds; with a server, the actors upsert them. What this measures is the
scheduling, on this machine's driver: for each W, the write phase's chunks/s in both modes and
the bound the actors alone would set (rate x W); and last, with actors that take no time, the
driver's own bound.

Usage::

    python -m bench.speed.driver_pipeline [--copies 4] [--workers 16,48,128] [--rate 12.8]
        [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.common.codebase import add_data_option, write_copies
from bench.common.measure import load_line, parser, say
from ctxr.config import Settings, load_settings
from ctxr.index import components
from ctxr.index.embed.base import Embedder, EmbedderWrapper, FloatMatrix
from ctxr.index.store.base import Store, StoredPoint
from ctxr.pipeline import build
from ctxr.pipeline.build import build_index
from ctxr.pipeline.executors.base import PendingWrite
from ctxr.pipeline.executors.local import LocalExecutor

DIM = 384  # the bundled MiniLM's
MODES = ("one batch at a time", "next batch prepared meanwhile")


class _Pool(EmbedderWrapper):
    """The run's embedder as the Ray pool presents it: one embedder batch per actor a call."""

    def __init__(self, inner: Embedder, workers: int, batch: int) -> None:
        super().__init__(inner)
        self._texts = workers * batch

    @property
    def texts_per_call(self) -> int:
        return self._texts

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return self.inner.embed(texts)  # not called: the actors embed


@dataclass
class _Batch:
    """`PendingWrite`: the simulated actors' time for one batch, then the upsert."""

    store: Store
    points: list[StoredPoint]
    unit: list[float]
    timer: threading.Thread

    def wait(self, advance: Callable[[int], None]) -> None:
        self.timer.join()
        self.store.upsert([replace(p, dense=self.unit) for p in self.points])
        advance(len(self.points))


@dataclass
class _Actors:
    """`PointWriter`: W actors at `rate` chunks/s each; `pipelined=False` holds the driver in
    `submit` until they are done, which is how the driver waited before."""

    store: Store
    dim: int
    workers: int
    rate: float
    pipelined: bool
    by_workers: bool = True
    free_at: float = 0.0  # when the actors finish what they were given (perf_counter)

    def submit(self, texts: Sequence[str], points: Sequence[StoredPoint]) -> PendingWrite:
        # An actor runs its calls in order: a batch starts when the one before it is done.
        now = time.perf_counter()
        self.free_at = max(now, self.free_at) + len(points) / (self.rate * self.workers)
        timer = threading.Thread(target=time.sleep, args=(self.free_at - now,))
        timer.start()
        if not self.pipelined:
            timer.join()
        unit = [1.0] + [0.0] * (self.dim - 1)
        return _Batch(self.store, list(points), unit, timer)


class _Executor(LocalExecutor):
    name = "simulated actors"

    def __init__(self, workers: int, rate: float, pipelined: bool) -> None:
        self.workers, self.rate, self.pipelined = workers, rate, pipelined

    def embedder(self, settings: Settings) -> Embedder:
        local = components.make_embedder(settings)  # its tokenizer counts; its model never runs
        return _Pool(local, self.workers, settings.embed.embed_batch_size)

    def point_writer(self, settings: Settings, store: Store, embedder: Embedder) -> _Actors:
        return _Actors(store, DIM, self.workers, self.rate, self.pipelined)


def _run(corpus: Path, root: Path, name: str, executor: _Executor) -> tuple[float, int]:
    """Seconds of the write phase (the stages the driver spends in `write`) and chunks."""
    settings = load_settings(index_dir=root / f"idx-{name}", cache_dir=root / f"cache-{name}",
                             context="outline")  # fmt: skip
    made = build.make_executor
    build.make_executor = lambda run: executor  # type: ignore[assignment]
    try:
        report = build_index([corpus], settings)
    finally:
        build.make_executor = made
    stages = report.stages()
    return stages.get("embed", 0.0) + stages.get("write", 0.0), report.chunks_written


def main(argv: Sequence[str] | None = None) -> None:
    cli = parser(__doc__)
    cli.add_argument("--copies", type=int, default=4)
    cli.add_argument("--workers", default="16,48,128", help="simulated actor counts")
    cli.add_argument("--rate", type=float, default=12.8, help="chunks/s of one actor")
    add_data_option(cli)
    args = cli.parse_args(argv)
    say(load_line("at start"))
    counts = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        write_copies(args.data, corpus, args.copies)
        say("| actors | actors' bound (chunks/s) | mode | write phase (s) | chunks/s | / bound |")
        say("|---:|---:|---|---:|---:|---:|")
        for number, workers in enumerate(counts):
            bound = args.rate * workers
            for pipelined, mode in zip((False, True), MODES, strict=True):
                executor = _Executor(workers, args.rate, pipelined)
                seconds, chunks = _run(corpus, root, f"{number}-{pipelined}", executor)
                speed = chunks / seconds
                say(f"| {workers} | {bound:.0f} | {mode} | {seconds:.2f} | {speed:.0f} | "
                    f"{speed / bound:.2f} |")  # fmt: skip
        # The driver's own bound: actors that take no time, batches sized for the most actors.
        executor = _Executor(max(counts), math.inf, pipelined=True)
        seconds, chunks = _run(corpus, root, "driver-alone", executor)
        say(f"| {max(counts)}, taking no time | - | the driver alone | {seconds:.2f} | "
            f"{chunks / seconds:.0f} | - |")  # fmt: skip
    say(load_line("at end"))


if __name__ == "__main__":
    main()
