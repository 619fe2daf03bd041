"""What LLM contexts cost per situating mode: `ctxr index` on the anthropic-codebase files.

The 90 source files of ``../shared/data/anthropic-codebase`` are written out as files, each
with the extension of the grammar that parses it best (the set has no file names; see
`bench.common.codebase`), so ctxr splits them as code, and are
indexed by `build_index` with ``--context llm``, ctxr's own splitter and queue, the real
Anthropic (or OpenAI) SDK, against the loopback fake server of the test suite (prompt caching
with each model's minimum cacheable size, usage as the provider reports it). Dense vectors come
from the tests' hash embedder: embedding costs no LLM money and is not what is measured here.

One run per mode (``--groups 1,4,8,16,16b``: the group size, 1 being Anthropic's published
one-request-per-chunk method, and a ``b`` for a batch run, ``--batch``; small documents packed
up to ``--pack-tokens``, 0 for none), each into a fresh
index with an empty response cache, against a fresh server (an empty prompt cache), in turn.
Printed per run, from ctxr's own ledger priced with ``ctxr/llm/pricing.json``: chunks,
requests, retries (chunks asked again alone), each token kind, dollars, dollars per million
document tokens (cl100k), the cache read share and the wall time; and the estimate's dollars
for the same settings, made first, so the two can be compared.

Usage::

    python -m bench.cost.context_cost [--model claude-haiku-4-5] [--groups 1,4,8,16]
        [--data ../shared/data/anthropic-codebase] [--limit-docs N] [--pack-tokens 8000]
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import TESTS
from bench.common.codebase import add_data_option, write_corpus
from bench.common.measure import Span, load_line, machine, say
from bench.common.measure import parser as cli

sys.path.insert(0, str(TESTS))  # the test suite's fakes: `fakes.llm_server`

from fakes.hash_embedder import HashEmbedder
from fakes.llm_server import FakeLLMServer

from ctxr.config import load_settings
from ctxr.llm.pricing import load_prices
from ctxr.pipeline.build import build_index
from ctxr.pipeline.estimate import estimate_paths


def run(
    corpus: Path, root: Path, model: str, provider: str, group: int, batch: bool, pack: int
) -> dict[str, object]:
    settings = load_settings(
        index_dir=root / f"idx-g{group}{'b' if batch else ''}",
        context="llm",
        llm_provider=provider,
        llm_model=model,
        llm_group_size=group,
        llm_pack_tokens=pack,
        llm_concurrency=16,
        llm_batch=batch,
        llm_batch_poll_seconds=0.05,  # the fake ends a batch at its first status check
    )
    estimate = estimate_paths([corpus], settings, models=[model], embedder=HashEmbedder())
    with Span() as span:
        report = build_index([corpus], settings, embedder=HashEmbedder())
    summary = report.contexts
    assert summary is not None
    return {
        "group": f"{group}{' batch' if batch else ''}",
        "chunks": report.chunks_written,
        "requests": summary.requests,
        "retries": summary.retries,
        "failures": summary.failures,
        "input": summary.input_tokens,
        "cache_write": summary.cache_write_tokens + summary.cache_write_1h_tokens,
        "cache_read": summary.cache_read_tokens,
        "output": summary.output_tokens,
        "dollars": summary.dollars,
        "estimate_dollars": estimate.models[0].dollars(),
        "estimate_requests": estimate.models[0].requests,
        "cache_read_share": summary.cache_read_share,
        "wall_s": span.seconds,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--model", default="claude-haiku-4-5")
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--groups", default="1,4,8,16")
    add_data_option(parser)
    parser.add_argument("--limit-docs", type=int)
    parser.add_argument("--pack-tokens", type=int, default=8000, help="0: no packs")
    args = parser.parse_args(argv)
    say(f"# {platform.platform()}, {machine()}")
    say(load_line("at start"))
    price = load_prices(None).get(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        doc_tokens = write_corpus(args.data, root / "corpus", args.limit_docs)
        print(f"# {args.model} list prices {price}; {doc_tokens:,} document tokens (cl100k); "
              f"packs up to {args.pack_tokens:,} tokens")  # fmt: skip
        header = (
            "group | chunks | requests | retries | input | cache write | cache read | output | "
            "$ | $/M doc tokens | estimate $ | cache read share | wall s"
        )
        print(header)
        print("|".join("---" for _ in header.split("|")))
        for mode in args.groups.split(","):
            group, batch = int(mode.rstrip("b")), mode.endswith("b")
            with FakeLLMServer() as server:  # an empty prompt cache for every run
                for name, value in server.env().items():
                    os.environ[name] = value
                row = run(root / "corpus", root, args.model, args.provider, group, batch,
                          args.pack_tokens)  # fmt: skip
            dollars = float(row["dollars"] or 0.0)  # type: ignore[arg-type]
            print(
                f"{row['group']} | {row['chunks']:,} | {row['requests']:,} | {row['retries']} | "
                f"{row['input']:,} | {row['cache_write']:,} | {row['cache_read']:,} | "
                f"{row['output']:,} | {dollars:.4f} | {dollars / doc_tokens * 1e6:.2f} | "
                f"{row['estimate_dollars']:.4f} | {row['cache_read_share']:.3f} | "
                f"{row['wall_s']:.1f}",
                flush=True,
            )
    say(load_line("at end"))


if __name__ == "__main__":
    main()
