"""Enrichment of the anthropic-codebase documents against the fake LLM server.

The 90 documents of ``../shared/data/anthropic-codebase`` with their own 737 chunks are
situated by the real provider classes (`AnthropicLLM`, or `OpenAILLM` with
``--provider openai``) over HTTP against the loopback fake server of the test suite, which
emulates prompt caching (a prefix becomes readable only when the response that wrote it has
completed), answers with a realistic latency and enforces a server-side requests/min limit
(429 with retry-after). The client side is ctxr's own queue, `situate_documents`, configured
with the same requests/min limit (`RateLimits(requests_per_minute=...)`), a concurrency of 16
and no response cache, exactly as `ctxr index` calls it (`document_part` renders the prefix).

``--naive`` adds, for contrast, the scheme of Anthropic's reference notebook: every chunk of
every document is sent at once (`asyncio.gather`, the same concurrency
bound, the same client-side rate limiter, simple retries), so the chunks of one document race
each other before the first cache write has completed.

Printed per run: cache writes per cacheable document (written exactly once, more than once,
never), the share of document tokens read from the cache against the theoretical maximum
(every chunk after the first of each cacheable document reads the whole prefix), requests/min
achieved (chunks / wall time) against the limit, 429s and retries, and the wall time.

The fake server lives in the repository's ``tests/fakes``; this script puts the repository's
``tests`` directory on ``sys.path`` to import it.

Usage::

    python -m bench.cost.enrich_codebase [--models claude-sonnet-4-6,claude-haiku-4-5] [--naive]
        [--rpm 600] [--concurrency 16] [--limit-docs N] [--latency-scale 1.0]
        [--provider anthropic|openai]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common.checkout import TESTS, data_dir
from bench.common.measure import Span, load_line, machine, say
from bench.common.measure import parser as cli

sys.path.insert(0, str(TESTS))  # the test suite's fakes: `fakes.llm_server`

from fakes.llm_faults import realistic_latency
from fakes.llm_server import FakeLLMServer, RecordedRequest
from fakes.llm_wire import count_text_tokens, prompt_parts

from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.prompt import PROMPT_VERSION, SituateRequest, document_part
from ctxr.enrich.situate.queue import situate_documents
from ctxr.errors import ProviderError
from ctxr.eval.datasets import load_anthropic_codebase
from ctxr.eval.runner import given_chunker, to_documents
from ctxr.llm.base import LLM
from ctxr.llm.cache_minimums import min_cacheable_tokens
from ctxr.llm.ratelimit import RateLimiter, RateLimits
from ctxr.llm.registry import make_llm
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document

Pairs = list[tuple[Document, list[Chunk]]]
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6,claude-haiku-4-5", "openai": "gpt-4o-mini"}
NAIVE_ATTEMPTS = 6


@dataclass
class Outcome:
    """What one run did, seen from both sides of the wire."""

    label: str
    model: str
    wall_s: float
    requests: list[RecordedRequest]
    retries: Counter[str] = field(default_factory=Counter)  # client-side, by reason
    failures: int = 0
    flagged: int = 0
    pauses: int = 0  # client-wide pauses the limiter took (retry-after, "remaining: 0")
    limiter_wait_s: float = 0.0


def load_pairs(limit_docs: int | None) -> Pairs:
    dataset = load_anthropic_codebase(data_dir("anthropic-codebase"))
    documents = to_documents(dataset, "anthropic-codebase")
    chunker, _ = given_chunker(dataset, "cl100k_base")
    pairs = [(d, chunker(d)) for d in documents]
    return pairs[:limit_docs] if limit_docs else pairs


def short_reason(error: str) -> str:
    """'Anthropic rate limit reached (HTTP 429, ...)' -> '429'."""
    for status in ("429", "529", "500", "503"):
        if f"HTTP {status}" in error or error.startswith(status):
            return status
    return error.split(":")[0][:40]


async def run_queue(llm: LLM, pairs: Pairs, limiter: RateLimiter, concurrency: int) -> Outcome:
    ledger = Ledger(None)
    span = Span()
    try:
        results = await situate_documents(
            pairs,
            llm,
            ledger=ledger,
            prompt_version=PROMPT_VERSION,
            count_tokens=count_tokens,
            cache=None,
            limits=limiter,
            concurrency=concurrency,
            render_document=document_part,
        )
    finally:
        await llm.aclose()
    wall = span.seconds
    assert len(results) == sum(len(chunks) for _, chunks in pairs)
    retries = Counter(short_reason(e) for _, e in ledger.retries)
    return Outcome(
        "queue",
        llm.model,
        wall,
        [],
        retries,
        len(ledger.failures),
        len(ledger.flagged),
    )


async def run_naive(llm: LLM, pairs: Pairs, limiter: RateLimiter, concurrency: int) -> Outcome:
    """Every chunk at once, bounded only by `concurrency`: the reference notebook's scheme."""
    slots = asyncio.Semaphore(concurrency)
    retries: Counter[str] = Counter()
    failures = 0
    minimum = llm.min_cacheable_tokens

    async def one(document: Document, chunk: Chunk, cache: bool) -> None:
        nonlocal failures
        request = SituateRequest(document.text, chunk.text, chunk.heading_path, cache)
        for attempt in range(NAIVE_ATTEMPTS):
            async with slots:
                await limiter.acquire(0, 0)
                try:
                    completion = await llm.complete(request.completion())
                except ProviderError as exc:
                    if not exc.retryable or attempt == NAIVE_ATTEMPTS - 1:
                        failures += 1
                        return
                    retries[short_reason(str(exc))] += 1
                    if exc.retry_after:
                        limiter.pause(exc.retry_after)
                    wait = max(exc.retry_after or 0.0, random.uniform(0, 2**attempt))
                else:
                    limiter.observe(completion.rate_limit_headers)
                    return
            await asyncio.sleep(wait)

    span = Span()
    try:
        await asyncio.gather(
            *(
                one(d, c, count_tokens(document_part(d.text)) >= minimum)
                for d, chunks in pairs
                for c in chunks
            )
        )
    finally:
        await llm.aclose()
    return Outcome("naive", llm.model, span.seconds, [], retries, failures)


