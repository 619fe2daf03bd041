"""`kill -9` of `ctxr index` while it writes, then `ctxr doctor` and `ctxr search`.

The corpus is `examples/` plus a 3,000-row table and 150 KB of prose (`bench.common.shapes`).
Each trial adds a new 3,000-row table (new text, so there is new embedding work to kill),
starts `ctxr index`, waits until the manifest records more chunks than before, waits 0-4 s
more, and kills the process with SIGKILL. After each kill: `ctxr doctor --json` (sound? points
against the manifest, leftover points) and a `ctxr search`. After the trials, one `ctxr index`
runs to the end and the doctor looks again. Real MiniLM embedder; about 3 minutes for 5 trials.

Usage:  python -m bench.reliability.kill_trials [--trials 5] [--seed 7]
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import CTXR, EXAMPLES, child_env
from bench.common.measure import Span, load_line, say
from bench.common.measure import parser as cli
from bench.common.shapes import WORDS, make


def ctxr(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CTXR, *map(str, args)], capture_output=True, text=True, env=child_env())


def recorded(index: Path) -> int:
    try:
        documents = json.loads((index / "manifest.json").read_text())["documents"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(int(d["chunks"]) for d in documents.values())


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    say(load_line(f"at start; {args.trials} trials"))
    with tempfile.TemporaryDirectory() as tmp:
        corpus, index = Path(tmp) / "corpus", Path(tmp) / "idx"
        shutil.copytree(EXAMPLES, corpus)
        make("table", 3000, corpus)
        make("prose", 150_000, corpus)
        before = 0
        for trial in range(1, args.trials + 1):
            rows = "".join(f"| {trial}-{i} | {' '.join(rng.choices(WORDS, k=3))} |\n"
                           for i in range(3000))  # fmt: skip
            (corpus / f"extra{trial}.md").write_text(f"# Extra\n\n| id | note |\n|---|---|\n{rows}")
            span = Span()
            command = [*CTXR, "index", str(corpus), "--index", str(index), "--json"]
            quiet = subprocess.DEVNULL
            proc = subprocess.Popen(command, stdout=quiet, stderr=quiet, env=child_env())
            while proc.poll() is None and recorded(index) <= before:
                time.sleep(0.2)
            time.sleep(rng.uniform(0, 4))
            running = proc.poll() is None
            if running:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            doctor = ctxr("doctor", "--index", index, "--json")
            report = json.loads(doctor.stdout) if doctor.stdout else {}
            search = ctxr("search", "backup and restore", "--index", index, "--json")
            before = int(report.get("manifest_chunks") or 0)
            print(f"trial {trial}: {'killed' if running else 'finished'} after "
                  f"{span.seconds:.1f} s; doctor exit {doctor.returncode}, sound "
                  f"{report.get('sound')}, points {report.get('points_stored')}, manifest "
                  f"{report.get('manifest_chunks')}, leftovers {report.get('leftover_points')}; "
                  f"search exit {search.returncode}")  # fmt: skip
        final = ctxr("index", corpus, "--index", index, "--json")
        done = json.loads(final.stdout)
        doctor = json.loads(ctxr("doctor", "--index", index, "--json").stdout)
        print(f"final index exit {final.returncode}: indexed {done['documents_indexed']}, "
              f"unchanged {done['documents_unchanged']}, points {done['points_total']}; doctor "
              f"sound {doctor['sound']}, points {doctor['points_stored']} = manifest "
              f"{doctor['manifest_chunks']}, leftovers {doctor['leftover_points']}")  # fmt: skip
    say(load_line("at end"))


if __name__ == "__main__":
    main()
