"""How the dense vectors of a new index are held: as int8 (`int8`, the default of
`CTXR_QUANTIZATION`) or as float32 (`none`).

With `int8`, Qdrant keeps a byte per dimension in memory (scalar quantization, the 0.99
quantile of the values mapped onto the byte's range) and the float32 originals on disk. The
HNSW graph is built and walked on the bytes; the `OVERSAMPLING` x `limit` best candidates are
then rescored with their originals, so the ranking a search returns is by the true cosine.
Measured on SciFact's real MiniLM vectors (12,795 chunks, and padded to 100k with noisy
copies), recall@10 against exact search is float32 HNSW's within 0.0003 when twice the
candidates are rescored (0.9993 / 0.9990 against 0.9990 / 0.9993); the HNSW build takes
half the time, a dense query about the same, and the vectors held in memory are a quarter of
the bytes (`bench.quality.quantization`;
docs/explanation/benchmarks.md, "Dense vectors as int8").

`CTXR_RESCORE=false` skips the rescoring: the candidates keep the bytes' scores (off the
cosine by up to 0.01) and order, and the originals are never read. A dense query then takes
half the time, recall@10 against exact search is 0.982, dense nDCG@10 on the judged sets
0.0002-0.0013 lower, hybrid level; a million-chunk server needs about 300 MiB less and searched
within a 2 GB memory limit where a rescoring one slowed down (docs/explanation/benchmarks.md,
"What a million-chunk server needs"). So rescoring is the default.

The bytes exist only in the segments Qdrant's optimiser writes: an embedded index below
`CTXR_OPTIMIZE_MIN_POINTS` is searched exactly on float32, int8 or not.

Both backends read these constants: the embedded shard (`ctxr.index.store.edge`) and a Qdrant
server (`ctxr.index.store.server`). The choice is made when the collection is created
(`CTXR_QUANTIZATION`); the search parameters are the same for either, since Qdrant ignores
them for vectors that are not quantized.
"""

from __future__ import annotations

from typing import Final

QUANTILE: Final = 0.99  # values beyond it are clipped to the byte's ends
OVERSAMPLING: Final = 2.0  # candidates rescored with float32, per result asked for