def run_once(args: argparse.Namespace, model: str, mode: str, pairs: Pairs) -> Outcome:
    latency = realistic_latency(scale=args.latency_scale)
    with FakeLLMServer(latency=latency, rpm_limit=args.rpm) as server:
        base = server.anthropic_base_url if args.provider == "anthropic" else server.openai_base_url
        llm = make_llm(args.provider, model, api_key="test", base_url=base)
        limiter = RateLimiter(RateLimits(requests_per_minute=args.rpm))
        if args.provider == "openai":
            limiter = RateLimiter(RateLimits(requests_per_minute=args.rpm, cache_reads_count=True))
        runner = run_queue if mode == "queue" else run_naive
        outcome = asyncio.run(runner(llm, pairs, limiter, args.concurrency))
        outcome.requests = server.requests
        outcome.pauses, outcome.limiter_wait_s = limiter.pauses, limiter.waited_seconds
        outcome.label = f"{mode} (peak in flight at the server {server.peak_in_flight})"
    return outcome


def document_of(record: RecordedRequest, by_prefix: dict[str, str]) -> str:
    """The doc id a request was about: its prompt starts with the document's rendered part."""
    text = "\n\n".join(p.text for p in prompt_parts(record.body, record.provider))
    for prefix, doc_id in by_prefix.items():
        if text.startswith(prefix):
            return doc_id
    raise AssertionError(f"request {record.index} matches no document")


