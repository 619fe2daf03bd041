"""Embedding in steps of 64 chunks (so the progress bar moves) against one call per write batch.

`ctxr index` used to embed a write batch of 256 chunks in one `embed` call; it now embeds it 64
at a time and advances the bar after each step. The local embedder sorts each call's texts by
length before batching them by 8, so smaller calls could pad more; `write._embed_in_steps`
therefore hands it the texts longest first. This measures the three: the same real chunk texts
(anthropic-codebase's own chunks, in corpus order) embedded by one `OnnxEmbedder` in calls of
256 ("one call"), in calls of 64 in corpus order ("steps"), and through `_embed_in_steps`
("sorted steps", what `ctxr index` does), in alternating turns, no cache. Printed: seconds
per turn, the ratios of the medians to one call, and the load average.

Usage::

    python -m bench.speed.embed_steps [--texts 256] [--turns 3]
        [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.common.checkout import data_dir
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.pipeline.write import _embed_in_steps
from ctxr.progress import NullProgress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--data", type=Path, help="default: anthropic-codebase of the eval data")
    args = parser.parse_args()
    data = args.data or data_dir("anthropic-codebase")
    documents = json.loads((data / "codebase_chunks.json").read_text())
    texts = [c["content"] for d in documents for c in d["chunks"]][: args.texts]
    embedder = OnnxEmbedder()
    embedder.embed(texts[:8])  # load the model outside the timings
    pieces = [embedder.count_tokens(t) for t in texts]

    def calls(step: int) -> None:
        for i in range(0, len(texts), step):
            embedder.embed(texts[i : i + step])

    def sorted_steps() -> None:
        for i in range(0, len(texts), 256):  # one write batch at a time, as ctxr index
            _embed_in_steps(embedder, texts[i : i + 256], pieces[i : i + 256], NullProgress())

    runs = {"one call": lambda: calls(256), "steps": lambda: calls(64)}
    runs["sorted steps"] = sorted_steps
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    load_before = os.getloadavg()
    for turn in range(args.turns):
        for name in names[turn % 3 :] + names[: turn % 3]:  # each goes first in turn
            started = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - started)
    load_after = os.getloadavg()
    base = statistics.median(times["one call"])
    for name, seconds in times.items():
        ratio = statistics.median(seconds) / base
        print(f"{name:>12}: " + ", ".join(f"{s:.1f} s" for s in seconds) + f"  ({ratio:.3f}x)")
    before, after = load_before[0], load_after[0]
    print(f"{len(texts)} texts; load average before {before:.2f}, after {after:.2f}")

if __name__ == "__main__":
    main()
