"""The one planner of a run's requests: what to ask, in which request, cached or not.

`plan_requests` turns documents and their chunks into a `RequestPlan`: the prefixes the provider
will cache (`window.py`), the chunks the response cache already answers (never asked again),
and, per prefix, the requests that situate the rest. The queue sends exactly the plan's
requests; the estimate and `--dry-run` count and price exactly the same plan. Nothing else
builds a situating request.

How a prefix's unanswered chunks become requests:

- identical chunks (same text and heading trail: an identical question) are asked once, and
  the others get the same answer;
- `group_size` distinct chunks share one request (`group.py` renders it); 1 asks for each
  chunk alone with the per-chunk prompt, Anthropic's method;
- the cache marker is kept only where it pays: one write and n-1 reads must cost less than n
  uncached sends (`worth_caching`), and never below the model's minimum cacheable size;
- a document below the cache minimum whose chunks fit one grouped request costs, beyond the
  document itself, an instruction, a JSON schema and (Anthropic's forced tool use) a tool-use
  system prompt of about 300 tokens per request: on a corpus of small files that is a third of
  every request, so several such documents share one request, a *pack*, filled greedily in
  corpus order up to `group_size` chunks and `pack_tokens` prefix tokens. A cached prefix keeps
  its own requests (they read its cache), and a window of a long document is never packed. A
  pack's usage is shared among its documents by their prefix tokens (`share_usage`), so
  per-document costs still add up to the bill.

When the server's context window is known (`fit.py`), every request is sized to fit it: the
document budget, each prefix's group size and each pack are cut down to what one request
holds, so the queue and the estimate see the same fitted plan.

The order is the queue's: per cached prefix the first request writes the provider's cache and
completes before the prefix's others are sent (`PlannedUnit.requests[0]`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ctxr.config import LLMSettings
from ctxr.enrich.situate.fit import Fit
from ctxr.enrich.situate.group import (
    GROUP_PROMPT_VERSION,
    PACK_PROMPT_VERSION,
    ask_for,
    pack_ask,
)
from ctxr.enrich.situate.prompt import PROMPT_VERSION, SituateRequest, document_part
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.enrich.situate.window import Prefix, plan_prefixes
from ctxr.llm.base import LLM, CacheTTL, CompletionRequest, Usage
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document

# Besides the per-chunk prompt's, the versions a cached context may have been made under:
# a grouped or a packed answer answers the same question, so a chunk is looked up under all.
SHARED_ANSWER_VERSIONS: Final = (GROUP_PROMPT_VERSION, PACK_PROMPT_VERSION)
# What writing and reading a cached prefix cost, in multiples of sending it uncached once
# (Anthropic's prices; OpenAI bills no write and reads at 0.1-0.5x, so the rule holds there too).
CACHE_WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
CACHE_READ_MULTIPLIER = 0.1


@dataclass(frozen=True, slots=True)
class PlanOptions:
    """What shapes the requests of a run (each from a setting, see `from_settings`)."""

    count_tokens: Callable[[str], int]  # the run's token counter (windows, cache minimums)
    prompt_version: str = PROMPT_VERSION
    render_document: Callable[[str], str] = lambda text: text  # the prefix the provider caches
    max_document_tokens: int = 100_000  # longer documents are sent in windows
    group_size: int = 1  # distinct chunks a request
    context_tokens: int = 200  # output budget per context of a grouped request
    pack_tokens: int = 0  # prefix tokens one pack of small documents may hold; 0: never pack
    cache_ttl: CacheTTL = "5m"  # of each cache-marked request
    fit: Fit | None = None  # the server's window, where known: every request fits it

    @classmethod
    def from_settings(
        cls, llm: LLMSettings, encoding: str, fit: Fit | None = None
    ) -> PlanOptions:
        """The options a run with `settings` plans with; the estimate prices the same plan.
        `fit` is the window the server reported; CTXR_LLM_CONTEXT_TOKENS, when set, wins."""
        if llm.llm_context_tokens is not None:
            limit = fit.output_limit if fit is not None else None
            fit = Fit(llm.llm_context_tokens, limit)
        return cls(
            count_tokens=functools.partial(count_tokens, encoding=encoding),
            render_document=document_part,
            max_document_tokens=llm.max_document_tokens,
            group_size=llm.llm_group_size,
            context_tokens=llm.llm_max_output_tokens,
            pack_tokens=llm.llm_pack_tokens,
            # A batch may take longer than five minutes to reach a document's follow-ups.
            cache_ttl="1h" if llm.llm_batch else "5m",
            fit=fit,
        )

    def fitted(self, documents: Sequence[tuple[Document, Sequence[Chunk]]]) -> PlanOptions:
        """These options with the document budget and answer budget cut to the window."""
        if self.fit is None:
            return self
        context_tokens = self.fit.context_tokens(self.context_tokens)
        longest = max((c.token_count for _, chunks in documents for c in chunks), default=0)
        document_tokens = self.fit.document_tokens(
            self.max_document_tokens, context_tokens, longest
        )
        return dataclasses.replace(
            self, max_document_tokens=document_tokens, context_tokens=context_tokens
        )

    def group_size_for(self, prefix: Prefix) -> int:
        """The chunks one request of `prefix` asks about: `group_size`, or fewer to fit."""
        if self.fit is None:
            return self.group_size
        window = prefix.window
        quoted = 0 if window.block is None else max(c.token_count for c in window.chunks) + 16
        return self.fit.group_size(
            self.group_size, prefix.tokens, len(window.chunks), self.context_tokens, quoted
        )

    def ttl(self, request: CompletionRequest) -> CompletionRequest:
        """`request` with this run's cache TTL, where it carries a cache marker."""
        if request.cache and request.cache_ttl != self.cache_ttl:
            return dataclasses.replace(request, cache_ttl=self.cache_ttl)
        return request


