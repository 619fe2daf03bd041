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

import json
from collections.abc import Sequence

from bench.common.codebase import add_data_option
from bench.common.measure import load_line, ratio_table, run_child, say, turns
from bench.common.measure import parser as cli

CHILD = """
import json, random, sys
from pathlib import Path
import onnxruntime as ort
from bench.common.codebase import documents
from bench.common.measure import Span, peak_mib
from ctxr.index.embed import onnx
pattern, count = sys.argv[1] == "on", int(sys.argv[2])
data = Path(sys.argv[3]) if sys.argv[3] else None
base = ort.SessionOptions
class Options(base):
    def __init__(self):
        super().__init__()
        self.enable_mem_pattern = pattern
ort.SessionOptions = Options
words = " ".join(d["content"] for d in documents(data)).split()
rng = random.Random(7)
texts = []
for _ in range(count):
    n = rng.randint(10, 200)
    s = rng.randint(0, len(words) - n)
    texts.append(" ".join(words[s:s + n]))
embedder = onnx.OnnxEmbedder()
embedder.embed(texts[:8])  # load the model outside the timed part
peaks = []
with Span() as span:
    for k in range(0, len(texts), 256):
        embedder.embed(texts[k:k + 256])
        peaks.append(round(peak_mib()))
print(json.dumps({"seconds": span.seconds, "peaks_mib": peaks}))
"""


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--texts", type=int, default=1280)
    parser.add_argument("--turns", type=int, default=2)
    add_data_option(parser)
    args = parser.parse_args(argv)
    say(load_line(f"at start; {args.texts} texts"))
    seconds: dict[str, list[float]] = {"on": [], "off": []}
    peaks: dict[str, list[int]] = {"on": [], "off": []}
    for turn, pattern in turns(list(seconds), args.turns):
        run = run_child(CHILD, pattern, str(args.texts), str(args.data or ""))
        result = json.loads(run.stdout.strip().splitlines()[-1])
        trail = list(result["peaks_mib"])
        seconds[pattern].append(float(result["seconds"]))
        peaks[pattern].append(trail[-1])
        say(f"turn {turn + 1} mem_pattern {pattern}: {result['seconds']:.1f} s, "
            f"peak RSS MiB after each 256 texts {trail}")  # fmt: skip
    for line in ratio_table(seconds, "on", digits=1):
        say(line)
    say(f"peak RSS MiB on {max(peaks['on'])}, off {max(peaks['off'])}")
    say(load_line("at end"))


if __name__ == "__main__":
    main()
