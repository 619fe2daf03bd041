"""Giving every chunk its context: the bridge from the (sync) indexer to the situating queue.

`resolve_context` decides what a run writes (an LLM's contexts when a provider is configured or
asked for, else outline contexts); a `Situator` produces them a window of documents at a time,
running the async queue with one `asyncio.run` a window; `fit_context` trims a context at a
sentence boundary, never the chunk, so that context plus chunk fits the embedder's input.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ctxr.config import LLMSettings
from ctxr.enrich.situate.batch import BatchOptions
from ctxr.enrich.situate.batch_journal import JOURNAL_DIR
from ctxr.enrich.situate.fit import Fit
from ctxr.enrich.situate.group import GROUP_PROMPT_VERSION
from ctxr.enrich.situate.ledger import Ledger, LedgerSummary, ledger_path
from ctxr.enrich.situate.outline import OUTLINE_VERSION, situate
from ctxr.enrich.situate.plan import PlanOptions
from ctxr.enrich.situate.prompt import PROMPT_VERSION
from ctxr.enrich.situate.queue import situate_documents
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.enrich.situate.results import SituateResult
from ctxr.errors import ConfigError
from ctxr.llm.error_map import safe_url
from ctxr.llm.local import LOCAL_TIMEOUT_SECONDS, is_local_url
from ctxr.llm.pricing import load_prices
from ctxr.llm.ratelimit import RateLimits
from ctxr.llm.registry import (
    DEFAULT_MODELS,
    cache_reads_count,
    choose_provider,
    configured_base_url,
    make_llm,
)
from ctxr.llm.server_limits import ServerLimits, discover
from ctxr.progress import Progress
from ctxr.types import Chunk, ContextKind, ContextualChunk, Document

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, slots=True)
class ContextPlan:
    kind: ContextKind
    provider: str | None = None
    model: str | None = None
    group_size: int = 1  # chunks per request (ctxr.enrich.situate.plan)

    @property
    def version(self) -> str:
        """What made the contexts; part of each document's recipe, so a change re-indexes. The
        per-chunk prompt's version alone when chunks are asked one by one, as before groups."""
        if self.kind == "llm" and self.group_size > 1:
            return f"{GROUP_PROMPT_VERSION}:{self.provider}:{self.model}:g{self.group_size}"
        if self.kind == "llm":
            return f"{PROMPT_VERSION}:{self.provider}:{self.model}"
        return OUTLINE_VERSION if self.kind == "outline" else ""


class ContextsInterrupted(KeyboardInterrupt):
    """Ctrl-C while LLM contexts were being written; `ledger` is what was paid for so far
    (each answer is already in the response cache, so the next run does not pay for it)."""

    def __init__(self, ledger: LedgerSummary) -> None:
        super().__init__("contexts interrupted")
        self.ledger = ledger


@dataclass(slots=True)
class ContextRun:
    situated: dict[str, list[ContextualChunk]]
    incomplete: set[str] = field(default_factory=set)  # documents with chunks that failed
    ledger: LedgerSummary | None = None
    first_error: str | None = None  # why the first failed chunk failed, for the summary


def resolve_context(llm_settings: LLMSettings, env: Mapping[str, str] | None = None) -> ContextPlan:
    if llm_settings.context in ("outline", "none"):
        return ContextPlan(llm_settings.context)
    provider = choose_provider(llm_settings.llm_provider, env)
    if provider is None:
        if llm_settings.context == "llm":
            raise ConfigError(
                "--context llm needs a provider: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL), "
                "or OPENAI_API_KEY / OPENAI_BASE_URL for any OpenAI-compatible server, or "
                "CTXR_LLM_PROVIDER; or use --context outline"
            )
        return ContextPlan("outline")
    model = llm_settings.llm_model or DEFAULT_MODELS[provider]
    return ContextPlan("llm", provider, model, llm_settings.llm_group_size)


