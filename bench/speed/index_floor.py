"""`ctxr index` against the embedder's floor: every word piece of the corpus embedded once.

The floor: the 90 anthropic-codebase files (written as code files, as `bench/cost/context_cost.py`
writes them), each tokenized with the embedded model's own tokenizer and cut into windows of
254 word pieces (256 with [CLS] and [SEP]), the windows embedded by onnxruntime directly (the
same int8 MiniLM graph, batches of 8, longest first, threads as ctxr sets them). Nothing a
retrieval index needs beyond that: no chunking, no contexts, no store.

`ctxr index`: the CLI in a subprocess, cold (a fresh index and embedding cache every time),
outline contexts, the defaults. The two are timed in turns (floor, index, floor, index, ...),
each in its own process, and the peak RSS of each is read from `getrusage` of the child. With
``--copies N`` the corpus is the same files N times under different paths (the peak RSS of a
10x corpus against 1x is the issue's bound). Printed: seconds per turn, the ratio of the
medians, chunks/s, embedded word pieces/s, the amplification `ctxr index` reports, peak RSS,
and the load average.

Usage::

    python -m bench.speed.index_floor [--turns 2] [--copies 1]
        [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import child_env, data_dir
from bench.cost.context_cost import write_corpus

WINDOW = 254
FLOOR_SCRIPT = f"""
import sys, time, numpy as np, onnxruntime as ort
from pathlib import Path
from tokenizers import Tokenizer
from ctxr.index.embed.onnx import model_path, tokenizer_path, _default_threads
tok = Tokenizer.from_file(str(tokenizer_path()))
tok.no_truncation()
windows = []
for path in sorted(Path(sys.argv[1]).rglob("*.*")):
    ids = tok.encode(path.read_text(), add_special_tokens=False).ids
    for i in range(0, len(ids), {WINDOW}):
        windows.append([101] + ids[i:i + {WINDOW}] + [102])
opts = ort.SessionOptions(); opts.intra_op_num_threads = _default_threads()
opts.inter_op_num_threads = 1; opts.log_severity_level = 3
session = ort.InferenceSession(str(model_path()), sess_options=opts,
                               providers=["CPUExecutionProvider"])
names = {{i.name for i in session.get_inputs()}}
windows.sort(key=len, reverse=True)
t = time.perf_counter()
for s in range(0, len(windows), 8):
    batch = windows[s:s + 8]; width = len(batch[0])
    ids = np.zeros((len(batch), width), np.int64); mask = np.zeros_like(ids)
    for r, w in enumerate(batch):
        ids[r, :len(w)] = w; mask[r, :len(w)] = 1
    feeds = {{"input_ids": ids, "attention_mask": mask}}
    if "token_type_ids" in names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    session.run(None, feeds)
import resource
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(windows), sum(len(w) for w in windows), peak)
"""
# `ctxr index` in-process in a child that reports its own peak RSS (KiB) on stderr at exit.
INDEX_SCRIPT = """
import atexit, resource, sys
atexit.register(lambda: print("peak-rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              file=sys.stderr))
from ctxr.cli import main
sys.argv = ["ctxr", *sys.argv[1:]]
main()
"""


def floor_turn(corpus: Path) -> tuple[float, int, int, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", FLOOR_SCRIPT, str(corpus)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    windows, pieces, rss = (int(x) for x in done.stdout.split())
    return time.perf_counter() - started, windows, pieces, rss / 1024


def index_turn(corpus: Path, root: Path, turn: int) -> tuple[float, dict[str, object], float]:
    index = root / f"idx-{turn}"
    env = child_env({"CTXR_CACHE_DIR": str(root / f"cache-{turn}")})
    args = ["index", str(corpus), "--index", str(index), "--json", "--context", "outline"]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", INDEX_SCRIPT, *args],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    rss = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("peak-rss")]
    return seconds, json.loads(done.stdout), rss[-1] / 1024


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--data", type=Path, help="default: anthropic-codebase of the eval data")
    args = parser.parse_args(argv)
    print(f"# load average {os.getloadavg()[0]:.2f} at start; {args.copies} copies of the corpus")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        write_corpus(args.data or data_dir("anthropic-codebase"), corpus / "c0", None)
        for copy in range(1, args.copies):
            target = corpus / f"c{copy}"
            target.mkdir()
            for path in (corpus / "c0").iterdir():
                (target / path.name).write_text(path.read_text())
        floors, indexes = [], []
        report: dict[str, object] = {}
        windows = pieces = 0
        floor_rss = index_rss = 0.0
        for turn in range(args.turns):
            seconds, windows, pieces, rss = floor_turn(corpus)
            floor_rss = max(floor_rss, rss)
            floors.append(seconds)
            seconds, report, rss = index_turn(corpus, root, turn)
            index_rss = max(index_rss, rss)
            indexes.append(seconds)
            print(f"turn {turn}: floor {floors[-1]:.1f} s, ctxr index {seconds:.1f} s", flush=True)
        ratio = statistics.median(indexes) / statistics.median(floors)
        chunks = int(report["chunks_written"])  # type: ignore[call-overload]
        embedded = sum(dict(report["embedded_pieces"]).values())  # type: ignore[call-overload]
        median = statistics.median(indexes)
        print(f"floor: {windows:,} windows, {pieces:,} word pieces, median "
              f"{statistics.median(floors):.1f} s")  # fmt: skip
        print(f"ctxr index: {chunks:,} chunks, {embedded:,} word pieces embedded, median "
              f"{median:.1f} s; {chunks / median:.1f} chunks/s, {embedded / median:,.0f} "
              f"pieces/s; amplification {report['amplification']}")  # fmt: skip
        print(f"ratio ctxr index / floor: {ratio:.2f}x; peak RSS: ctxr index {index_rss:.0f} MB "
              f"(floor process {floor_rss:.0f} MB)")  # fmt: skip
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
