"""The request plan (ctxr/enrich/situate/plan.py) is what a run sends: the queue's requests, as
the loopback fake server receives them through the real SDKs, are the plan's requests, and the
provider's counter (what the estimate prices) counts them at the tokens the server bills."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.plan import PlanOptions, RequestPlan, plan_requests
from ctxr.enrich.situate.prompt import PROMPT_VERSION, document_part
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.response_cache import ResponseCache, chunk_key
from ctxr.llm.base import LLM, PromptGroup, Usage
from ctxr.llm.registry import make_counter, make_llm
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.answers import grouped_answer
from tests.fixtures.billing import answered, billed_usage
from tests.fixtures.documents import Corpus, chunked_document, fact_sections

CONTEXT = "This passage belongs to a note on natural phenomena and lists measured facts."
ANSWER = grouped_answer(CONTEXT)
SONNET = "claude-sonnet-4-6"  # caches from 1,024 tokens


def _document(name: str, sections: int, words: int = 40) -> tuple[Document, list[Chunk]]:
    """`sections` chunks of `words` sentences each; the last two are identical."""
    bodies = fact_sections(name, sections, words)
    if sections > 2:
        bodies[-1] = bodies[-2]  # an identical question: asked once
    return chunked_document(name, bodies, headings=lambda i: (name,))


def _corpus() -> Corpus:
    """Two documents past 1,024 tokens (cached), one sent in windows, and small ones to pack."""
    return [
        _document("big.md", 12),
        _document("long.md", 40),  # past the 2,500-token budget: windows
        _document("s1.md", 2, 10),
        _document("s2.md", 3, 10),
        _document("big2.md", 10),
        _document("s3.md", 1, 10),
    ]


def _options(group_size: int) -> PlanOptions:
    return PlanOptions(
        count_tokens=functools.partial(count_tokens, encoding="cl100k_base"),
        render_document=document_part,
        max_document_tokens=2500,
        group_size=group_size,
        context_tokens=200,
        pack_tokens=8000,
    )


def _run(corpus: Corpus, llm: LLM, options: PlanOptions, cache: ResponseCache | None) -> None:
    async def go() -> None:
        try:
            await situate_documents(
                corpus, llm, ledger=Ledger(), prompt_version=options.prompt_version,
                count_tokens=options.count_tokens, cache=cache,
                max_document_tokens=options.max_document_tokens,
                render_document=options.render_document, group_size=options.group_size,
                context_tokens=options.context_tokens, pack_tokens=options.pack_tokens,
            )  # fmt: skip
        finally:
            await llm.aclose()

    asyncio.run(go())


def _prompt(body: dict[str, Any]) -> str:
    """What of a body the model reads, in a form both the plan's and the wire's share."""
    keep = ("system", "messages", "tools", "tool_choice", "response_format")
    return json.dumps({k: body[k] for k in keep if k in body}, sort_keys=True)


def _priced(plan: RequestPlan, llm: LLM) -> Usage:
    counter = make_counter(llm, tokenizer="cl100k")  # as the fake server counts
    groups = [PromptGroup([r.request for r in u.requests], u.sent.cache) for u in plan.units]
    return sum(counter.prompt_usages(groups), Usage())


@pytest.mark.parametrize("group_size", [1, 4])
@pytest.mark.parametrize(
    ("provider", "model", "endpoint"),
    [("anthropic", SONNET, "messages"), ("openai", "gpt-4o-mini", "chat.completions")],
)
def test_the_queue_sends_the_plan_the_estimate_prices(
    fake_llm_factory: Callable[..., FakeLLMServer],
    provider: str,
    model: str,
    endpoint: str,
    group_size: int,
) -> None:
    server = fake_llm_factory(respond=ANSWER)
    base_url = server.anthropic_base_url if provider == "anthropic" else server.openai_base_url
    corpus, options = _corpus(), _options(group_size)
    llm = make_llm(provider, model, api_key="test", base_url=base_url)
    plan = plan_requests(corpus, llm, None, options)
    assert any(u.sent.cache for u in plan.units) and any(not u.sent.cache for u in plan.units)
    assert any(p.window.block is not None for p in plan.prefixes)
    if group_size > 1:
        assert any(u.is_pack for u in plan.units)
    estimated = _priced(plan, llm)
    planned = sorted(_prompt(llm.request_body(r.request)) for r in plan.requests)

    _run(corpus, llm, options, None)
    done = answered(server, endpoint)
    sent = sorted(_prompt(r.body) for r in done)
    assert sent == planned  # the very requests, one for one
    assert len(sent) == len(plan.requests)
    # Counted as the server counts (cl100k_base): every prompt token, cached or not, exact.
    prompt = dataclasses.replace(billed_usage(done), output_tokens=0)
    assert estimated == prompt and prompt.cache_read_tokens > 0


def test_the_plan_leaves_out_answers_but_not_flagged_entries(tmp_path: Path) -> None:
    corpus = _corpus()
    llm = make_llm("openai", "gpt-4o-mini", api_key="test", base_url="http://127.0.0.1:9")
    options = _options(4)
    fresh = plan_requests(corpus, llm, None, options)
    document, chunks = corpus[0]
    good, flagged = chunks[0], chunks[1]
    with ResponseCache(tmp_path / "contexts") as cache:
        key = functools.partial(chunk_key, llm.provider, llm.model, PROMPT_VERSION, document.sha256)
        cache.put(key(good), CONTEXT)
        # An entry older versions stored for an answer that was no context is no answer.
        cache.put(key(flagged), "the outline", flagged="too short")
        plan = plan_requests(corpus, llm, cache, options)
    assert [(a.chunk.chunk_id, a.context) for a in plan.answered] == [(good.chunk_id, CONTEXT)]
    asked = {c.chunk_id for r in plan.requests for c in r.chunks}
    assert flagged.chunk_id in asked and good.chunk_id not in asked
    before = sum(len(r.chunks) for r in fresh.requests)
    assert sum(len(r.chunks) for r in plan.requests) == before - 1
