"""Grouped and packed requests of the situating queue: one answer, many chunks' contexts.

`GroupedAsks` is the part of the queue's run (`queue._Run`) that sends a group of one
prefix's chunks (`group.py`) or a pack of small documents (`pack.py`) in one request, maps the
JSON answer back by id, validates every context, caches what passes under the prompt that made
it, and asks the rest again alone with the per-chunk prompt (the core's `situate`). A server
that refuses JSON schemas (a 400) is asked in words from then on.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ctxr.enrich.situate.batch import BatchSender
from ctxr.enrich.situate.group import GROUP_PROMPT_VERSION, ask_for, parse_answers
from ctxr.enrich.situate.ledger import Ledger
from ctxr.enrich.situate.pack import (
    PACK_PROMPT_VERSION,
    Planned,
    pack_ask,
    pack_prefix,
    share_usage,
)
from ctxr.enrich.situate.response_cache import ResponseCache
from ctxr.enrich.situate.results import SituateResult
from ctxr.enrich.situate.sender import PROMPT_OVERHEAD_TOKENS, Sender
from ctxr.enrich.situate.validate import Verdict
from ctxr.enrich.situate.window import Prefix
from ctxr.errors import ProviderError
from ctxr.llm.base import Completion, CompletionRequest
from ctxr.llm.ratelimit import Priority
from ctxr.types import Chunk, Document


class GroupedAsks(abc.ABC):
    """Grouped and packed requests; the per-chunk core is the subclass's."""

    cache: ResponseCache | None
    sender: Sender | BatchSender
    ledger: Ledger
    count_tokens: Callable[[str], int]
    context_tokens: int
    plain_json: bool

    @abc.abstractmethod
    async def situate(self, prefix: Prefix, chunk: Chunk, priority: Priority) -> SituateResult:
        """One chunk asked alone (the per-chunk prompt), validated, falling back if need be."""

    @abc.abstractmethod
    def finish(self, document: Document, result: SituateResult) -> None: ...

    @abc.abstractmethod
    def _failed(self, document: Document, chunk: Chunk, exc: BaseException) -> SituateResult: ...

    @abc.abstractmethod
    def _verdict(self, document: Document, chunk: Chunk, text: str) -> Verdict | None: ...

    @abc.abstractmethod
    def _key(self, document: Document, chunk: Chunk, version: str | None = None) -> str: ...

    @abc.abstractmethod
    def _ttl(self, request: CompletionRequest) -> CompletionRequest: ...

    def finish_planned(self, planned: Planned, results: Sequence[SituateResult]) -> None:
        """Each chunk's result, and the same result for its identical copies."""
        for chunk, result in zip(planned.chunks, results, strict=True):
            self.finish(planned.prefix.document, result)
            for copy in planned.copies.get(chunk.chunk_id, ()):
                self.finish(
                    planned.prefix.document, dataclasses.replace(result, chunk_id=copy.chunk_id)
                )

    async def situate_group(
        self, prefix: Prefix, group: tuple[Chunk, ...], priority: Priority
    ) -> list[SituateResult]:
        """One request for `group`; a chunk the answer misses or gets wrong is asked alone."""
        document = prefix.document
        window = prefix.window
        ask = ask_for(
            window.text,
            window.block is None,
            window.chunks,
            group,
            prefix.cache,
            self.context_tokens,
        )
        try:
            completion = await self._send_json(prefix, self._ttl(ask.request), group, priority)
        except Exception as exc:  # any failure: these chunks fall back, the run goes on
            return [self._failed(document, c, exc) for c in group]
        self.ledger.record_usage(document.doc_id, completion.usage)
        answers = parse_answers(completion.text, ask.ids)
        return await self._accept(prefix, group, ask.ids, answers, GROUP_PROMPT_VERSION, priority)

    async def _accept(
        self,
        prefix: Prefix,
        chunks: Sequence[Chunk],
        ids: Sequence[str],
        answers: Mapping[str, str],
        version: str,
        priority: Priority,
    ) -> list[SituateResult]:
        """Each chunk's context from a grouped or packed answer, cached under `version`; a
        chunk the answer misses or gets wrong is asked again alone (the per-chunk prompt)."""
        document = prefix.document
        results: dict[str, SituateResult] = {}
        again: list[Chunk] = []
        for chunk_id, chunk in zip(ids, chunks, strict=True):
            text = answers.get(chunk_id)
            verdict = None if text is None else self._verdict(document, chunk, text)
            if text is not None and verdict is None:
                if self.cache is not None:
                    self.cache.put(self._key(document, chunk, version), text)
                results[chunk.chunk_id] = SituateResult(chunk.chunk_id, text, "llm")
                continue
            why = "missing from the grouped answer" if verdict is None else verdict.reason
            self.ledger.record_retry(chunk.chunk_id, f"{why}; asked alone")
            again.append(chunk)
        alone = await asyncio.gather(*(self.situate(prefix, c, priority) for c in again))
        results.update((r.chunk_id, r) for r in alone)
        return [results[c.chunk_id] for c in chunks]

    async def situate_pack(self, members: tuple[Planned, ...]) -> None:
        """One request for the chunks of several small documents (`pack.py`); usage shared
        among them by size, each chunk checked and, where it fails, asked again alone."""
        ask = pack_ask(members, self.context_tokens)
        chunks = [c for m in members for c in m.chunks]
        priority: Priority = (1, members[0].prefix.order)
        try:
            sent = pack_prefix(members)
            completion = await self._send_json(sent, ask.request, chunks, priority)
        except Exception as exc:  # any failure: these chunks fall back, the run goes on
            for member in members:
                self.finish_planned(member, [self._failed(member.prefix.document, c, exc)
                                          for c in member.chunks])  # fmt: skip
            return
        weights = [m.prefix.tokens for m in members]
        for member, usage in zip(members, share_usage(completion.usage, weights), strict=True):
            self.ledger.record_usage(member.prefix.document.doc_id, usage)
        answers = parse_answers(completion.text, ask.all_ids)

        async def settle(member: Planned, ids: tuple[str, ...]) -> None:
            results = await self._accept(
                member.prefix, member.chunks, ids, answers, PACK_PROMPT_VERSION, priority
            )
            self.finish_planned(member, results)

        async with asyncio.TaskGroup() as tasks:
            for member, ids in zip(members, ask.ids, strict=True):
                tasks.create_task(settle(member, ids))

    async def _send_json(
        self,
        prefix: Prefix,
        request: CompletionRequest,
        chunks: Sequence[Chunk],
        priority: Priority,
    ) -> Completion:
        """`request` for `chunks` (retries are recorded against the first). An OpenAI-compatible
        server without structured outputs answers a schema with a 400: the prompt itself asks
        for the JSON, so the request goes again without it, and so does every later one."""
        tokens_in = sum(self.count_tokens(c.text) for c in chunks) + PROMPT_OVERHEAD_TOKENS
        while True:
            sent = dataclasses.replace(request, json_schema=None) if self.plain_json else request
            try:
                return await self.sender.send(prefix, sent, chunks[0], priority, tokens_in)
            except ProviderError as exc:
                if exc.status != 400 or sent.json_schema is None:
                    raise
                self.plain_json = True
