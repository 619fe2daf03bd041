"""Peak RSS and time of the local embedder with onnxruntime's memory patterns on and off.

onnxruntime plans a memory pattern per distinct input shape and keeps it; ctxr pads each batch
only to its longest text, so a run meets hundreds of shapes and the kept plans grow with the
corpus. This bench embeds the same texts (random spans of 10-200 words of the
anthropic-codebase files, fixed seed) with ctxr's `OnnxEmbedder`, its session built with
``enable_mem_pattern`` on or off, in turns (on, off, on, off, ...), each in a fresh process,
and prints per turn: seconds, peak RSS after each 256 texts, and the ratio of the medians.

Usage::

    python -m bench.memory.embed_memory [--texts 1280] [--turns 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence

from bench.common.checkout import data_dir

CHILD = """
import json, random, resource, sys, time
from pathlib import Path
import onnxruntime as ort
from ctxr.index.embed import onnx
pattern, count, data = sys.argv[1] == "on", int(sys.argv[2]), Path(sys.argv[3])
base = ort.SessionOptions
class Options(base):
    def __init__(self):
        super().__init__()
        self.enable_mem_pattern = pattern
ort.SessionOptions = Options
docs = json.loads((data / "codebase_chunks.json").read_text())
words = " ".join(d["content"] for d in docs).split()
rng = random.Random(7)
texts = []
for _ in range(count):
    n = rng.randint(10, 200)
    s = rng.randint(0, len(words) - n)
    texts.append(" ".join(words[s:s + n]))
embedder = onnx.OnnxEmbedder()
embedder.embed(texts[:8])  # load the model outside the timed part
peaks = []
started = time.perf_counter()
for k in range(0, len(texts), 256):
    embedder.embed(texts[k:k + 256])
    peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
print(json.dumps({"seconds": time.perf_counter() - started, "peaks_mb": peaks}))
"""


def turn(pattern: str, texts: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, pattern, str(texts), str(data_dir("anthropic-codebase"))],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1280)
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"# load average {os.getloadavg()[0]:.2f} at start; {args.texts} texts")
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    peaks: dict[str, list[int]] = {"on": [], "off": []}
    for n in range(args.turns):
        for pattern in ("on", "off"):
            result = turn(pattern, args.texts)
            took = float(result["seconds"])  # type: ignore[arg-type]
            trail = list(result["peaks_mb"])  # type: ignore[call-overload]
            seconds[pattern].append(took)
            peaks[pattern].append(trail[-1])
            print(f"turn {n + 1} mem_pattern {pattern}: {took:.1f} s, peak RSS MB {trail}")
    on, off = statistics.median(seconds["on"]), statistics.median(seconds["off"])
    print(f"median seconds on {on:.1f}, off {off:.1f}: off/on {off / on:.3f}")
    print(f"peak RSS MB on {max(peaks['on'])}, off {max(peaks['off'])}")
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
