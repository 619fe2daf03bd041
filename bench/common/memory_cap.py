"""A memory limit for one child process: a cgroup of its own, as a container runtime sets one.

A process's resident memory (``VmRSS``, ``VmHWM``) counts the clean file pages it has mapped
and touched: for a search server over a large index, much of that is the page cache of the
index's files, which the kernel takes back when memory is short. What a server *needs* is
better measured by giving it less and watching its searches: the kernel then reclaims the
cgroup's clean pages at the limit, and a server that needs more than it has slows down (it
reads the same pages from disk again) or is killed (its anonymous memory does not fit).

`MemoryCap` makes a memory cgroup (v2 ``memory.max``, or v1 ``memory.limit_in_bytes``) with the
limit, and `MemoryCap.enter` is the ``preexec_fn`` that moves a child into it before it runs;
the peak the cgroup was charged (anonymous and page cache) is `MemoryCap.peak_mib`. Page cache
is charged to the cgroup whose process first reads the page, so measure with the index's pages
dropped first (`bench.common.measure.drop_cached_pages`): pages another process left
cached are not charged and not limited. Needs root and a writable cgroup file system (a
container may have neither); `MemoryCap.make` says why it cannot.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryCap:
    group: Path
    v2: bool
    limit_mib: int

    @classmethod
    def make(cls, limit_mib: int, name: str) -> MemoryCap:
        """A new cgroup `name` limited to `limit_mib`; SystemExit naming why when it cannot."""
        v2 = (CGROUP_ROOT / "cgroup.controllers").is_file()
        parent = CGROUP_ROOT if v2 else CGROUP_ROOT / "memory"
        if v2 and "memory" not in (CGROUP_ROOT / "cgroup.controllers").read_text().split():
            raise SystemExit("--serve-memory-cap: this cgroup v2 tree has no memory controller")
        if not v2 and not parent.is_dir():
            raise SystemExit(f"--serve-memory-cap: no memory cgroup at {parent}")
        group = parent / f"{name}-{os.getpid()}"
        try:
            group.mkdir()
            limit = str(limit_mib * 2**20)
            (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(limit)
        except OSError as exc:
            raise SystemExit(
                f"--serve-memory-cap: cannot make the cgroup {group} ({exc.strerror}); it needs "
                "root and a writable cgroup file system"
            ) from exc
        return cls(group, v2, limit_mib)

    def enter(self) -> None:
        """Move the calling process into the group (a child's ``preexec_fn``)."""
        (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def peak_mib(self) -> float:
        """The most the group was charged, page cache included (v2 needs Linux 5.19)."""
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.group / name).read_text()) / 2**20
        except OSError:
            return float("nan")

    def events(self) -> str:
        """How often the limit was hit (v1 ``failcnt``, v2 ``memory.events`` max and oom)."""
        try:
            if not self.v2:
                return f"limit hit {int((self.group / 'memory.failcnt').read_text()):,} times"
            found = dict(
                line.split() for line in (self.group / "memory.events").read_text().splitlines()
            )
            hits, kills = int(found.get("max", 0)), int(found.get("oom_kill", 0))
            return f"limit hit {hits:,} times, OOM kills {kills}"
        except (OSError, ValueError):
            return "limit events unknown"

    def remove(self) -> None:
        """Remove the group once its processes have exited."""
        # A process still in it: the kernel keeps the group until it exits.
        with contextlib.suppress(OSError):
            self.group.rmdir()
