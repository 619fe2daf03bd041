"""Cost-estimate dry runs: what an enrichment run would cost, computed without calling a model.

Nothing here models the run a second time. The estimate loads and splits with the indexer's own
functions, skips what the manifest says is unchanged (the indexer's recipe), asks the response
cache what is already answered (the queue's keys), plans prefixes and windows with
`plan_prefixes` and the provider's minimum cacheable size, renders every request with the
provider's own `request_body`, and prices with `PriceTable.cost`, as the ledger does. What it adds
is the schedule the queue enforces, in arithmetic: per cached prefix the first pending request
writes the cache and the others read it; below the minimum every token is uncached input;
OpenAI reads the prefix shared with the first request in 1,024 + 128·n token steps and bills no
write.

Tokens: exact for OpenAI models (their tiktoken encoding, message framing not counted); for
Claude a cl100k_base count, which runs low against Claude's own tokenizer (`CLAUDE_UNDERCOUNT`,
from one comparison, not a measured margin), or `exact=True` to ask Anthropic's free
`count_tokens` endpoint. Output tokens are an assumption per context.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxr.config import Settings
from ctxr.enrich.situate.contexts import ContextPlan
from ctxr.enrich.situate.group import ask_for
from ctxr.enrich.situate.pack import (
    SHARED_ANSWER_VERSIONS,
    Planned,
    pack_ask,
    pack_prefix,
    plan_packs,
    plan_prefix,
    share_usage,
)
from ctxr.enrich.situate.prompt import PROMPT_VERSION, document_part
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.enrich.situate.window import Prefix, plan_prefixes
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.llm.base import Usage
from ctxr.llm.clients import PLACEHOLDER_KEY
from ctxr.llm.pricing import ModelPrice, PriceTable, load_prices
from ctxr.llm.registry import DEFAULT_MODELS, choose_provider, make_llm
from ctxr.pipeline.chunking import Chunker, default_chunker
from ctxr.pipeline.collect import LoadTally, load_paths
from ctxr.pipeline.estimate_plain import NO_MODEL_PRICED, plain_recipe, plain_run
from ctxr.pipeline.estimate_report import DocumentCost, Estimate, ModelEstimate
from ctxr.pipeline.estimate_tokens import (
    anthropic_usages,
    claude_counter,
    openai_encoding,
    openai_usage,
)
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
# Claude's tokenizer is not public. On anthropic-codebase, Anthropic's reported run billed
# 3,666,878 prompt tokens; cl100k_base counts 2,795,746 for the same 737 prompts (README,
# "Estimating cost"): one corpus, one comparison, so a stated bias, not a measured margin.
CLAUDE_UNDERCOUNT = 0.31
CONTEXTS_DIR = "contexts"  # the response cache under the index's cache dir (contexts.py)


def default_model(settings: Settings) -> str:
    """The model a real run would use; Anthropic's default when no provider is configured."""
    if settings.llm_model:
        return settings.llm_model
    return DEFAULT_MODELS[choose_provider(settings.llm_provider) or "anthropic"]


