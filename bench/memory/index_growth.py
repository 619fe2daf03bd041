"""`ctxr index`'s peak memory and time per chunk as the corpus grows: 1x against 10x.

A run reads, splits, situates and writes its corpus a window at a time (`ctxr.pipeline.windows`),
so its memory should not grow with the corpus; this measures whether it does. The corpus is
`bench.common.markdown_corpus`'s synthetic Markdown (about 10 chunks a file), at ``--chunks N``
and at ``--factor`` times that. Each build runs `build_index` in its own process
(`bench.common.measure.run_child`), as ``ctxr index`` runs it: outline contexts, the default
settings, a fresh index and embedding cache. Embedding is `bench.common.pool_embedder`'s (real
MiniLM vectors plus noise, chosen by a hash of the text) so that what grows or not is ctxr's own
memory, not the model's work; the real model is loaded too, for its tokenizer, as a real run
loads it. Printed: chunks, seconds, chunks/s, peak RSS (``VmHWM``) of each build, and the peaks
of its anonymous and file-backed parts apart (sampled every 0.2 s: the shard's vectors are
memory-mapped files, pages the kernel can take back; anonymous memory it cannot), those peaks
again before and in the run's last part, the HNSW build and the read-back check (the last
``optimize`` + ``check`` seconds of the build, by the report's stage times), the ratios, and
the load average.

Usage::

    python -m bench.memory.index_growth [--chunks 20000] [--factor 10] [--window N]
        [--segment-points N]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import markdown_corpus
from bench.common.measure import load_line, run_child, say, status_mib
from bench.common.measure import parser as cli
from bench.common.pool_embedder import PoolEmbedder, embed_pool

POOL = 256  # real vectors in the pool (`pool_embedder`)
SEED = 7
_BUILD = "import sys; from bench.memory.index_growth import build_child; build_child(*sys.argv[1:])"


def build_child(corpus: str, work: str, pool: str, window: str, segment_points: str) -> None:
    """In a child: index `corpus` into `work`/index with the pool embedder; print the report."""
    from ctxr.config import load_settings
    from ctxr.index import components
    from ctxr.pipeline.build import build_index

    settings = load_settings(
        index_dir=Path(work) / "index",
        cache_dir=Path(work) / "cache",
        window_documents=int(window) or None,  # None: the default
        **({"segment_points": int(segment_points)} if int(segment_points) else {}),
    )
    model = components.make_embedder(settings)  # its tokenizer sizes the chunks
    embedder = PoolEmbedder(np.load(pool), model, SEED)
    samples: list[tuple[float, float, float]] = []  # (seconds, anonymous MiB, file MiB)
    done = threading.Event()

    def sample() -> None:  # VmHWM is both kinds together; the kernel reclaims only file pages
        while not done.wait(0.2):
            samples.append((time.perf_counter(), status_mib("RssAnon:"), status_mib("RssFile:")))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        report = build_index([corpus], settings, embedder=components.with_cache(embedder, settings))
    finally:
        done.set()
        sampler.join()
        embedder.close()
    # The HNSW build and the read-back check are the run's last stages, after every window.
    stages = report.stages()
    last = time.perf_counter() - stages.get("optimize", 0.0) - stages.get("check", 0.0)
    tail = [s for s in samples if s[0] >= last] or samples[-1:]
    head = [s for s in samples if s[0] < last]

    def peak(part: list[tuple[float, float, float]], kind: int) -> float:
        return max((s[kind] for s in part), default=0.0)

    print(json.dumps({**report.to_json(), "peak_anon_mib": peak(samples, 1),
                      "peak_file_mib": peak(samples, 2), "last_anon_mib": peak(tail, 1),
                      "last_file_mib": peak(tail, 2), "before_anon_mib": peak(head, 1),
                      "before_file_mib": peak(head, 2)}))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--chunks", type=int, default=20_000, help="the 1x corpus' chunks")
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--window", type=int, default=0, help="CTXR_WINDOW_DOCUMENTS (0: default)")
    parser.add_argument(
        "--segment-points", type=int, default=0, help="CTXR_SEGMENT_POINTS (0: the default)"
    )
    args = parser.parse_args(argv)
    say(load_line("at start"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        from ctxr.config import load_settings
        from ctxr.index import components

        model = components.make_embedder(load_settings(cache_dir=root / "pool-cache"))
        embed_pool(model, POOL, root / "pool.npy")
        for size in (args.chunks, args.chunks * args.factor):
            corpus = markdown_corpus.corpus(root / f"corpus-{size}", size, SEED)
            markdown_corpus.write(corpus)
            work = root / f"run-{size}"
            work.mkdir()
            env = {k: v for k, v in os.environ.items() if not k.startswith("CTXR_")}
            run = run_child(_BUILD, str(corpus.root), str(work), str(root / "pool.npy"),
                            str(args.window), str(args.segment_points), env=env)  # fmt: skip
            report = json.loads(run.stdout.strip().splitlines()[-1])
            chunks = report["chunks_written"]
            anon, file = report["peak_anon_mib"], report["peak_file_mib"]
            rows.append((size, chunks, run.seconds, run.peak_mib, anon, file))
            say(f"{chunks:,} chunks: {run.seconds:.1f} s, {chunks / run.seconds:.0f} chunks/s, "
                f"peak RSS {run.peak_mib:,.0f} MiB (anonymous {anon:,.0f}, file-backed "
                f"{file:,.0f}, each at its own peak; before the HNSW build and check "
                f"{report['before_anon_mib']:,.0f} and {report['before_file_mib']:,.0f}, in "
                f"them {report['last_anon_mib']:,.0f} and {report['last_file_mib']:,.0f}); "
                "stages "
                + ", ".join(
                    f"{k} {v:.1f}" for k, v in report["stage_seconds"].items()))  # fmt: skip
    (_, small, small_s, small_mib, small_anon, small_file) = rows[0]
    (_, large, large_s, large_mib, large_anon, large_file) = rows[1]
    say()
    say("| corpus | chunks | seconds | chunks/s | peak RSS MiB | peak anonymous | peak file |")
    say("|---|---|---|---|---|---|---|")
    for label, row in zip(("1x", f"{args.factor}x"), rows, strict=True):
        _, chunks, seconds, mib, anon, file = row
        say(f"| {label} | {chunks:,} | {seconds:.1f} | {chunks / seconds:.0f} | {mib:,.0f} | "
            f"{anon:,.0f} | {file:,.0f} |")  # fmt: skip
    per_small, per_large = small_s / small, large_s / large
    say(f"| ratio {args.factor}x / 1x | {large / small:.2f} | {large_s / small_s:.2f} | "
        f"time a chunk {per_large / per_small:.2f} | {large_mib / small_mib:.2f} | "
        f"{large_anon / small_anon:.2f} | {large_file / small_file:.2f} |")  # fmt: skip
    say(load_line("at end"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
