"""Grouped and packed requests: the contexts of several chunks in one request, and the answer.

Below a model's minimum cacheable size every request re-sends its whole document uncached, so
asking for n chunks at once costs about 1/n as much; above it, grouping still saves the cache
read and the instruction per chunk. The answer is JSON under a schema (Anthropic: forced tool
use; OpenAI: strict `response_format`); an id missing from the answer, or a context that fails
validation, is asked again alone (the per-chunk prompt), and only then falls back to the
outline, flagged.

Quoting chunks after their document would send their text twice, so a whole document goes with
its chunks marked in place (``[[c1]]`` before a chunk's first character, ``[[/c1]]`` after its
last): every chunk of the document, whichever a request asks about, so that all its requests
share one cacheable prefix; the instruction names the ids to situate. Providers put the schema
*before* the document in the cached prefix, so a cached document's requests share one fixed
schema (``{"contexts": [{"id", "context"}]}``, not naming chunks); an uncached one's schema
names every chunk asked about (one required property per id, ``{"c5": "..."}``), which also
costs fewer output tokens. Only a window of a document too long to send whole has its chunks
quoted after it (`group_request`), after the window's byte-identical prefix.

A *pack* (`pack_ask`) is one request for the chunks of several small documents: each as the
per-chunk prompt's document part with its chunks marked in place, the ids running on across the
documents (c1..c9 in the first, c10.. in the next), one named schema for all of them.

This module renders requests and reads answers; which chunks go in which request is the
planner's (`plan.py`), and nothing else builds a situating request.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ctxr.enrich.situate.prompt import SITUATE, SituateRequest, heading_trail
from ctxr.enrich.situate.window import Window
from ctxr.llm.base import CompletionRequest
from ctxr.prompts import load_template
from ctxr.types import Chunk

GROUP_TEMPLATE = load_template("situate_group")
INLINE_TEMPLATE = load_template("situate_inline")
PACK_TEMPLATE = load_template("situate_pack")
# The grouped prompts' version: their own files and the per-chunk prompt's (whose document part
# they send), so an edit to any of them re-makes grouped contexts.
GROUP_PROMPT_VERSION: Final = (
    f"{SITUATE.version}+{GROUP_TEMPLATE.version}+{INLINE_TEMPLATE.version}"
)
# The packed prompt's version: its own file and the per-chunk prompt's (whose document part it
# sends for every document), so an edit to either re-makes packed contexts.
PACK_PROMPT_VERSION: Final = f"{SITUATE.version}+{PACK_TEMPLATE.version}"
# JSON framing per answered chunk, in output tokens: {"id": "c12", "context": "..."}, in the
# list form; "c12": "...", in the named form of chunks marked in place.
ANSWER_OVERHEAD_TOKENS: Final = 12
NAMED_OVERHEAD_TOKENS: Final = 6
ANSWER_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "contexts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "context": {"type": "string"}},
                "required": ["id", "context"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["contexts"],
    "additionalProperties": False,
}
# The most one grouped request may ask to write: the smallest maximum output among the models
# people use here (Claude 3.5 Haiku and many OpenAI-compatible servers: 8,192), and under the
# 10,000 output tokens a minute of Anthropic's first tier, which counts `max_tokens` up front.
MAX_GROUP_OUTPUT_TOKENS: Final = 8192
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def fill_slots(body: str, values: Mapping[str, str]) -> str:
    """`body` with each ``{{NAME}}`` of `values` replaced, in one pass: a chunk that itself
    contains "{{IDS}}" is inserted verbatim, never substituted again."""
    names = "|".join(re.escape(name) for name in values)
    return re.sub(r"\{\{(" + names + r")\}\}", lambda m: values[m.group(1)], body)


def named_schema(ids: Sequence[str]) -> dict[str, Any]:
    """An object with one required string property per chunk id: a schema-following model
    answers every chunk it was asked about."""
    return {
        "type": "object",
        "properties": {i: {"type": "string"} for i in ids},
        "required": list(ids),
        "additionalProperties": False,
    }


def chunk_ids(count: int) -> list[str]:
    return [f"c{i}" for i in range(1, count + 1)]


@dataclass(frozen=True, slots=True)
class Ask:
    """One request and the ids its answer gives the group's chunks under, in group order
    (none for a chunk asked alone, whose answer is the context itself)."""

    request: CompletionRequest
    ids: tuple[str, ...]
    framing: int  # output tokens of JSON per chunk, for the estimate


def ask_for(
    text: str,
    whole: bool,
    window_chunks: Sequence[Chunk],
    group: Sequence[Chunk],
    cache: bool,
    context_tokens: int,
    grouped: bool = True,
) -> Ask:
    """The request for `group`, chunks of a prefix whose text is `text` and which holds
    `window_chunks` (`whole`: the document itself, not a window of it). Not `grouped` (one
    chunk a request, Anthropic's method): the per-chunk prompt. Grouped, every request of a
    prefix has one form, a last group of one chunk included, so that all of them read the one
    cached prefix (schema and all): chunks of a whole document marked in place, chunks of a
    window quoted after it."""
    if not grouped:
        chunk = group[0]
        alone = SituateRequest(text, chunk.text, chunk.heading_path, cache).completion()
        return Ask(alone, (), 0)  # answered in plain text, not under ids
    if whole:
        return _marked(text, window_chunks, group, cache, context_tokens)
    ids = tuple(chunk_ids(len(group)))
    return Ask(group_request(text, group, cache, context_tokens), ids, ANSWER_OVERHEAD_TOKENS)


# Every group of a document sends the same marked prefix: built once per window, not once per
# request (a file of 2,000 chunks is 125 groups, each would copy and re-mark the whole file).
@functools.lru_cache(maxsize=32)
def marked_prefix(document: str, chunks: tuple[Chunk, ...]) -> tuple[str, Mapping[str, str]]:
    """The prompt prefix of `document` with its `chunks` marked in place, and the chunk ids."""
    marked, ids = mark_in_place(document, chunks)
    return SITUATE.document_part(marked), ids


def mark_in_place(
    document: str, chunks: Sequence[Chunk], start: int = 1
) -> tuple[str, dict[str, str]]:
    """`document` with every chunk between ``[[cN]]`` and ``[[/cN]]`` (N its place among
    `chunks`, counted from `start`), and each chunk's id by chunk id. The same chunks give the
    same bytes, whichever of them a request asks about, so the marked document is one
    cacheable prefix."""
    ids = {c.chunk_id: f"c{n}" for n, c in enumerate(chunks, start=start)}
    marks: list[tuple[int, int, str]] = []  # (offset, closes before opens, mark)
    for chunk in chunks:
        marks.append((chunk.start, 1, f"[[{ids[chunk.chunk_id]}]]"))
        marks.append((chunk.end, 0, f"[[/{ids[chunk.chunk_id]}]]"))
    pieces: list[str] = []
    at = 0
    for offset, _, mark in sorted(marks):
        pieces.extend((document[at:offset], mark))
        at = offset
    pieces.append(document[at:])
    return "".join(pieces), ids


def _marked(
    document: str,
    window_chunks: Sequence[Chunk],
    group: Sequence[Chunk],
    cache: bool,
    context_tokens: int,
) -> Ask:
    prefix, by_chunk = marked_prefix(document, tuple(window_chunks))
    ids = tuple(by_chunk[c.chunk_id] for c in group)
    # No heading trail per chunk: a chunk marked in place sits under its headings (or its
    # enclosing definitions) in the very text the model reads, and the trails were 5% of the
    # input of a grouped run of the 90 code files.
    values = {"COUNT": str(len(group)), "IDS": ", ".join(ids)}
    instruction = fill_slots(INLINE_TEMPLATE.body, values)
    # A cached prefix needs one schema for every request that reads it (the providers put it
    # before the document); an uncached one can name exactly the chunks asked about.
    schema = ANSWER_SCHEMA if cache else named_schema(ids)
    request = CompletionRequest(
        instruction=instruction,
        prefix=prefix,
        cache=cache,
        json_schema=schema,
        max_output_tokens=output_budget(len(group), context_tokens),
    )
    return Ask(request, ids, ANSWER_OVERHEAD_TOKENS if cache else NAMED_OVERHEAD_TOKENS)


def output_budget(count: int, context_tokens: int) -> int:
    """`max_tokens` of a grouped request: each context's budget and its framing, at most
    `MAX_GROUP_OUTPUT_TOKENS`, so that 64 chunks still get 115 tokens each (a context is 50-100)
    and an answer cut short keeps the contexts it finished (`parse_answers`)."""
    wanted = count * (context_tokens + ANSWER_OVERHEAD_TOKENS) + 16  # the larger framing
    return min(wanted, MAX_GROUP_OUTPUT_TOKENS)


def group_request(
    document: str, chunks: Sequence[Chunk], cache: bool, context_tokens: int
) -> CompletionRequest:
    """The request for `chunks` of `document` (the window text, as in `SituateRequest`)."""
    rendered = []
    for chunk_id, chunk in zip(chunk_ids(len(chunks)), chunks, strict=True):
        trail = heading_trail(chunk.heading_path)
        line = f"\nChunk {chunk_id} sits under: {trail}" if trail else ""
        rendered.append(f'<chunk id="{chunk_id}">\n{chunk.text}\n</chunk>{line}')
    values = {"COUNT": str(len(chunks)), "CHUNKS": "\n".join(rendered)}
    instruction = fill_slots(GROUP_TEMPLATE.body, values)
    return CompletionRequest(
        instruction=instruction,
        prefix=SITUATE.document_part(document),
        cache=cache,
        json_schema=ANSWER_SCHEMA,
        max_output_tokens=output_budget(len(chunks), context_tokens),
    )


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


def pack_ask(members: Sequence[tuple[Window, Sequence[Chunk]]], context_tokens: int) -> PackAsk:
    """The request that situates the given chunks of each member's window: each document
    marked in place (all its chunks, so the ids are stable whichever are asked), ids running
    on across documents."""
    parts: list[str] = []
    ids: list[tuple[str, ...]] = []
    start = 1
    for window, asked_chunks in members:
        marked, by_chunk = mark_in_place(window.text, window.chunks, start=start)
        parts.append(SITUATE.document_part(marked))
        ids.append(tuple(by_chunk[c.chunk_id] for c in asked_chunks))
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


def parse_answers(text: str, ids: Sequence[str]) -> dict[str, str]:
    """Contexts by chunk id from a grouped answer, in either form (``{"contexts": [...]}`` or
    ``{"c1": ...}``); ids not asked about are dropped, and an answer that is not the JSON asked
    for gives {} (every chunk is then asked again alone)."""
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1).strip()
    wanted = set(ids)
    try:
        data = json.loads(body)
    except ValueError:
        return _salvage(body, wanted)
    if isinstance(data, dict) and "contexts" not in data:  # {"c1": "...", ...}
        named = {k: v.strip() for k, v in data.items() if k in wanted and isinstance(v, str)}
        return named
    items = data.get("contexts") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return {}
    return _listed(items, wanted, {})


def _listed(items: Iterable[object], wanted: set[str], answers: dict[str, str]) -> dict[str, str]:
    """`answers` with each ``{"id": ..., "context": ...}`` item of `items` asked about and not
    answered yet added."""
    for item in items:
        if not isinstance(item, dict):
            continue
        key, context = item.get("id"), item.get("context")
        if isinstance(key, str) and key in wanted and isinstance(context, str):
            answers.setdefault(key, context.strip())
    return answers


_NAMED_PAIR = re.compile(r'"(c\d+)"\s*:\s*("(?:[^"\\]|\\.)*")')
_ITEM = re.compile(r"\{[^{}]*\}")


def _salvage(body: str, wanted: set[str]) -> dict[str, str]:
    """The contexts an answer cut short (at `max_tokens`) finished: every complete
    ``"cN": "..."`` pair, or every complete ``{"id": ..., "context": ...}`` item; the rest are
    then asked again alone instead of the whole group."""
    answers: dict[str, str] = {}
    for key, quoted in _NAMED_PAIR.findall(body):
        if key in wanted and key not in answers:
            answers[key] = str(json.loads(quoted)).strip()
    return _listed(_complete_items(body), wanted, answers)


def _complete_items(body: str) -> Iterator[object]:
    for raw in _ITEM.findall(body):
        try:
            yield json.loads(raw)
        except ValueError:
            continue