def estimate_paths(paths: Sequence[str | Path], settings: Settings, **options: Any) -> Estimate:
    """Estimate indexing files and folders, loaded exactly as `build_index` loads them."""
    tally = LoadTally()
    documents = list(
        load_paths(
            paths,
            settings.max_file_bytes,
            tally,
            include=settings.include,
            follow_links=settings.follow_links,
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
    prices = load_prices(settings.prices_file)
    chosen = [default_model(settings)] if models is None else list(dict.fromkeys(models))
    for model in chosen:
        prices.get(model)  # an unknown model fails before any work, saying how to add a price
    out = DEFAULT_OUTPUT_TOKENS if output_tokens is None else output_tokens
    source = OUTPUT_TOKENS_SOURCE if output_tokens is None else "given (--output-tokens)"
    # The run's embedder, for its name and its input's cap on chunks; nothing is embedded
    # (the local one loads only its tokenizer).
    embedder = embedder or components.make_embedder(settings)
    count = len(documents)
    result = Estimate(out, source, embedder.name, prices.prices_read, count, count)
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
    result.notes.extend(_notes(chosen, prices, exact, settings.claude_tokenizer))
    if not chosen:  # no model priced: what the run without an LLM would do
        recipe = plain_recipe(settings, chunker_name)
        todo = [d for d in documents if _changed(manifest, d, recipe)]
        result.plain = plain_run(todo, len(documents), settings, chunks, embedder.name)
    try:
        for model in chosen:
            price = prices.get(model)
            plan = ContextPlan("llm", price.provider, model, settings.llm_group_size)
            recipe = document_recipe(settings, plan, chunker_name)
            todo = [d for d in documents if _changed(manifest, d, recipe)]
            pairs = [(d, chunks(d.doc_id)) for d in todo]
            estimate = _estimate_model(pairs, settings, price, model, out, cache, exact)
            estimate.documents_unchanged = len(documents) - len(todo)
            _embedding(estimate, pairs, settings, out, embedder.name)
            result.models.append(estimate)
    finally:
        if cache is not None:
            cache.close()
    return result


def _notes(models: list[str], prices: PriceTable, exact: bool, tokenizer: str) -> list[str]:
    providers = {prices.get(m).provider for m in models}
    notes = []
    if not models:
        notes.append(NO_MODEL_PRICED)
        return notes
    if "anthropic" in providers and not exact and claude_counter(tokenizer) is not None:
        notes.append(
            "Claude tokens are ctok's offline reconstruction of Claude's tokenizer (0.3% below "
            "Anthropic's billed count on anthropic-codebase's 737 prompts); --exact asks "
            "Anthropic's free count_tokens endpoint"
        )
    elif "anthropic" in providers and not exact:
        notes.append(
            "Claude tokens are tiktoken cl100k_base counts; Claude's tokenizer differs (on "
            f"anthropic-codebase Anthropic's reported run billed {CLAUDE_UNDERCOUNT:.0%} more "
            "prompt tokens than cl100k counts; not measured on your corpus); ctok counts "
            "them offline (pip install 'ctxr[claude-tokens]', Python 3.12+), --exact asks "
            "Anthropic's free count_tokens endpoint"
        )
    if "openai" in providers:
        notes.append(
            "OpenAI tokens are exact for the prompt text; the chat framing (about 7 tokens a "
            "request) is not counted. Cached tokens follow automatic prefix caching (1,024 + "
            "128n tokens shared with the prefix's first request)"
        )
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
    model: str,
    out: int,
    cache: ResponseCache | None,
    exact: bool,
) -> ModelEstimate:
    provider = price.provider
    group_size = settings.llm_group_size
    ttl = "1h" if settings.llm_batch else "5m"  # the queue's cache TTL (queue.py)
    claude = None
    if provider == "anthropic" and not exact:
        claude = claude_counter(settings.claude_tokenizer)
    # The request bodies come from the provider class itself; no request is ever sent.
    llm = make_llm(provider, model, api_key=PLACEHOLDER_KEY)
    if provider == "openai":
        encoding, known = openai_encoding(model)
        note = "exact (tiktoken)" if known else "estimate (model unknown to tiktoken)"
    elif claude is not None:
        # Prompts are counted by ctok; document tokens stay cl100k, comparable across models.
        encoding, known = "cl100k_base", False
        note = "ctok's offline Claude counts (0.3% low on anthropic-codebase)"
    else:
        encoding, known = "cl100k_base", False
        note = f"estimate: cl100k_base, may be ~{CLAUDE_UNDERCOUNT:.0%} low"
    label = "ctok" if claude is not None else encoding
    result = ModelEstimate(model, provider, label, known, note, llm.min_cacheable_tokens, price)
    prefixes = plan_prefixes(
        pairs,
        max_tokens=settings.max_document_tokens,
        count_tokens=functools.partial(count_tokens, encoding=settings.encoding),
        render_document=document_part,
        min_cacheable_tokens=llm.min_cacheable_tokens,
    )
    accounts: dict[str, DocumentCost] = {}
    for document, chunks in pairs:
        accounts[document.doc_id] = DocumentCost(
            document.source, document_tokens=count_tokens(document.text, encoding)
        )
        result.chunks += len(chunks)
    planned: list[Planned] = []
    for prefix in prefixes:
        pending = [c for c in prefix.window.chunks if not _answered(cache, llm, prefix, c)]
        result.chunks_answered += len(prefix.window.chunks) - len(pending)
        if pending:  # the queue's own planner: identical chunks once, `group_size` a request
            planned.append(plan_prefix(prefix, pending, group_size, ttl))
            result.chunks_deduplicated += len(pending) - len(planned[-1].chunks)
    tokens = settings.llm_max_output_tokens
    pack_tokens = settings.llm_pack_tokens if group_size > 1 else 0
    # Each unit's requests: (the prefix they are sent under, bodies, its members, chunks asked).
    work: list[tuple[Prefix, list[dict[str, Any]]]] = []
    members: list[tuple[Planned, ...]] = []
    outputs: list[int] = []  # output tokens per unit's requests
    for unit in plan_packs(planned, group_size, pack_tokens):
        if len(unit) > 1:  # small documents in one request, as the queue packs them
            pack = pack_ask(unit, tokens).ask()
            sent, asks, sizes = pack_prefix(unit), [pack], [len(pack.ids)]
        else:
            item = unit[0]
            sent, window = item.prefix, item.prefix.window
            whole = window.block is None
            asks = [
                ask_for(window.text, whole, window.chunks, g, sent.cache, tokens, group_size > 1)
                for g in item.groups
            ]
            sizes = [len(g) for g in item.groups]
        # Always marked: the marker shows where the cacheable prefix ends; `sent.cache`
        # decides below whether it is billed as cached (the queue sends none below it).
        bodies = [llm.request_body(dataclasses.replace(a.request, cache=True)) for a in asks]
        work.append((sent, bodies))
        members.append(unit)
        framing = sum(a.framing * n for a, n in zip(asks, sizes, strict=True))
        outputs.append(out * sum(sizes) + framing)
    if provider == "openai":
        usages = [openai_usage(p, bodies, encoding) for p, bodies in work]
    else:
        usages = anthropic_usages(work, encoding, model if exact else None, claude)
        if exact:
            result.tokens_exact, result.token_note = True, "exact (Anthropic count_tokens)"
    result.batch_run = settings.llm_batch
    hour = settings.llm_batch and provider == "anthropic"  # a batch run's cache TTL (queue.py)
    for (_, bodies), unit, usage, output in zip(work, members, usages, outputs, strict=True):
        usage = usage + Usage(output_tokens=output)
        if hour:
            written = usage.cache_write_tokens
            usage = dataclasses.replace(usage, cache_write_tokens=0, cache_write_1h_tokens=written)
        # A pack's bill is shared by its documents' sizes, as the run's ledger shares it; its
        # request is counted once, against the first document, as the sender records it.
        shares = share_usage(usage, [m.prefix.tokens for m in unit])
        for k, (member, share) in enumerate(zip(unit, shares, strict=True)):
            account = accounts[member.prefix.document.doc_id]
            account.chunks += len(member.chunks)
            account.requests += 0 if k else len(bodies)
            account.prefixes += 1
            account.cached = account.cached and member.prefix.cache
            account.usage = account.usage + share
        result.requests += len(bodies)
        result.prefixes += len(unit)
        result.cached_prefixes += sum(int(m.prefix.cache) for m in unit)
        result.usage = result.usage + usage
    for account in accounts.values():
        account.dollars = price.cost(account.usage, settings.llm_batch)
    result.documents = list(accounts.values())
    return result


def _answered(cache: ResponseCache | None, llm: Any, prefix: Prefix, chunk: Chunk) -> bool:
    if cache is None:
        return False
    versions = (PROMPT_VERSION, *SHARED_ANSWER_VERSIONS)  # as the queue looks them up
    sha = prefix.document.sha256
    return cache.answer(llm.provider, llm.model, versions, sha, chunk) is not None


def _embedding(
    estimate: ModelEstimate,
    pairs: list[tuple[Document, list[Chunk]]],
    settings: Settings,
    out: int,
    embedder: str,
) -> None:
    """Every chunk of a document to (re)index is embedded with its context (`out` tokens)."""
    count: Callable[[str], int] = functools.partial(count_tokens, encoding=settings.encoding)
    for _, chunks in pairs:
        for chunk in chunks:
            bare = ContextualChunk(chunk, "", "llm").indexed_text()
            estimate.embedding_tokens += count(bare) + out + 1  # + the "\n\n" separator
    # The local ONNX embedder is free; no HTTP embedder is priced yet.
    estimate.embedding_dollars = 0.0 if embedder.startswith(("onnx:", "fake:")) else None