class Situator:
    """One run's way of situating chunks, set up once and used for each window of documents.

    A run that streams its corpus (`ctxr.pipeline.build`) situates a window at a time; what
    belongs to the run is made here once: the server's limits (asked and said once), the
    prices, the rate limits, and one ledger, whose totals then cover the whole run."""

    def __init__(
        self,
        llm_settings: LLMSettings,
        encoding: str,
        plan: ContextPlan,
        index_dir: Path,
        cache_dir: Path,
        progress: Progress,
    ) -> None:
        self.plan = plan
        self.cache_dir = cache_dir
        self.progress = progress
        self.llm_settings = llm_settings
        if plan.kind != "llm":
            return
        assert plan.provider is not None and plan.model is not None
        self.base_url = configured_base_url(plan.provider)
        said = _server_limits(plan.provider, plan.model, self.base_url, llm_settings, progress)
        fit = None
        if said is not None and said.context_tokens is not None:
            fit = Fit(said.context_tokens, said.output_tokens)
        self.concurrency = llm_settings.llm_concurrency
        if (
            said is not None
            and said.slots
            and "llm_concurrency" not in llm_settings.model_fields_set
        ):
            # More requests than slots only queue at the server, their deadlines running.
            self.concurrency = said.slots
        prices = load_prices(llm_settings.prices_file)
        if is_local_url(self.base_url) and plan.model not in prices:
            # A server of the user's own bills nothing: one line, not the price table; the
            # same $0 entry the estimate prices with.
            prices = prices.with_free(plan.model, plan.provider)
            progress.note(
                f"priced at $0: {plan.model} is served locally ({safe_url(self.base_url)}); "
                "CTXR_PRICES_FILE gives it a price"
            )
        cost: Callable[..., float] | None = None
        try:
            prices.get(plan.model)
            cost = functools.partial(prices.cost, plan.model, batch=llm_settings.llm_batch)
        except ConfigError as exc:
            progress.note(f"dollars are not counted: {exc}")
        self.ledger = Ledger(ledger_path(index_dir), cost=cost)
        self.limits = RateLimits(
            requests_per_minute=llm_settings.llm_requests_per_minute,
            input_tokens_per_minute=llm_settings.llm_input_tokens_per_minute,
            output_tokens_per_minute=llm_settings.llm_output_tokens_per_minute,
            cache_reads_count=cache_reads_count(plan.provider),
            # Rate-limit headers saying nothing is left until later pause every sender at
            # most this long; a request refused after that with a longer retry-after ends the
            # run's sending (sender.py).
            max_pause_seconds=llm_settings.llm_max_retry_wait,
        )
        self.batch = None
        if llm_settings.llm_batch:
            poll = llm_settings.llm_batch_poll_seconds
            self.batch = BatchOptions(journal_dir=index_dir / JOURNAL_DIR, poll_seconds=poll)
        # The planner's options, as the estimate takes them: it prices the plan this run sends.
        self.options = PlanOptions.from_settings(llm_settings, encoding, fit)

    def situate(self, pairs: Sequence[tuple[Document, list[Chunk]]]) -> ContextRun:
        """Contexts for one window's chunks; the ledger's summary covers every window so far."""
        plan = self.plan
        if plan.kind != "llm":
            kind: ContextKind = plan.kind
            return ContextRun({d.doc_id: situate(d, chunks, kind) for d, chunks in pairs})
        assert plan.provider is not None and plan.model is not None
        settings, options, ledger = self.llm_settings, self.options, self.ledger
        # A client a window: its connections belong to the event loop `asyncio.run` makes.
        llm = make_llm(
            plan.provider,
            plan.model,
            timeout=llm_timeout(settings, self.base_url),
            max_output_tokens=settings.llm_max_output_tokens,
        )

        async def run(cache: ResponseCache) -> dict[str, SituateResult]:
            try:
                return await situate_documents(
                    [(d, chunks) for d, chunks in pairs],
                    llm,
                    ledger=ledger,
                    prompt_version=options.prompt_version,
                    count_tokens=options.count_tokens,
                    cache=cache,
                    limits=self.limits,
                    concurrency=self.concurrency,
                    progress=self.progress,
                    max_document_tokens=options.max_document_tokens,
                    render_document=options.render_document,
                    group_size=options.group_size,
                    context_tokens=options.context_tokens,
                    batch=self.batch,
                    cache_ttl=options.cache_ttl,
                    pack_tokens=options.pack_tokens,
                    max_retry_wait=settings.llm_max_retry_wait,
                    fit=options.fit,
                )
            finally:
                await llm.aclose()

        try:
            with ResponseCache(self.cache_dir / "contexts") as cache:
                results = asyncio.run(run(cache))
        except KeyboardInterrupt:
            # Every answer so far is in the response cache; say what was paid for, then stop.
            raise ContextsInterrupted(ledger.summary()) from None
        situated: dict[str, list[ContextualChunk]] = {}
        incomplete: set[str] = set()
        for document, chunks in pairs:
            situated[document.doc_id] = [results[c.chunk_id].contextual(c) for c in chunks]
            # A failed request or an answer that was no context: either way not answered, so
            # the document is recorded as incomplete and the next run asks again for those.
            if any(results[c.chunk_id].flagged for c in chunks):
                incomplete.add(document.doc_id)
        first_error = ledger.failures[0][1] if ledger.failures else None
        if first_error is None and ledger.flag_details:
            first_error = f"the answer was no context: {ledger.flag_details[0]}"
        return ContextRun(situated, incomplete, ledger.summary(), first_error)