@dataclass(frozen=True, slots=True)
class Planned:
    """A prefix's unanswered chunks as they will be asked: `groups` of distinct chunks (the
    identical ones in `copies`, answered with them), and whether caching was declined because
    the prefix has too few requests to earn back its write."""

    prefix: Prefix
    groups: tuple[tuple[Chunk, ...], ...]
    copies: Mapping[str, list[Chunk]]
    declined_cache: bool = False

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return tuple(c for group in self.groups for c in group)

    @property
    def duplicates(self) -> int:
        """Pending chunks that ask no request of their own (identical to a planned one)."""
        return sum(len(copies) for copies in self.copies.values())


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request as it is sent, and the distinct chunks it situates. `ids` name the chunks
    in a grouped or packed answer, in chunk order (none: the per-chunk prompt, whose answer is
    the context itself); `framing` is the answer's JSON per chunk, in output tokens."""

    request: CompletionRequest
    chunks: tuple[Chunk, ...]
    ids: tuple[str, ...]
    framing: int

    @property
    def cache_marked(self) -> bool:
        return self.request.cache


@dataclass(frozen=True, slots=True)
class PlannedUnit:
    """The requests sent under one prefix, or the one request of a pack of small documents.

    `sent` is the prefix they are sent under (a pack's: the first member's, sized as the whole
    pack, so that the rate limiter reserves that many input tokens). When `sent.cache`,
    `requests[0]` writes the provider's cache and completes before the others are sent.
    `member_ids` are a pack's ids per member, in the order of its chunks."""

    members: tuple[Planned, ...]
    sent: Prefix
    requests: tuple[PlannedRequest, ...]
    member_ids: tuple[tuple[str, ...], ...] = ()

    @property
    def is_pack(self) -> bool:
        return len(self.members) > 1


@dataclass(frozen=True, slots=True)
class Answered:
    """A chunk the response cache answers: no request."""

    prefix: Prefix
    chunk: Chunk
    context: str


@dataclass(frozen=True, slots=True)
class RequestPlan:
    """Every prefix of a run, the chunks already answered, and the requests for the rest."""

    prefixes: tuple[Prefix, ...]
    answered: tuple[Answered, ...]
    units: tuple[PlannedUnit, ...]

    @property
    def requests(self) -> tuple[PlannedRequest, ...]:
        """Every request in the order the queue releases them: each cached prefix's
        cache-writing request first, then the rest."""
        first = [u.requests[0] for u in self.units if u.sent.cache]
        rest = [r for u in self.units for r in (u.requests[1:] if u.sent.cache else u.requests)]
        return (*first, *rest)

    @property
    def planned(self) -> Iterator[Planned]:
        return (member for unit in self.units for member in unit.members)


