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

from collections.abc import Callable, Sequence

from bench.common.codebase import add_data_option, documents
from bench.common.measure import Span, load_line, ratio_table, say, turns
from bench.common.measure import parser as cli
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.pipeline.write import _embed_in_steps
from ctxr.progress import NullProgress


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--texts", type=int, default=256)
    parser.add_argument("--turns", type=int, default=3)
    add_data_option(parser)
    args = parser.parse_args(argv)
    texts = [c["content"] for d in documents(args.data) for c in d["chunks"]][: args.texts]
    embedder = OnnxEmbedder()
    embedder.embed(texts[:8])  # load the model outside the timings
    pieces = [embedder.count_tokens(t) for t in texts]

    def calls(step: int) -> None:
        for i in range(0, len(texts), step):
            embedder.embed(texts[i : i + step])

    def sorted_steps() -> None:
        for i in range(0, len(texts), 256):  # one write batch at a time, as ctxr index
            _embed_in_steps(embedder, texts[i : i + 256], pieces[i : i + 256], NullProgress())

    runs: dict[str, Callable[[], None]] = {
        "one call": lambda: calls(256),
        "steps": lambda: calls(64),
        "sorted steps": sorted_steps,
    }
    say(load_line(f"at start; {len(texts)} texts"))
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _, name in turns(list(runs), args.turns, rotate=True):
        with Span() as span:
            runs[name]()
        seconds[name].append(span.seconds)
    for line in ratio_table(seconds, "one call", digits=1):
        say(line)
    say(load_line("at end"))


if __name__ == "__main__":
    main()
