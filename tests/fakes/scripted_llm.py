"""`ScriptedLLM`: a protocol-level fake LLM (no HTTP) for testing the situating queue.

It implements `ctxr.llm.base.LLM` structurally and emulates what matters to the queue:

- a model reading the situating prompt: it finds the document and the chunk between their
  ``<document>`` and ``<chunk>`` tags, as a real model would, and records them as a
  `SituateRequest` (``request.document``, ``request.chunk``, ``request.cache``);
- a provider's prompt cache: a document prefix (``request.document``) of at least
  ``min_cacheable_tokens`` tokens, sent with ``cache=True``, is WRITTEN by a request that finds
  it absent and becomes readable only after that request RETURNS, so concurrent first requests
  all write (the waste the queue must avoid); later requests read it;
- usage as a provider bills it (``input_tokens`` excludes cached tokens);
- latency (``await asyncio.sleep``), and faults: a random share of retryable errors, scripted
  outcomes per chunk text (a list consumed one per request), and chunks that always fail.

Everything it saw is recorded (`calls`, `writes`, `reads`, `max_in_flight`) for assertions.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ctxr.enrich.situate.prompt import SituateRequest
from ctxr.errors import ProviderError
from ctxr.llm.base import Completion, CompletionRequest, Usage

Outcome = str | ProviderError  # a response text, or an error to raise


_DOCUMENT = re.compile(r"<document>\n(.*)\n</document>", re.S)
_CHUNK = re.compile(r"<chunk>\n(.*)\n</chunk>", re.S)
_TRAIL = re.compile(r"^The chunk sits under: (.*)$", re.M)


def read_prompt(request: CompletionRequest) -> SituateRequest:
    """What the situating prompt asks about, read back from its tags."""
    document, chunk = _DOCUMENT.search(request.prefix), _CHUNK.search(request.instruction)
    assert document and chunk, "not a situating prompt"
    trail = _TRAIL.search(request.instruction[chunk.end() :])
    path = tuple(trail.group(1).split(" > ")) if trail else ()
    return SituateRequest(document.group(1), chunk.group(1), path, request.cache)


def words(text: str) -> int:
    """The default token counter: whitespace-separated words (fast and predictable)."""
    return len(text.split())


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def default_answer(request: SituateRequest) -> str:
    return f"This chunk ({_sha(request.chunk)}) situates part of document {_sha(request.document)}."


@dataclass
class Call:
    request: SituateRequest
    started: float
    ended: float | None = None
    outcome: str = ""  # "write" | "read" | "uncached" | "error: ..."


@dataclass
class ScriptedLLM:
    provider: str = "scripted"
    model: str = "scripted-haiku"
    min_cacheable_tokens: int = 1024
    latency: float = 0.01
    count_tokens: Callable[[str], int] = words
    answer: Callable[[SituateRequest], str] = default_answer
    fault_rate: float = 0.0  # share of requests failing with a retryable 529
    fault_retry_after: float | None = None
    seed: int = 0
    script: dict[str, list[Outcome]] = field(default_factory=dict)  # chunk text -> outcomes
    always_fail: dict[str, ProviderError] = field(default_factory=dict)  # chunk text -> error
    headers: Mapping[str, str] | Callable[[], Mapping[str, str]] = field(default_factory=dict)
    output_tokens: int = 20

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._readable: set[str] = set()
        self.calls: list[Call] = []
        self.writes: Counter[str] = Counter()  # document prefix -> cache writes
        self.reads: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.completed = 0  # requests that returned a completion
        self.closed = False

    # -- the LLM protocol ------------------------------------------------------------------

    def request_body(self, request: CompletionRequest) -> dict[str, object]:
        return {"prefix": request.prefix, "instruction": request.instruction}

    async def complete(self, completion: CompletionRequest) -> Completion:
        request = read_prompt(completion)
        call = Call(request, time.monotonic())
        self.calls.append(call)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request, call)
        finally:
            self.in_flight -= 1
            call.ended = time.monotonic()

    async def aclose(self) -> None:
        self.closed = True

    # -- emulation ---------------------------------------------------------------------------

    def _outcome(self, request: SituateRequest) -> Outcome | None:
        if request.chunk in self.always_fail:
            return self.always_fail[request.chunk]
        queued = self.script.get(request.chunk)
        if queued:
            return queued.pop(0)
        if self.fault_rate and self._random.random() < self.fault_rate:
            return ProviderError(
                "overloaded (injected)",
                retryable=True,
                retry_after=self.fault_retry_after,
                status=529,
            )
        return None

    async def _answer(self, request: SituateRequest, call: Call) -> Completion:
        outcome = self._outcome(request)
        doc_tokens = self.count_tokens(request.document)
        rest = self.count_tokens(request.chunk) + 50  # the instruction, a fixed 50 tokens
        cacheable = request.cache and doc_tokens >= self.min_cacheable_tokens
        readable = cacheable and request.document in self._readable  # decided on arrival
        await asyncio.sleep(self.latency)
        if isinstance(outcome, ProviderError):
            call.outcome = f"error: {outcome}"
            raise outcome
        text = outcome if outcome is not None else self.answer(request)
        if not cacheable:
            usage = Usage(input_tokens=doc_tokens + rest, output_tokens=self.output_tokens)
            call.outcome = "uncached"
        elif readable:
            usage = Usage(rest, 0, doc_tokens, self.output_tokens)
            self.reads[request.document] += 1
            call.outcome = "read"
        else:
            usage = Usage(rest, doc_tokens, 0, self.output_tokens)
            self.writes[request.document] += 1
            self._readable.add(request.document)  # readable now that the writer returns
            call.outcome = "write"
        self.completed += 1
        headers = self.headers() if callable(self.headers) else self.headers
        return Completion(text, usage, self.model, dict(headers))

    # -- assertions helpers ------------------------------------------------------------------

    def requests_for(self, chunk_text: str) -> list[Call]:
        return [c for c in self.calls if c.request.chunk == chunk_text]

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())