def report(args: argparse.Namespace, outcome: Outcome, pairs: Pairs, minimum: int) -> None:
    model, provider = outcome.model, args.provider
    rendered = {d.doc_id: document_part(d.text) for d, _ in pairs}
    # Longest first, so that a document whose rendered text prefixes another's is not chosen.
    by_prefix = dict(sorted(((t, i) for i, t in rendered.items()), key=lambda x: -len(x[0])))
    prefix_tokens = {i: count_text_tokens(t, model) for i, t in rendered.items()}
    chunks = {d.doc_id: len(c) for d, c in pairs}
    cacheable = {i for i, t in rendered.items() if count_tokens(t) >= minimum}
    ok = [r for r in outcome.requests if r.status == 200 and r.endpoint != "count_tokens"]
    rejected = Counter(r.status for r in outcome.requests if r.status != 200)
    writes: Counter[str] = Counter()
    read = denominator = 0
    for r in ok:
        doc_id = document_of(r, by_prefix)
        usage: dict[str, Any] = r.usage or {}
        denominator += prefix_tokens[doc_id]
        if provider == "anthropic":
            read += int(usage.get("cache_read_input_tokens") or 0)
            writes[doc_id] += 1 if r.cache_writes else 0
        else:
            cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
            read += min(cached, prefix_tokens[doc_id])
            writes[doc_id] += 1 if doc_id in cacheable and cached == 0 else 0
    theoretical = sum((chunks[i] - 1) * prefix_tokens[i] for i in cacheable)
    total_chunks = sum(chunks.values())
    once = sum(1 for i in cacheable if writes[i] == 1)
    many = sorted((writes[i], i) for i in cacheable if writes[i] > 1)
    never = sum(1 for i in cacheable if writes[i] == 0)
    stray = sum(writes[i] for i in chunks if i not in cacheable)
    latencies = [r.finish - r.arrival for r in ok if r.finish is not None]
    arrivals = sorted(r.arrival for r in ok)
    span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    achieved = total_chunks / outcome.wall_s * 60

    print(f"\n== {provider} {model}: {outcome.label}")
    print(
        f"documents {len(pairs)}, chunks {total_chunks}; cacheable (prefix >= {minimum} tokens): "
        f"{len(cacheable)} documents with {sum(chunks[i] for i in cacheable)} chunks; "
        f"below the minimum: {len(pairs) - len(cacheable)}"
    )
    write_word = "cache writes" if provider == "anthropic" else "responses reading no cache"
    dist = dict(sorted(Counter(writes[i] for i in cacheable).items()))
    print(
        f"{write_word} per cacheable document: exactly once {once}, more than once {len(many)}, "
        f"never {never}; distribution {{writes: documents}} {dist}; total "
        f"{sum(writes.values())} for {len(cacheable)} documents"
    )
    if many:
        worst = ", ".join(f"{i} ({n} writes / {chunks[i]} chunks)" for n, i in many[-3:])
        print(f"  most written: {worst}")
    if stray:
        print(f"  writes on documents below the minimum: {stray} (should be 0)")
    share = read / denominator if denominator else 0.0
    ceiling = theoretical / denominator if denominator else 0.0
    print(
        f"document tokens read from cache: {read:,} of {denominator:,} = {share:.1%} "
        f"(theoretical max {theoretical:,} = {ceiling:.1%}; "
        f"{(read / theoretical if theoretical else 0.0):.1%} of the maximum)"
    )
    print(
        f"requests: {len(ok)} answered for {total_chunks} chunks, server rejections "
        f"{dict(rejected) or 0}, client retries {dict(outcome.retries) or 0}, "
        f"failures {outcome.failures}, flagged {outcome.flagged}, limiter pauses "
        f"{outcome.pauses}, client limiter held senders back {outcome.limiter_wait_s:.1f} s"
    )
    if latencies:
        print(
            f"server latency per answered request: mean {statistics.mean(latencies):.3f} s, "
            f"max {max(latencies):.3f} s"
        )
    server_rate = (len(ok) - 1) / span * 60 if span else 0.0
    print(
        f"wall {outcome.wall_s:.1f} s; achieved {achieved:.0f} requests/min = "
        f"{achieved / args.rpm:.1%} of the {args.rpm:g} limit (answered arrivals at the server: "
        f"{server_rate:.0f}/min over {span:.1f} s)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--models", help="comma-separated; default by provider")
    parser.add_argument("--rpm", type=float, default=600.0, help="server and client limit")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--limit-docs", type=int, help="only the first N documents")
    parser.add_argument("--latency-scale", type=float, default=1.0)
    parser.add_argument("--naive", action="store_true", help="also run the naive baseline")
    parser.add_argument("--naive-only", action="store_true", help="skip ctxr's queue")
    args = parser.parse_args(argv)
    pairs = load_pairs(args.limit_docs)
    models = (args.models or DEFAULT_MODELS[args.provider]).split(",")
    modes = ["naive"] if args.naive_only else ["queue", "naive"] if args.naive else ["queue"]
    say(
        f"machine: {platform.node()}, {machine()}; rpm {args.rpm:g}, concurrency "
        f"{args.concurrency}; latency realistic_latency(scale={args.latency_scale:g}): 0.3 s + "
        "8 ms/output token + 20 us/uncached input token + 2 us/cached token"
    )
    say(load_line("at start"))
    for model in models:
        minimum = min_cacheable_tokens(args.provider, model)
        for mode in modes:
            outcome = run_once(args, model, mode, pairs)
            report(args, outcome, pairs, minimum)
            sys.stdout.flush()
    say(load_line("at end"))


if __name__ == "__main__":
    main()
