"""The one planner of a run's requests: groups per prefix, then small documents packed together.

A document below the cache minimum whose chunks fit one grouped request is one request; what it
costs beyond the document itself is per request: the instruction, the JSON schema and, with
Anthropic's forced tool use, a tool-use system prompt of about 300 tokens. On a corpus of small
files (the 90 anthropic-codebase files average 1,400 tokens) that is a third of every request,
so several such documents go in one request, a *pack*: each as the per-chunk prompt's document
part with its chunks marked in place, the ids running on across the documents (c1..c9 in the
first, c10.. in the next), one named schema for all of them. Packs are bounded by chunks (the
group size: the answer's length) and by tokens (`pack_tokens`), filled greedily in corpus
order, so files of one folder tend to share a request.

Only documents that would be one uncached request anyway are packed: a cached prefix keeps its
own requests (they read its cache), and a window of a long document is never packed. A pack's
usage is shared among its documents by their prefix tokens (`share_usage`), so per-document
costs still add up to the bill. An id the answer misses, or a context that fails validation,
is asked again alone with the per-chunk prompt, as in a group.

`plan_prefix` and `plan_packs` are what both the queue and the estimate call, so the estimate
prices exactly the requests a run sends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ctxr.enrich.situate.group import (
    GROUP_PROMPT_VERSION,
    NAMED_OVERHEAD_TOKENS,
    Ask,
    duplicates_of,
    fill_slots,
    mark_in_place,
    named_schema,
    output_budget,
    plan_groups,
    worth_caching,
)
from ctxr.enrich.situate.prompt import SITUATE
from ctxr.enrich.situate.window import Prefix
from ctxr.llm.base import CompletionRequest, Usage
from ctxr.prompts import load_template
from ctxr.types import Chunk

PACK_TEMPLATE = load_template("situate_pack")
# The packed prompt's version: its own file and the per-chunk prompt's (whose document part it
# sends for every document), so an edit to either re-makes packed contexts.
PACK_PROMPT_VERSION: Final = f"{SITUATE.version}+{PACK_TEMPLATE.version}"
# Besides the per-chunk prompt's, the versions a cached context may have been made under:
# a grouped or a packed answer answers the same question, so the queue and the estimate both
# look a chunk up under all of them.
SHARED_ANSWER_VERSIONS: Final = (GROUP_PROMPT_VERSION, PACK_PROMPT_VERSION)


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
    planned: Sequence[Planned], max_chunks: int, max_tokens: int
) -> list[tuple[Planned, ...]]:
    """Every planned prefix once, in order: packable ones filled greedily into packs of at
    most `max_chunks` chunks and `max_tokens` prefix tokens, the rest alone. A pack of one is
    sent as the document's own grouped request."""
    units: list[tuple[Planned, ...]] = []
    pack: list[Planned] = []
    chunks = tokens = 0
    for item in planned:
        if max_chunks < 2 or max_tokens <= 0 or not packable(item):
            units.append((item,))
            continue
        size, length = len(item.chunks), item.prefix.tokens
        if pack and (chunks + size > max_chunks or tokens + length > max_tokens):
            units.append(tuple(pack))
            pack, chunks, tokens = [], 0, 0
        pack.append(item)
        chunks, tokens = chunks + size, tokens + length
    if pack:
        units.append(tuple(pack))
    return units


@dataclass(frozen=True, slots=True)
class PackAsk:
    """One request for a pack, and each member's ids in the order of its chunks."""

    request: CompletionRequest
    ids: tuple[tuple[str, ...], ...]

    @property
    def all_ids(self) -> tuple[str, ...]:
        return tuple(i for member in self.ids for i in member)

    def ask(self) -> Ask:
        return Ask(self.request, self.all_ids, NAMED_OVERHEAD_TOKENS)


def pack_ask(members: Sequence[Planned], context_tokens: int) -> PackAsk:
    """The request that situates every member's chunks: each document marked in place (all its
    chunks, so the ids are stable whichever are asked), ids running on across documents."""
    parts: list[str] = []
    ids: list[tuple[str, ...]] = []
    start = 1
    for member in members:
        window = member.prefix.window
        marked, by_chunk = mark_in_place(window.text, window.chunks, start=start)
        parts.append(SITUATE.document_part(marked))
        ids.append(tuple(by_chunk[c.chunk_id] for c in member.chunks))
        start += len(window.chunks)
    asked = [i for member in ids for i in member]
    values = {"DOCUMENTS": str(len(members)), "COUNT": str(len(asked)), "IDS": ", ".join(asked)}
    request = CompletionRequest(
        instruction=fill_slots(PACK_TEMPLATE.body, values),
        prefix="\n".join(parts),
        cache=False,
        json_schema=named_schema(asked),
        max_output_tokens=output_budget(len(asked), context_tokens),
    )
    return PackAsk(request, tuple(ids))


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