def answered(
    cache: ResponseCache | None, llm: LLM, prompt_version: str, document: Document, chunk: Chunk
) -> str | None:
    """The context paid for before, by any prompt (they answer the same question); None
    where the chunk is to be asked. An entry flagged as no context is not an answer."""
    if cache is None:
        return None
    versions = (prompt_version, *SHARED_ANSWER_VERSIONS)
    hit = cache.answer(llm.provider, llm.model, versions, document.sha256, chunk)
    if hit is None or hit.flagged is not None:
        return None
    return hit.context


def plan_requests(
    documents: Sequence[tuple[Document, Sequence[Chunk]]],
    llm: LLM,
    cache: ResponseCache | None,
    options: PlanOptions,
) -> RequestPlan:
    """The run's requests for `documents`: what `llm` is asked, prefix by prefix, once the
    response cache has answered what it can. Sends nothing, writes nothing. With a known
    window (`options.fit`), every request is sized to fit it."""
    options = options.fitted(documents)
    prefixes = plan_prefixes(
        documents,
        max_tokens=options.max_document_tokens,
        count_tokens=options.count_tokens,
        render_document=options.render_document,
        min_cacheable_tokens=llm.min_cacheable_tokens,
    )
    done: list[Answered] = []
    planned: list[Planned] = []
    for prefix in prefixes:
        pending: list[Chunk] = []
        for chunk in prefix.window.chunks:
            context = answered(cache, llm, options.prompt_version, prefix.document, chunk)
            if context is None:
                pending.append(chunk)
            else:
                done.append(Answered(prefix, chunk, context))
        if pending:
            size = options.group_size_for(prefix)
            planned.append(plan_prefix(prefix, pending, size, options.cache_ttl))
    pack_tokens = options.pack_tokens if options.group_size > 1 else 0
    fits = None
    if options.fit is not None:
        fits = functools.partial(options.fit.pack_fits, context_tokens=options.context_tokens)
    packs = plan_packs(planned, options.group_size, pack_tokens, fits)
    units = [_unit(u, options) for u in packs]
    return RequestPlan(tuple(prefixes), tuple(done), tuple(units))


def _unit(members: tuple[Planned, ...], options: PlanOptions) -> PlannedUnit:
    if len(members) > 1:  # small documents in one request
        pack = pack_ask([(m.prefix.window, m.chunks) for m in members], options.context_tokens)
        packed, chunks = pack.ask(), tuple(c for m in members for c in m.chunks)
        request = PlannedRequest(packed.request, chunks, packed.ids, packed.framing)
        return PlannedUnit(members, pack_prefix(members), (request,), pack.ids)
    [item] = members
    window, prefix = item.prefix.window, item.prefix
    requests = []
    for group in item.groups:
        ask = ask_for(
            window.text,
            window.block is None,
            window.chunks,
            group,
            prefix.cache,
            options.context_tokens,
            options.group_size > 1,
        )
        requests.append(PlannedRequest(options.ttl(ask.request), group, ask.ids, ask.framing))
    return PlannedUnit(members, prefix, tuple(requests))


def alone(prefix: Prefix, chunk: Chunk, options: PlanOptions) -> CompletionRequest:
    """The per-chunk request for `chunk`: how a chunk that a grouped or packed answer missed,
    or got wrong, is asked again."""
    situate = SituateRequest(prefix.window.text, chunk.text, chunk.heading_path, prefix.cache)
    return options.ttl(situate.completion())


