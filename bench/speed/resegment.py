"""A kept scale index copied into a shard of K segments, as ctxr's writer closes them.

``ctxr index`` closes the segment it writes to every ``CTXR_SEGMENT_POINTS`` points
(`ctxr.pipeline.write`), so the engine searches a large index's segments in parallel. This
copies the points of an index kept by ``python -m bench.speed.scale --keep SRC`` (vectors,
BM25 vectors and payloads, read from its shard) into a new shard under DST made with ctxr's
segment settings (`EdgeStore.create`), optimising after each K-th of
the points, so SRC (one segment, as a build before segments made it) and DST hold the same
points and differ only in their segments. DST shares SRC's corpus and embedding cache (links)
and copies the rest (manifest, state), so ``bench.speed.search_stages --keep DST`` and
``bench.speed.scale --keep DST --no-update`` search it as they search SRC.

Usage::

    python -m bench.speed.resegment SRC DST [--segments 2]
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe

from bench.common.measure import load_line, parser, say
from ctxr.index.store.base import DENSE_VECTOR
from ctxr.index.store.edge import EdgeStore

PAGE = 2_000


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser(__doc__)
    cli.add_argument("src", type=Path, help="a kept scale run (its index is read only)")
    cli.add_argument("dst", type=Path, help="a new directory for the copy")
    cli.add_argument("--segments", type=int, default=2)
    args = cli.parse_args(argv)
    src, dst = args.src.resolve(), args.dst.resolve()
    if dst.exists():
        raise SystemExit(f"{dst} exists: name a new directory")
    say(load_line("at start"))
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("qdrant", "corpus", "cache"))
    (dst / "corpus").symlink_to(src / "corpus")
    (dst / "index" / "cache").symlink_to(src / "index" / "cache")
    config = json.loads((src / "index" / "qdrant" / "edge_config.json").read_text())
    dim = int(config["vectors"][DENSE_VECTOR]["size"])
    quantization = "int8" if config["vectors"][DENSE_VECTOR].get("quantization_config") else "none"

    old = qe.EdgeShard.load(str(src / "index" / "qdrant"))
    total = int(old.info().points_count)
    per_segment = -(-total // args.segments)
    # The shard ctxr creates (vectors, BM25 vectors, payload indexes, segment settings); the
    # copied points go in through the engine as read, payloads and sparse vectors unchanged.
    store = EdgeStore.create(dst / "index" / "qdrant", dim, quantization=quantization,
                             segment_points=per_segment)  # fmt: skip
    new = store._shard
    started, copied, closed, offset = time.perf_counter(), 0, 0, None
    while True:
        request = qe.ScrollRequest(offset=offset, limit=PAGE, with_payload=True, with_vector=True)
        records, offset = old.scroll(request)
        if records:
            points = [qe.Point(r.id, r.vector, r.payload) for r in records]
            new.update(qe.UpdateOperation.upsert_points(points))
            copied += len(points)
        if copied >= (closed + 1) * per_segment and closed < args.segments - 1:
            new.optimize()  # what the writer does when a segment is full
            closed += 1
        if offset is None:
            break
    new.optimize()
    info = new.info()
    old.close()
    store.close()  # flushed and sealed, as a run leaves it
    say(
        f"{copied:,} of {total:,} points ({quantization}) copied into {info.segments_count} "
        f"segments (the last may be empty) in {time.perf_counter() - started:.0f} s"
    )
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
