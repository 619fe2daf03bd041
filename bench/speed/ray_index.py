"""`ctxr index` in this process against `ctxr index --ray` with 1 and 2 workers, on one machine.

What Ray costs per chunk where there is nothing to gain from it (one machine, its cores already
used by the local embedder's threads), which is the price of every run on a cluster too: actor
start-up, moving texts and vectors through Ray's object store, per-call scheduling.

The corpus: the 90 anthropic-codebase files (`bench.common.codebase.write_corpus`), ``--copies``
times under different paths. Each run is the CLI in a subprocess, cold (a fresh index and
embedding cache), outline contexts, a local Ray started for the run with ``--cpus`` CPUs
(`CTXR_RAY_LOCAL_CPUS`; its start is part of the run's time, as it is for a user). The runs are
timed in turns (local, ray-1, ray-2, local, ...). Printed: seconds per turn, each run's median
against the local median, chunks per second and per worker, the driver's peak RSS (the actors
are processes of their own), and the load average.

Usage::

    python -m bench.speed.ray_index [--turns 2] [--copies 1] [--cpus 2]
        [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import CTXR_CODE
from bench.common.codebase import add_data_option, write_copies
from bench.common.measure import load_line, ratio_table, run_child, say, turns
from bench.common.measure import parser as cli

LOCAL = "local"
RAY_RUNS = {"ray, 1 worker": 1, "ray, 2 workers": 2}


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray")
    add_data_option(parser)
    args = parser.parse_args(argv)
    say(load_line(f"at start; {args.copies} copies of the corpus, a local Ray of {args.cpus}"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        write_copies(args.data, corpus, args.copies)
        names = [LOCAL, *RAY_RUNS]
        seconds: dict[str, list[float]] = {name: [] for name in names}
        peaks = dict.fromkeys(names, 0.0)
        chunks = 0
        for run_number, (turn, name) in enumerate(turns(names, args.turns)):
            index, cache = root / f"idx-{run_number}", root / f"cache-{run_number}"
            extra = ["--ray", "--ray-workers", str(RAY_RUNS[name])] if name in RAY_RUNS else []
            run = run_child(
                CTXR_CODE, "index", str(corpus), "--index", str(index), "--json",
                "--context", "outline", *extra,
                env={"CTXR_CACHE_DIR": str(cache), "CTXR_RAY_LOCAL_CPUS": str(args.cpus)},
            )  # fmt: skip
            report = json.loads(run.stdout)
            assert report["executor"] == ("ray" if extra else "local"), report["executor"]
            chunks = int(report["chunks_written"])
            seconds[name].append(run.seconds)
            peaks[name] = max(peaks[name], run.peak_mib)
            say(f"turn {turn}: {name} {run.seconds:.1f} s, {chunks:,} chunks, "
                f"driver peak RSS {run.peak_mib:.0f} MiB")  # fmt: skip
        for line in ratio_table(seconds, LOCAL, digits=1):
            say(line)
        for name in names:
            median = statistics.median(seconds[name])
            workers = RAY_RUNS.get(name, 1)
            say(f"{name}: {chunks / median:.1f} chunks/s, {chunks / median / workers:.1f} per "
                f"worker; driver peak RSS {peaks[name]:.0f} MiB")  # fmt: skip
    say(load_line("at end"))


if __name__ == "__main__":
    main()
