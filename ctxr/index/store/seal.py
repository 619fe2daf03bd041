"""The shard's seal: sizes and checksums of its segment files, recorded when ctxr closes it.

Some damage to a qdrant-edge shard cannot be answered in-process: random bytes over the id
tracker (`mutable_id_tracker.mappings`) make the engine allocate without bound and abort the
process (SIGABRT); bytes over a payload index's tracker make it panic. Other damage goes
unnoticed (bytes over a payload index's pages). So the damage is looked for before the engine
reads anything: when ctxr closes a shard after a clean session it records every segment file's
size and a CRC-32 of its contents in `ctxr-seal.json` inside the shard directory; the next open
compares before `EdgeShard.load`.

Each file's stamp (`ctxr.file_stamp`: size, times, inode) is recorded beside its checksum, and a
file whose stamp is unchanged is not read again: at open, against the seal; at close, against
what the open found. So opening and closing read only the files that changed, not the whole
shard: reading every byte took 8 s of a no-change run at a million points (4 GiB, the page
cache partly cold), a cost that grew with the index, not with the change. A write of any kind,
a copy or a restore moves a file's change time, which no program can set back, so such a file
is read and compared; what a stamp cannot see is a disk that changes bytes by itself, which
`ctxr doctor` looks for (it reads every file, `every_byte`).

Between a close and the next open nothing legitimately changes a segment file: only a process
that has the shard loaded writes to it, and qdrant-edge's write-ahead-log lock admits one. A
loaded shard does change its files (the load replays the log and folds each gridstore journal,
`tracker_journal.dat`, into its tracker, and the close rewrites `segment.json` with its maps in
another order), so an opener removes the seal before it loads, and the seal is written again at
the next clean close, after a flush. A process killed while it holds the shard therefore
leaves no seal, never a stale one: a shard without a seal is probed in a child process instead
(`ctxr.index.store.probe`).

Files compare by content, not layout: blocks that are all zero (holes of a sparse file, or
zeros a copy wrote out) are skipped, so `cp`, `rsync` or `shutil.copytree` keep a seal valid.
JSON files compare by their parsed value (`segment.json`'s maps come in any order). A journal
that was sealed and is now gone was folded by a load: not a change.

What a difference means (`Difference.fragile`): a change of size, a file added or gone, or any
change to the engine's structures (id trackers, gridstore trackers, payload indexes, configs,
flags) makes the shard unsafe to load at all. Changed bytes inside the bulk data (dense vector
chunks, payload and sparse-vector pages) at the same size are damage the engine reports or
reads back as absurd values, never an abort, so such a shard is loaded and its points read:
`ctxr doctor --repair` then drops only the documents whose points are damaged.

The seal guards against a disk, a crash or a stray write; it is no defence against someone who
can write to the index directory (they can rewrite the seal too).
"""

from __future__ import annotations

import errno
import json
import os
import re
import zlib
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ctxr.atomic_write import write_atomically
from ctxr.file_stamp import Stamp, stamp_file

SEAL_NAME = "ctxr-seal.json"
SEAL_FORMAT = 2  # 2: each file's stamp beside its checksum; 1 (checksums only) is still read
SEGMENTS = "segments"
BLOCK = 1 << 16  # bytes checksummed at a time; all-zero blocks are skipped
EXAMPLES = 3  # changed files named in a message; the rest are counted
SUM_THREADS = 4  # files summed at once, at most one a core

# Same-size changes here are bulk data the engine reads without trusting (see module doc).
_BULK = re.compile(
    r"(^|/)(vector_storage-[^/]+/vectors/chunk_\d+\.mmap"
    r"|payload_storage/page_\d+\.dat"
    r"|vector_storage-[^/]+/store/page_\d+\.dat)$"
)
_JOURNAL = "tracker_journal.dat"
_ZERO = bytes(BLOCK)

FileSum = tuple[int, int]  # (size in bytes, CRC-32 of its non-zero blocks and their offsets)
Summed = tuple[FileSum, Stamp | None]  # a file's checksum, and its stamp when it was read


@dataclass(frozen=True, slots=True)
class Difference:
    """What changed since the seal was written: the files, and whether it is unsafe to load."""

    changed: list[str]
    fragile: bool

    def describe(self) -> str:
        shown = ", ".join(self.changed[:EXAMPLES])
        more = f" and {len(self.changed) - EXAMPLES} more" if len(self.changed) > EXAMPLES else ""
        return f"{len(self.changed)} of its files changed since ctxr last closed it ({shown}{more})"


def seal_path(shard: Path) -> Path:
    return shard / SEAL_NAME