def llm_timeout(llm_settings: LLMSettings, base_url: str | None) -> float:
    """Seconds a request may take: CTXR_LLM_TIMEOUT when set; unset, longer for a local base
    URL, where a CPU server takes minutes that an API takes seconds for (`ctxr.llm.local`)."""
    if is_local_url(base_url) and "llm_timeout" not in llm_settings.model_fields_set:
        return LOCAL_TIMEOUT_SECONDS
    return llm_settings.llm_timeout


def _server_limits(
    provider: str, model: str, base_url: str | None, llm_settings: LLMSettings, progress: Progress
) -> ServerLimits | None:
    """The context window (and slots) the server reports, said in one line; None where it
    says none (a hosted API, a proxy) or CTXR_LLM_CONTEXT_TOKENS is set (it wins, see
    `PlanOptions`)."""
    if llm_settings.llm_context_tokens is not None:
        progress.note(
            f"requests sized to a context window of {llm_settings.llm_context_tokens} tokens "
            "(CTXR_LLM_CONTEXT_TOKENS)"
        )
        return None
    if provider != "openai" or not base_url:
        return None
    limits = discover(base_url, model, api_key=os.environ.get("OPENAI_API_KEY"))
    if limits is None or limits.context_tokens is None:
        return None
    output = f", answers of at most {limits.output_tokens}" if limits.output_tokens else ""
    slots = ""
    if limits.slots and "llm_concurrency" not in llm_settings.model_fields_set:
        slots = f"; {limits.slots} requests at once, one a slot (CTXR_LLM_CONCURRENCY overrides)"
    progress.note(
        f"requests sized to the server's context window of {limits.context_tokens} tokens"
        f"{output} ({limits.source}; CTXR_LLM_CONTEXT_TOKENS overrides){slots}"
    )
    return limits


def fit_context(
    situated: ContextualChunk, count: Callable[[str], int], limit: int
) -> ContextualChunk:
    """Drop whole sentences from the end of the context until context + chunk fit `limit`.

    Only when the chunk fits on its own: a chunk that is already too long is cut by the
    embedder whatever we do, and its context is then worth more than its tail.
    """
    if not situated.context or count(situated.indexed_text()) <= limit:
        return situated
    if count(ContextualChunk(situated.chunk, "", situated.context_kind).indexed_text()) > limit:
        return situated
    sentences = _SENTENCE_END.split(situated.context.strip())
    while sentences:
        sentences.pop()
        trimmed = ContextualChunk(situated.chunk, " ".join(sentences), situated.context_kind)
        if count(trimmed.indexed_text()) <= limit:
            return trimmed
    return ContextualChunk(situated.chunk, "", situated.context_kind)
