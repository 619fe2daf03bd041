"""Cost-estimate dry runs: what an enrichment run would cost, computed without calling a model.

Nothing here models the run a second time. The estimate loads and splits with the indexer's own
functions, skips what the manifest says is unchanged (the indexer's recipe), asks the situate
planner (`ctxr.enrich.situate.plan.plan_requests`) for the very `RequestPlan` the queue sends,
has the provider's `RequestCounter` count those requests as the provider bills them, and prices
with `PriceTable.cost`, as the ledger does. Which provider it is matters only to the counter
(`ctxr.llm.registry.make_counter`): its tokenizer, where its cache begins, what it adds unseen.

Tokens: exact for OpenAI models (their tiktoken encoding, message framing not counted); for
Claude ctok's offline counts, or cl100k_base, which runs low against Claude's own tokenizer, or
`exact=True` to ask Anthropic's free `count_tokens` endpoint. Output tokens are an assumption
per context.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextPlan
from ctxr.enrich.situate.plan import PlannedUnit, PlanOptions, plan_requests, share_usage
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.llm.base import LLM, PromptGroup, RequestCounter, Usage
from ctxr.llm.clients import PLACEHOLDER_KEY
from ctxr.llm.local import is_local_url
from ctxr.llm.pricing import ModelPrice, load_prices
from ctxr.llm.registry import (
    DEFAULT_MODELS,
    PROVIDERS,
    choose_provider,
    configured_base_url,
    make_counter,
    make_llm,
)
from ctxr.pipeline.chunking import Chunker, default_chunker
from ctxr.pipeline.collect import LoadTally, load_paths
from ctxr.pipeline.estimate_plain import NO_MODEL_PRICED, plain_recipe, plain_run
from ctxr.pipeline.estimate_report import DocumentCost, Estimate, ModelEstimate
from ctxr.pipeline.recipe import document_recipe
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, ContextualChunk, Document

# Anthropic's own assumption behind its "$1.02 per million document tokens" (Contextual
# Retrieval announcement, 2024: 800-token chunks, 8k-token documents, 50-token instruction,
# "100 tokens of context per chunk"); its guide calls contexts "usually 50-100 tokens". We have
# no measured run on a real model, so the upper end is the default: an estimate errs high.
DEFAULT_OUTPUT_TOKENS = 100
OUTPUT_TOKENS_SOURCE = (
    "assumed, not measured: Anthropic's figure of 100 context tokens per chunk (its $1.02 per "
    "million document tokens example; contexts are 'usually 50-100 tokens')"
)
CONTEXTS_DIR = "contexts"  # the response cache under the index's cache dir (contexts.py)


def default_model(settings: Settings) -> str:
    """The model a real run would use; the first registered provider's default (Anthropic's)
    when no provider is configured."""
    if settings.llm.llm_model:
        return settings.llm.llm_model
    return DEFAULT_MODELS[choose_provider(settings.llm.llm_provider) or PROVIDERS[0]]


def _served_locally(settings: Settings) -> str | None:
    """The configured provider, when its base URL is a server on this machine or network."""
    provider = choose_provider(settings.llm.llm_provider)
    if provider is not None and is_local_url(configured_base_url(provider)):
        return provider
    return None


def estimate_paths(paths: Sequence[str | Path], settings: Settings, **options: Any) -> Estimate:
    """Estimate indexing files and folders, loaded exactly as `build_index` loads them."""
    tally = LoadTally()
    documents = list(
        load_paths(
            paths,
            settings.corpus.max_file_bytes,
            tally,
            include=settings.corpus.include,
            follow_links=settings.corpus.follow_links,
        )
    )
    result = estimate_documents(documents, settings, **options)
    result.files_seen, result.skipped, result.failed = tally.files_seen, tally.skipped, tally.failed
    return result


def estimate_documents(
    documents: Sequence[Document],
    settings: Settings,
    *,
    models: Sequence[str] | None = None,
    output_tokens: int | None = None,
    exact: bool = False,
    chunker: Chunker | None = None,
    chunker_name: str = "split",
    ignore_manifest: bool = False,
    embedder: Embedder | None = None,
) -> Estimate:
    """Estimate situating `documents` with each of `models` (default: the configured one;
    an empty list estimates the documents and embeddings only). Writes nothing."""
    prices = load_prices(settings.llm.prices_file)
    chosen = [default_model(settings)] if models is None else list(dict.fromkeys(models))
    free = _served_locally(settings) if models is None else None
    if free is not None and chosen[0] not in prices:  # a local server bills nothing
        prices = prices.with_free(chosen[0], free)
    for model in chosen:
        prices.get(model)  # an unknown model fails before any work, saying how to add a price
    out = DEFAULT_OUTPUT_TOKENS if output_tokens is None else output_tokens
    source = OUTPUT_TOKENS_SOURCE if output_tokens is None else "given (--output-tokens)"
    # The run's embedder, for its name and its input's cap on chunks; nothing is embedded
    # (the local one loads only its tokenizer).
    embedder = embedder or components.make_embedder(settings)
    count = len(documents)
    result = Estimate(out, source, embedder.name, prices.prices_read, count, count)
    if free is not None and prices.sources.get(chosen[0]) == "served locally: $0":
        result.notes.append(f"priced at $0: {chosen[0]} is served locally (CTXR_PRICES_FILE "
                            "gives it a price)")  # fmt: skip
    index_dir = Path(settings.index_dir)
    manifest = None
    if not ignore_manifest and (index_dir / MANIFEST_NAME).exists():
        manifest = Manifest.load(index_dir)
    cache_path = components.cache_dir(settings) / CONTEXTS_DIR
    cache = ResponseCache(cache_path) if cache_path.is_dir() else None  # never create one
    # With the embedder's input as the cap, as `build_index` splits (the dry run said 64 chunks
    # of the examples where the run wrote 79).
    split = chunker or default_chunker(settings, embedder)
    chunks = functools.cache(lambda doc_id: split(by_id[doc_id]))
    by_id = {d.doc_id: d for d in documents}
    # The request bodies come from the provider classes themselves; no request is ever sent.
    llms = {m: make_llm(prices.get(m).provider, m, api_key=PLACEHOLDER_KEY) for m in chosen}
    tokenizer = settings.llm.claude_tokenizer
    counters = {m: make_counter(llm, tokenizer=tokenizer, exact=exact) for m, llm in llms.items()}
    result.notes.extend(_notes(llms, counters))
    if not chosen:  # no model priced: what the run without an LLM would do
        recipe = plain_recipe(settings, chunker_name)
        todo = [d for d in documents if _changed(manifest, d, recipe)]
        result.plain = plain_run(todo, len(documents), settings, chunks, embedder.name)
    try:
        for model in chosen:
            price = prices.get(model)
            plan = ContextPlan("llm", price.provider, model, settings.llm.llm_group_size)
            recipe = document_recipe(settings, plan, chunker_name)
            todo = [d for d in documents if _changed(manifest, d, recipe)]
            pairs = [(d, chunks(d.doc_id)) for d in todo]
            estimate = _estimate_model(
                pairs, settings, price, llms[model], counters[model], out, cache
            )
            estimate.documents_unchanged = len(documents) - len(todo)
            _embedding(estimate, pairs, settings, out, embedder.name)
            result.models.append(estimate)
    finally:
        if cache is not None:
            cache.close()
    return result


def _notes(llms: Mapping[str, LLM], counters: Mapping[str, RequestCounter]) -> list[str]:
    """What the counts rest on, each provider's once, in the registry's order."""
    if not llms:
        return [NO_MODEL_PRICED]
    order = sorted(llms, key=lambda m: PROVIDERS.index(llms[m].provider))
    notes = list(dict.fromkeys(n for m in order for n in counters[m].notes()))
    notes.append(
        "batch totals apply the Batch API discount to the same tokens; a --batch run sends each "
        "cached document's first request in one batch and the rest in the next, with 1-hour "
        "cache writes (Anthropic), but cache hits inside a batch are best effort"
    )
    return notes


def _changed(manifest: Manifest | None, document: Document, recipe: str) -> bool:
    return manifest is None or not manifest.is_current(document.doc_id, document.sha256, recipe)


def _estimate_model(
    pairs: list[tuple[Document, list[Chunk]]],
    settings: Settings,
    price: ModelPrice,
    llm: LLM,
    counter: RequestCounter,
    out: int,
    cache: ResponseCache | None,
) -> ModelEstimate:
    """The run's own plan for `pairs`, counted by the provider's counter and priced."""
    result = ModelEstimate(
        llm.model, llm.provider, counter.label, counter.exact, counter.note,
        llm.min_cacheable_tokens, price,
    )  # fmt: skip
    plan = plan_requests(
        pairs, llm, cache, PlanOptions.from_settings(settings.llm, settings.split.encoding)
    )
    accounts: dict[str, DocumentCost] = {}
    for document, chunks in pairs:
        tokens = count_tokens(document.text, counter.encoding)
        accounts[document.doc_id] = DocumentCost(document.source, document_tokens=tokens)
        result.chunks += len(chunks)
    result.chunks_answered = len(plan.answered)
    result.chunks_deduplicated = sum(planned.duplicates for planned in plan.planned)
    groups = [PromptGroup([r.request for r in u.requests], u.sent.cache) for u in plan.units]
    result.batch_run = settings.llm.llm_batch
    for unit, prompt in zip(plan.units, counter.prompt_usages(groups), strict=True):
        # Output: the assumed context per chunk, and the answer's JSON framing per chunk.
        output = sum((out + r.framing) * len(r.chunks) for r in unit.requests)
        _charge(result, accounts, unit, prompt + Usage(output_tokens=output))
    for account in accounts.values():
        account.dollars = price.cost(account.usage, settings.llm.llm_batch)
    result.documents = list(accounts.values())
    return result


def _charge(
    result: ModelEstimate, accounts: dict[str, DocumentCost], unit: PlannedUnit, usage: Usage
) -> None:
    """A unit's bill, on the run and on its documents. A pack's is shared by its documents'
    sizes, as the run's ledger shares it; its request is counted once, against the first
    document, as the sender records it."""
    shares = share_usage(usage, [m.prefix.tokens for m in unit.members])
    for k, (member, share) in enumerate(zip(unit.members, shares, strict=True)):
        account = accounts[member.prefix.document.doc_id]
        account.chunks += len(member.chunks)
        account.requests += 0 if k else len(unit.requests)
        account.prefixes += 1
        account.cached = account.cached and member.prefix.cache
        account.usage = account.usage + share
    result.requests += len(unit.requests)
    result.prefixes += len(unit.members)
    result.cached_prefixes += sum(int(m.prefix.cache) for m in unit.members)
    result.usage = result.usage + usage


def _embedding(
    estimate: ModelEstimate,
    pairs: list[tuple[Document, list[Chunk]]],
    settings: Settings,
    out: int,
    embedder: str,
) -> None:
    """Every chunk of a document to (re)index is embedded with its context (`out` tokens)."""
    count: Callable[[str], int] = functools.partial(count_tokens, encoding=settings.split.encoding)
    for _, chunks in pairs:
        for chunk in chunks:
            bare = ContextualChunk(chunk, "", "llm").indexed_text()
            estimate.embedding_tokens += count(bare) + out + 1  # + the "\n\n" separator
    # The local ONNX embedder is free; no HTTP embedder is priced yet.
    estimate.embedding_dollars = 0.0 if embedder.startswith(("onnx:", "fake:")) else None