def plan_groups(pending: Sequence[Chunk], group_size: int) -> list[tuple[Chunk, ...]]:
    """The requests for one prefix's unanswered chunks, in order: identical chunks (same text and
    heading trail, so an identical question) are asked once, then packed `group_size` a request.
    Each group lists the distinct chunks it asks about; `duplicates_of` maps the rest back."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    distinct = []
    for chunk in pending:
        if (chunk.text, chunk.heading_path) not in seen:
            seen.add((chunk.text, chunk.heading_path))
            distinct.append(chunk)
    size = max(1, group_size)
    return [tuple(distinct[i : i + size]) for i in range(0, len(distinct), size)]


def duplicates_of(pending: Sequence[Chunk]) -> dict[str, list[Chunk]]:
    """For each chunk `plan_groups` keeps, the other pending chunks that ask the same question."""
    first: dict[tuple[str, tuple[str, ...]], Chunk] = {}
    copies: dict[str, list[Chunk]] = {}
    for chunk in pending:
        key = (chunk.text, chunk.heading_path)
        if key in first:
            copies.setdefault(first[key].chunk_id, []).append(chunk)
        else:
            first[key] = chunk
    return copies


def worth_caching(requests: int, ttl: str) -> bool:
    """Whether `requests` requests sharing one prefix cost less with it cached: one write and
    `requests - 1` reads against `requests` uncached sends. One request never pays for its
    write; two pay with a 5-minute entry (1.35x against 2x) but not with a 1-hour one (2.1x)."""
    cached = CACHE_WRITE_MULTIPLIER[ttl] + CACHE_READ_MULTIPLIER * (requests - 1)
    return cached < requests


def plan_prefix(prefix: Prefix, pending: Sequence[Chunk], group_size: int, ttl: str) -> Planned:
    """The requests for `pending`, the unanswered chunks of `prefix`: identical ones asked
    once, `group_size` a request; the cache marker kept only where it pays."""
    groups = tuple(plan_groups(pending, group_size))
    declined = prefix.cache and not worth_caching(len(groups), ttl)
    if declined:
        prefix = dataclasses.replace(prefix, cache=False)
    return Planned(prefix, groups, duplicates_of(pending), declined)


def packable(planned: Planned) -> bool:
    """One uncached request of a whole document: what a pack can hold."""
    prefix = planned.prefix
    return not prefix.cache and prefix.window.block is None and len(planned.groups) == 1


def plan_packs(
    planned: Sequence[Planned],
    max_chunks: int,
    max_tokens: int,
    fits: Callable[[int, int], bool] | None = None,
) -> list[tuple[Planned, ...]]:
    """Every planned prefix once, in order: packable ones filled greedily into packs of at
    most `max_chunks` chunks and `max_tokens` prefix tokens (and, with `fits`, only while
    `fits(prefix tokens, chunks)` says the request fits the window), the rest alone. A pack
    of one is sent as the document's own grouped request."""
    units: list[tuple[Planned, ...]] = []
    pack: list[Planned] = []
    chunks = tokens = 0
    for item in planned:
        if max_chunks < 2 or max_tokens <= 0 or not packable(item):
            units.append((item,))
            continue
        size, length = len(item.chunks), item.prefix.tokens
        full = chunks + size > max_chunks or tokens + length > max_tokens
        if pack and (full or (fits is not None and not fits(tokens + length, chunks + size))):
            units.append(tuple(pack))
            pack, chunks, tokens = [], 0, 0
        pack.append(item)
        chunks, tokens = chunks + size, tokens + length
    if pack:
        units.append(tuple(pack))
    return units


def pack_prefix(members: Sequence[Planned]) -> Prefix:
    """The prefix a pack's request is sent under: the first member's, sized as the whole pack
    (the rate limiter reserves that many input tokens)."""
    lead = members[0].prefix
    return dataclasses.replace(lead, tokens=sum(m.prefix.tokens for m in members), cache=False)


def share_usage(usage: Usage, weights: Sequence[int]) -> list[Usage]:
    """`usage` split in proportion to `weights` (largest remainders), so the shares sum to it
    exactly: a pack's bill divided among its documents."""
    fields = [f.name for f in dataclasses.fields(Usage)]
    weights = list(weights) if sum(weights) > 0 else [1] * len(weights)  # all zero: evenly
    total = sum(weights)
    shares: list[dict[str, int]] = [{} for _ in weights]
    for name in fields:
        amount = getattr(usage, name)
        exact = [amount * w / total for w in weights]
        floors = [int(x) for x in exact]
        order = sorted(range(len(weights)), key=lambda i: floors[i] - exact[i])
        for i in order[: amount - sum(floors)]:
            floors[i] += 1
        for share, value in zip(shares, floors, strict=True):
            share[name] = value
    return [Usage(**share) for share in shares]
