"""Grouped situating: the contexts of several chunks of one document in one request.

Below a model's minimum cacheable size every request re-sends its whole document uncached, so
asking for n chunks at once costs about 1/n as much; above it, grouping still saves the cache
read and the instruction per chunk. The request is the document part of the situating prompt
(byte-identical to the per-chunk prompt's, so both share one cached prefix), then the chunks,
each with an id (``c1``, ``c2``, ...); the answer is JSON, ``{"contexts": [{"id", "context"}]}``.

The schema is the same for every group, and does not name the chunks: providers put the tool
definitions (Anthropic) or the response format (OpenAI) *before* the document in the cached
prefix, so a schema that named each group's ids would give every group its own prefix, and each
would miss the document's cache. The instruction names the ids; an id missing from the answer,
or a context that fails validation, is asked again alone (the per-chunk prompt), and only then
falls back to the outline, flagged.

A document below the model's minimum cacheable size has no cache to share, so quoting its
chunks after it would send their text twice: there the chunks are marked in place instead
(``[[c1]]`` before a chunk's first character, ``[[/c1]]`` after its last) and the document is
sent once, marks and all (`inline_request`). A cacheable document keeps its byte-identical
prefix and its chunks are quoted after it.

`plan_groups` and `request_for` are the one planner of requests: the queue sends what they
return, and the estimate prices exactly that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxr.enrich.situate.prompt import SITUATE, SituateRequest, heading_trail
from ctxr.llm.base import CompletionRequest
from ctxr.prompts import load_template
from ctxr.types import Chunk

GROUP_TEMPLATE = load_template("situate_group")
INLINE_TEMPLATE = load_template("situate_inline")
# The grouped prompts' version: their own files and the per-chunk prompt's (whose document part
# they send), so an edit to any of them re-makes grouped contexts.
GROUP_PROMPT_VERSION: Final = (
    f"{SITUATE.version}+{GROUP_TEMPLATE.version}+{INLINE_TEMPLATE.version}"
)
# JSON framing per answered chunk ({"id": "c12", "context": "..."}, ), in output tokens.
ANSWER_OVERHEAD_TOKENS: Final = 12
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
_SLOTS = re.compile(r"\{\{(COUNT|CHUNKS)\}\}")
_INLINE_SLOTS = re.compile(r"\{\{(COUNT|IDS)\}\}")
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)


def chunk_ids(count: int) -> list[str]:
    return [f"c{i}" for i in range(1, count + 1)]


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


def request_for(
    text: str, whole: bool, group: Sequence[Chunk], cache: bool, context_tokens: int
) -> CompletionRequest:
    """The request for `group` of a prefix whose text is `text` (`whole`: the document itself,
    not a window): one chunk alone; several quoted after a cacheable prefix; several marked in
    place in a document that is not cached."""
    if len(group) == 1:
        chunk = group[0]
        return SituateRequest(text, chunk.text, chunk.heading_path, cache).completion()
    if whole and not cache:
        return inline_request(text, group, context_tokens)
    return group_request(text, group, cache, context_tokens)


def inline_request(
    document: str, chunks: Sequence[Chunk], context_tokens: int
) -> CompletionRequest:
    """`document` sent once with `chunks` marked in place (offsets index `document`)."""
    marks: list[tuple[int, int, str]] = []  # (offset, order at that offset, mark)
    for chunk_id, chunk in zip(chunk_ids(len(chunks)), chunks, strict=True):
        marks.append((chunk.start, 1, f"[[{chunk_id}]]"))
        marks.append((chunk.end, 0, f"[[/{chunk_id}]]"))  # closes before one opens there
    pieces: list[str] = []
    at = 0
    for offset, _, mark in sorted(marks):
        pieces.extend((document[at:offset], mark))
        at = offset
    pieces.append(document[at:])
    trails = [
        f"Chunk {chunk_id} sits under: {heading_trail(c.heading_path)}"
        for chunk_id, c in zip(chunk_ids(len(chunks)), chunks, strict=True)
        if heading_trail(c.heading_path)
    ]
    values = {"COUNT": str(len(chunks)), "IDS": ", ".join(chunk_ids(len(chunks)))}
    instruction = _INLINE_SLOTS.sub(lambda m: values[m.group(1)], INLINE_TEMPLATE.body)
    if trails:
        instruction = "\n".join(trails) + "\n" + instruction
    return CompletionRequest(
        instruction=instruction,
        prefix=SITUATE.document_part("".join(pieces)),
        cache=False,
        json_schema=ANSWER_SCHEMA,
        max_output_tokens=_output_budget(len(chunks), context_tokens),
    )


def _output_budget(count: int, context_tokens: int) -> int:
    return count * (context_tokens + ANSWER_OVERHEAD_TOKENS) + 16


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
    instruction = _SLOTS.sub(lambda m: values[m.group(1)], GROUP_TEMPLATE.body)
    return CompletionRequest(
        instruction=instruction,
        prefix=SITUATE.document_part(document),
        cache=cache,
        json_schema=ANSWER_SCHEMA,
        max_output_tokens=_output_budget(len(chunks), context_tokens),
    )


def parse_answers(text: str, count: int) -> dict[str, str]:
    """Contexts by chunk id from a grouped answer; ids not asked about are dropped, and an
    answer that is not the JSON asked for gives {} (every chunk is then asked again alone)."""
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    items = data.get("contexts") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return {}
    wanted = set(chunk_ids(count))
    answers: dict[str, str] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        key, context = item.get("id"), item.get("context")
        if isinstance(key, str) and key in wanted and isinstance(context, str):
            answers.setdefault(key, context.strip())
    return answers
