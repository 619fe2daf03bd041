"""Loading a shard that has no seal in a child process first, where an abort costs only the child.

A shard without a seal (`ctxr.index.store.seal`) was built by an older ctxr, or its last owner
was killed while it held it. Its files cannot be compared with anything, and some damage makes
qdrant-edge abort the whole process when it loads them (SIGABRT on a garbled id tracker). So a
child process loads it and counts its points first: if the child dies of a signal, the shard is
damaged and is never loaded here. Measured: 0.07 s for the examples index, 0.75 s at 100k
points (the child's load); the next clean close writes a seal, so a shard is probed once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from ctxr.disk import free_bytes, storage_error

TIMEOUT_SECONDS = 300.0  # a sound shard loads in about 0.25 s per 100k points
# Below this much free space a SIGBUS in the child is taken for the disk, not for damage.
LOW_DISK_BYTES = 256 * 2**20

# Only qdrant_edge is imported: the child starts in tens of milliseconds.
_CHILD = (
    "import sys, qdrant_edge as qe\n"
    "shard = qe.EdgeShard.load(sys.argv[1])\n"
    "shard.count(qe.CountRequest(exact=True))\n"
    "shard.close()\n"
)


def probe_load(shard: Path) -> str | None:
    """Why loading `shard` is unsafe (the child died of a signal, or never finished), or None.
    A SIGBUS on a nearly full disk raises `StorageError`: it is the disk, not the shard.

    A child that raises (a lock held elsewhere, an error the binding reports) is not this
    function's business: the load in this process raises the same and is answered as usual."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(shard)],
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"loading its Qdrant shard did not finish in {TIMEOUT_SECONDS:.0f} s"
    except OSError:
        return None  # no child can be started here: load in-process, as without a probe
    if done.returncode < 0:
        name = _signal_name(-done.returncode)
        if -done.returncode == signal.SIGBUS and disk_low(shard):
            # A write into a mapped page the filesystem cannot back (the load replays the log):
            # a full disk, not a damaged shard.
            raise storage_error(shard.parent, "index", "full", detail=f"loading the shard: {name}")
        return f"loading its Qdrant shard killed the engine ({name})"
    return None


def disk_low(shard: Path) -> bool:
    """Whether the filesystem holding `shard` is nearly full (`LOW_DISK_BYTES`)."""
    free = free_bytes(shard)
    return free is not None and free < LOW_DISK_BYTES


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
