"""The largest segment Qdrant may still merge, set from the index's size before each write.

Every update writes its new points into a small segment of their own. Qdrant's merge optimizer
(once a shard holds more segments than its default number, two on two cores) merges the
smallest segments whose sizes sum below `max_segment_size` into one new segment, with its
vectors, postings and indexes written again. A shard is created with that limit at a quarter
of `CTXR_SEGMENT_POINTS` (`edge.segment_optimizers`), which keeps the closed segments of a
large index out of it. An index smaller than that quarter is one segment under the limit, so
an update's small segment was merged into the whole index: at 100,000 points, every seventh
1% update (when the small segment grew past the engine's indexing threshold) spent 37-41 s
merging, the whole update 44-48 s against 5-8 s (docs/explanation/benchmarks.md, "Updates to
an index of 100,000 chunks").

So a writer lowers the limit for an index smaller than a segment to a quarter of the index,
never under `FLOOR_KB`, so that small segments still merge with each other into segments
worth indexing; from a segment up it stays what the shard was created with. The limit lives
in the shard's `edge_config.json`, which the engine reads at load and the seal leaves out
(`ctxr.index.store.seal.survey`), so it is written just before the load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxr.atomic_write import write_atomically
from ctxr.index.store.base import DENSE_VECTOR

CONFIG_NAME = "edge_config.json"

# Small segments merge with each other up to this many KB of float32 vectors (about 27,000
# points of 384 dimensions): four times the engine's indexing threshold (10,000 KB), so what
# they merge into is a segment the optimizer indexes, and rebuilding it takes seconds.
FLOOR_KB = 40_000


def merge_cap_kb(points: int, segment_points: int, dim: int) -> int:
    """`max_segment_size` (KB of float32 vectors) for an index of `points` points in segments
    of `segment_points`: a quarter of the index, never under `FLOOR_KB`, and never above the
    quarter of a segment the shard was created with (`edge.segment_optimizers`), which keeps
    the segments a run closes apart."""
    return min(_quarter_kb(segment_points, dim), max(FLOOR_KB, _quarter_kb(points, dim)))


def _quarter_kb(points: int, dim: int) -> int:
    return max(1, points * dim * 4 // 1024 // 4)


def set_merge_cap(shard: Path, points: int, segment_points: int) -> int | None:
    """Write the merge limit for `points` into the shard's config before it is loaded; the
    limit written, or None where there is none to set (a shard made without one: a single
    segment, `CTXR_SEGMENT_POINTS=0`), it is already that, or the file could not be written."""
    if segment_points <= 0:
        return None  # runs close no segments: there is no segment size to keep apart
    path = shard / CONFIG_NAME
    try:
        config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        optimizers = config["optimizers"]
        dim = int(config["vectors"][DENSE_VECTOR]["size"])
    except (OSError, ValueError, LookupError, TypeError):
        return None  # unreadable: the engine's load says what is wrong with it
    if not isinstance(optimizers, dict) or optimizers.get("max_segment_size") is None:
        return None
    cap = merge_cap_kb(points, segment_points, dim)
    if optimizers["max_segment_size"] == cap:
        return None
    optimizers["max_segment_size"] = cap
    try:  # whole or not at all: the engine reads it at every load
        write_atomically(path, json.dumps(config, separators=(",", ":")))
    except OSError:
        # A full or read-only disk: the limit only saves time, and the run's own writes will
        # say what the disk refused, by name (`ctxr.disk`).
        return None
    return cap
