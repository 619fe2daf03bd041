"""Opening a kept shard with and without reading its int8 bytes ahead of the engine's load.

`ctxr.index.store.read_ahead` reads each segment's `quantized.data` through once before
qdrant-edge loads the shard, whose own populate of those files reads a page at a time. This
opens the shard of a run kept by ``bench.speed.scale --keep`` in fresh processes, in turns:
``EdgeStore.open`` as ctxr runs it, and the same with the read-ahead replaced by nothing (a
bench may look inside). Before every open the index's cached pages are dropped
(`bench.common.measure.drop_cached_pages`), as the engine's own close leaves them.
Printed per open: seconds and the bytes the process read from storage (``/proc/self/io``),
then the medians.

Usage::

    python -m bench.speed.open_cost --keep /tmp/s1m [--turns 3]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.common.measure import drop_cached_pages, load_line, machine, parser, run_child, say

_CHILD = "import sys; from bench.speed.open_cost import child; child(*sys.argv[1:])"
WAYS = ("read ahead", "engine alone")


def _read_mib() -> float:
    with open("/proc/self/io", encoding="ascii") as io:
        fields = dict(line.split(": ") for line in io.read().splitlines())
    return int(fields["read_bytes"]) / 2**20


def child(shard: str, way: str) -> None:
    """In a fresh process: open the shard one way, print seconds and MiB read as JSON."""
    import time

    from ctxr.index.store import edge

    if way == "engine alone":
        edge.read_ahead = lambda path: 0  # type: ignore[assignment]
    started, read = time.perf_counter(), _read_mib()
    store = edge.EdgeStore.open(Path(shard))
    seconds, mib = time.perf_counter() - started, _read_mib() - read
    store.close()
    print(json.dumps({"seconds": seconds, "mib": mib}))


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--keep", type=Path, required=True, help="a directory bench.speed.scale kept")
    p.add_argument("--turns", type=int, default=3)
    args = p.parse_args(argv)
    shard = args.keep / "index" / "qdrant"
    if not shard.is_dir():
        raise SystemExit(f"no shard at {shard}; make one: python -m bench.speed.scale --keep")
    say(f"opening {shard}: {machine()}")
    say(load_line("at start"))
    seconds: dict[str, list[float]] = {way: [] for way in WAYS}
    for turn in range(1, args.turns + 1):
        for way in WAYS:
            drop_cached_pages(args.keep / "index")
            found = json.loads(run_child(_CHILD, str(shard), way).stdout.strip().splitlines()[-1])
            seconds[way].append(found["seconds"])
            say(f"turn {turn}, {way}: {found['seconds']:.2f} s, {found['mib']:,.0f} MiB read")
    say("")
    say("| open | seconds, median | each |")
    say("|---|---:|---|")
    for way in WAYS:
        each = ", ".join(f"{s:.2f}" for s in seconds[way])
        say(f"| {way} | {statistics.median(seconds[way]):.2f} | {each} |")
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