def survey(shard: Path, known: Mapping[str, Summed] | None = None) -> dict[str, Summed]:
    """Every segment file's checksum and stamp, by path under the shard. A file whose stamp is
    the one `known` holds for it keeps the known checksum, unread.

    Left out: the write-ahead log (its entries carry their own checksums, and after a clean
    close it holds nothing to replay) and `edge_config.json` (each load writes it again, with
    defaults added: a sealed shard loaded for `ctxr doctor` would then read as changed)."""
    root = shard / SEGMENTS
    paths = [Path(dirpath, name) for dirpath, _dirs, files in os.walk(root) for name in files]
    names = [path.relative_to(shard).as_posix() for path in paths]
    prior = known or {}

    def summed(path: Path, name: str) -> Summed:
        stamp = stamp_file(path)  # before the read: a change during it leaves newer times
        was = prior.get(name)
        if stamp is not None and was is not None and was[1] == stamp:
            return was
        return file_sum(path), stamp

    # Reading and CRC-32 both let go of the GIL, so the files are summed on every core.
    with ThreadPoolExecutor(max_workers=min(SUM_THREADS, os.cpu_count() or 1)) as pool:
        return dict(zip(names, pool.map(summed, paths, names), strict=True))


def file_sum(path: Path) -> FileSum:
    if path.suffix == ".json":
        return _json_sum(path)
    size = path.stat().st_size
    crc = 0
    buffer = bytearray(BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        fd = handle.fileno()
        offset = 0
        while offset < size:
            offset = _next_data(fd, offset, size)
            if offset >= size:
                break
            offset -= offset % BLOCK  # blocks on a fixed grid, whatever the file's layout
            handle.seek(offset)
            read = handle.readinto(buffer) or 0
            if read == 0:
                break
            block = view[:read]
            if not _is_zero(buffer, read):
                crc = zlib.crc32(offset.to_bytes(8, "little"), crc)
                crc = zlib.crc32(block, crc)
            offset += read
    return size, crc


def _is_zero(buffer: bytearray, length: int) -> bool:
    """Whether the first `length` bytes of `buffer` are all zero.

    A bytearray compared with bytes is one `memcmp`; a memoryview compared with bytes goes
    byte by byte (0.57 GB/s against 52 GB/s on an all-zero block), which made the seal's pass
    over a shard's preallocated zeros slower than its checksum."""
    if length == BLOCK:
        return buffer == _ZERO
    return buffer[:length] == _ZERO[:length]  # a file's last block: a copy, once a file


def _next_data(fd: int, offset: int, size: int) -> int:
    """The first offset at or after `offset` that is not in a hole (holes read as zeros)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:  # no hole-skipping here: read every block (zeros are still skipped)
        return offset
    try:
        return os.lseek(fd, offset, seek_data)
    except OSError as exc:
        # ENXIO: only a hole is left. Anything else (a filesystem without SEEK_DATA): read on.
        return size if exc.errno == errno.ENXIO else offset


def _json_sum(path: Path) -> FileSum:
    raw = path.read_bytes()
    try:
        canonical = json.dumps(json.loads(raw), sort_keys=True).encode("utf-8")
    except ValueError:
        canonical = raw  # not JSON (damaged): its bytes are what it is
    return len(canonical), zlib.crc32(canonical)


def write_seal(shard: Path, known: Mapping[str, Summed] | None = None) -> None:
    """Record the shard as it is now. Call with the shard flushed and still held (loaded);
    `known` is what the open found (`survey`), whose unchanged files are not read again."""
    files = {
        name: [*checksum, *(stamp or ())]
        for name, (checksum, stamp) in sorted(survey(shard, known).items())
    }
    body = {
        "format": SEAL_FORMAT,
        "sealed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": files,
    }
    write_atomically(seal_path(shard), json.dumps(body, separators=(",", ":")))


def remove_seal(shard: Path) -> None:
    path = seal_path(shard)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        if path.is_file():
            raise
        # Not a file ctxr wrote (a directory of that name): never read as a seal, left alone.


def read_seal(shard: Path) -> dict[str, Summed] | None:
    """The recorded checksums and stamps, or None when there is no seal ctxr can read."""
    try:
        body = json.loads(seal_path(shard).read_text(encoding="utf-8"))
        if not isinstance(body, dict) or body.get("format") not in (1, SEAL_FORMAT):
            return None
        return {str(k): _recorded(v) for k, v in body["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None  # none, or unreadable: the shard is probed instead, never called damaged


def _recorded(value: list[int]) -> Summed:
    """One file's record: [size, crc] (format 1, or a stamp not trusted), or with its stamp."""
    numbers = [int(n) for n in value]
    stamp = (numbers[2], numbers[3], numbers[4], numbers[5]) if len(numbers) == 6 else None
    return (numbers[0], numbers[1]), stamp


def difference(recorded: Mapping[str, Summed], current: Mapping[str, Summed]) -> Difference | None:
    """How `current` (a `survey`) differs from the seal's record, or None when it does not."""
    changed: list[str] = []
    fragile = False
    for name in sorted(set(recorded) | set(current)):
        was = recorded[name][0] if name in recorded else None
        now = current[name][0] if name in current else None
        if was == now:
            continue
        if now is None and name.endswith(_JOURNAL):
            continue  # folded into its tracker by a load: the tracker holds what it said
        changed.append(name)
        same_size_bulk = was is not None and now is not None and was[0] == now[0]
        if not (same_size_bulk and _BULK.search(name)):
            fragile = True
    return Difference(changed, fragile) if changed else None
