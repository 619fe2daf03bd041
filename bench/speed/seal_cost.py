"""What the shard's seal costs an open and a close: stamps trusted, against every byte read.

The seal (`ctxr.index.store.seal`) checks a shard's files before the engine loads them and
records them again at a clean close. Each file's stamp (size, times, inode) is recorded beside
its checksum, and a file whose stamp is unchanged is not read again. This opens and closes a
kept index's shard in turns, with the stamps trusted (as `ctxr index`, `serve` and `search`
open it) and with every byte read (``every_byte``, as `ctxr doctor` opens it), and prints the
seconds of each open (seal check and engine load) and each close (flush and seal), side by side,
and the seconds of one full checksum pass (`seal.survey` with nothing known: what every close
did before stamps). Nothing is written: a close with nothing changed rewrites only the seal.

The first turn runs the every-byte open first, so the engine's load in the trusted turns meets
no colder pages than it would after a checksum pass: the page cache is what it is, and the
load average is printed.

Usage::

    python -m bench.speed.seal_cost INDEX_DIR [--turns 3]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.measure import load_line, machine, ratio_table, say, turns
from bench.common.measure import parser as cli
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.index.store.seal import read_seal, survey

TRUSTED, EVERY_BYTE = "stamps trusted", "every byte read"
FULL = "a full checksum pass"


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli(__doc__)
    parser.add_argument("index", type=Path, help="an index directory (its qdrant/ shard)")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args(argv)
    shard = shard_path(args.index)
    recorded = read_seal(shard)
    if recorded is None:
        raise SystemExit(f"{shard} has no seal: open and close it once with ctxr first")
    say(f"seal cost: {shard}, {len(recorded)} files; {machine()}")
    say(load_line("at start"))
    opens: dict[str, list[float]] = {EVERY_BYTE: [], TRUSTED: []}
    closes: dict[str, list[float]] = {EVERY_BYTE: [], TRUSTED: []}
    full: dict[str, list[float]] = {FULL: []}
    for _turn, name in turns([EVERY_BYTE, TRUSTED], args.turns):
        started = time.perf_counter()
        store = EdgeStore.open(shard, every_byte=name == EVERY_BYTE)
        opened = time.perf_counter()
        store.close()
        closed = time.perf_counter()
        opens[name].append(opened - started)
        closes[name].append(closed - opened)
        say(f"  {name}: open {opened - started:.2f} s, close {closed - opened:.2f} s")
        if name == EVERY_BYTE:
            started = time.perf_counter()
            survey(shard)
            full[FULL].append(time.perf_counter() - started)
    stamped = sum(1 for _sum, stamp in (read_seal(shard) or {}).values() if stamp is not None)
    say(f"files with a trusted stamp after the last close: {stamped} of {len(recorded)}")
    say()
    say("open (the seal's check, then the engine's load):")
    for line in ratio_table(opens, EVERY_BYTE):
        say(line)
    say()
    say("close (flush, then the seal):")
    for line in ratio_table(closes, EVERY_BYTE):
        say(line)
    say()
    for line in ratio_table(full):
        say(line)
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
