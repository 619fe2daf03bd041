"""Reading a shard's int8 vectors into the page cache before the engine loads them.

qdrant-edge loads the int8 bytes of each segment (`quantized.data`, held in memory: see
`ctxr.index.store.quantization`) by mapping the file, advising the kernel that it will be read
at random (`MADV_RANDOM`), then asking it to fault every page in (`MADV_POPULATE_READ`). With
read-ahead turned off that is one 4 KiB read at a time: at a million chunks, 398 MiB of bytes
took 5.6 s of a 10-12 s load here (176 MiB/s), where reading the same files from start to end
takes 0.6 s. The engine also drops the page cache of its files when it closes a shard, so every
`ctxr index`, `ctxr search` and `ctxr serve` over a large index paid it again.

Reading the files through once before the load, in order, leaves their pages cached, and the
engine's populate then maps them without reading: a million-chunk shard opened in 6.0 s
against 11.6 s, medians of three turns (`bench.speed.open_cost`; docs/explanation/benchmarks.md,
"An index opened in half the time"). `POSIX_FADV_WILLNEED` alone did not help: the read has to
be done. The other files the engine holds in memory (BM25 postings, HNSW links, payload
indexes) it reads at full speed, and they are left to it.
"""

from __future__ import annotations

from pathlib import Path

READ_BYTES = 4 << 20  # a read's size: large enough to stream, small enough to hold nothing
HELD_BYTES = "quantized.data"  # a segment's int8 vectors, which the engine holds in memory


def read_ahead(shard: Path) -> int:
    """Read each segment's int8 vectors under `shard` once, start to end; the bytes read.

    A file that cannot be read is passed over: the engine's load that follows names it."""
    total = 0
    buffer = bytearray(READ_BYTES)
    for path in sorted(shard.glob(f"segments/*/vector_storage-*/{HELD_BYTES}")):
        try:
            with path.open("rb", buffering=0) as file:
                while count := file.readinto(buffer):
                    total += count
        except OSError:
            continue
    return total
