"""Prompt-cache emulation for the fake LLM server, one class per provider.

Both follow the same two-step life: `plan` at a request's arrival decides what is read and
what is written, `commit` when its response completes makes the writes readable. A request
that arrives while another one's write is still in flight therefore writes again, exactly the
duplicate write that Anthropic's reference run paid for and our queue must avoid.

Not thread-safe on their own: the server calls them under its lock.
"""

from __future__ import annotations

import functools
import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ctxr.tokens import get_encoding

from .llm_wire import (
    OPENAI_CACHE_INCREMENT,
    OPENAI_MIN_CACHEABLE,
    BadRequest,
    PromptPart,
    count_text_tokens,
    encoding_for_model,
    prefix_hash,
)

MAX_BREAKPOINTS = 4  # the Messages API rejects more cache_control blocks than this


@dataclass(frozen=True, slots=True)
class CacheWrite:
    prefix_hash: str
    tokens: int  # length of the whole prefix
    ttl_s: float


@dataclass(slots=True)
class AnthropicPlan:
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m: int = 0
    ephemeral_1h: int = 0
    read_hash: str | None = None
    writes: list[CacheWrite] = field(default_factory=list)

    def usage(self, output_tokens: int) -> dict[str, object]:
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m,
                "ephemeral_1h_input_tokens": self.ephemeral_1h,
            },
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }


class AnthropicPromptCache:
    """Explicit breakpoints: a block with ``cache_control`` caches every part up to and
    including it. The longest readable prefix ending at or before the last breakpoint is read
    (the real API looks back up to 20 blocks; any earlier block boundary is checked here);
    every breakpoint after it is written; parts after the last breakpoint are plain input.
    Breakpoints whose prefix is below the model's minimum are ignored."""

    def __init__(self, ttl_s: float, ttl_1h_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s, self.ttl_1h_s, self._clock = ttl_s, ttl_1h_s, clock
        self._entries: dict[str, tuple[float, float]] = {}  # hash -> (expires at, ttl)

    def clear(self) -> None:
        self._entries.clear()

    def readable(self, digest: str) -> bool:
        entry = self._entries.get(digest)
        return entry is not None and entry[0] > self._clock()

    def plan(self, model: str, parts: Sequence[PromptPart], min_tokens: int) -> AnthropicPlan:
        counts = [count_text_tokens(p.text, model) + p.hidden_tokens for p in parts]
        total = sum(counts)
        marks = [i for i, p in enumerate(parts) if p.breakpoint]
        if len(marks) > MAX_BREAKPOINTS:
            raise BadRequest(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        cumulative = [sum(counts[: i + 1]) for i in range(len(parts))]
        marks = [i for i in marks if cumulative[i] >= min_tokens]
        plan = AnthropicPlan(input_tokens=total)
        if not marks:
            return plan
        now = self._clock()
        read_at = -1
        for i in range(marks[-1], -1, -1):
            digest = prefix_hash(model, parts[: i + 1])
            if cumulative[i] >= min_tokens and self.readable(digest):
                read_at, plan.read_hash = i, digest
                ttl = self._entries[digest][1]
                self._entries[digest] = (now + ttl, ttl)  # a read refreshes the TTL
                break
        done = cumulative[read_at] if read_at >= 0 else 0
        plan.cache_read_input_tokens = done
        for i in (m for m in marks if m > read_at):
            ttl = self.ttl_1h_s if parts[i].ttl == "1h" else self.ttl_s
            written = cumulative[i] - done
            if parts[i].ttl == "1h":
                plan.ephemeral_1h += written
            else:
                plan.ephemeral_5m += written
            plan.cache_creation_input_tokens += written
            plan.writes.append(CacheWrite(prefix_hash(model, parts[: i + 1]), cumulative[i], ttl))
            done = cumulative[i]
        plan.input_tokens = total - done
        return plan

    def commit(self, plan: AnthropicPlan) -> None:
        now = self._clock()
        for write in plan.writes:
            self._entries[write.prefix_hash] = (now + write.ttl_s, write.ttl_s)


@dataclass(slots=True)
class OpenAIPlan:
    prompt_tokens: int
    cached_tokens: int
    boundaries: list[str]  # hashes of every cacheable prefix of this prompt

    def usage(self, completion_tokens: int) -> dict[str, object]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


@functools.lru_cache(maxsize=4096)
def _token_ids(text: str, encoding: str) -> tuple[int, ...]:
    return tuple(get_encoding(encoding).encode(text, disallowed_special=()))


class OpenAIPrefixCache:
    """Automatic prefix caching: prompts of at least 1,024 tokens; ``cached_tokens`` is the
    prefix shared with an earlier *completed* prompt (same model), rounded down to
    1,024 + 128·n tokens, 0 below 1,024. Tokens are the parts' token ids, concatenated."""

    def __init__(self, ttl_s: float, clock: Callable[[], float]) -> None:
        self.ttl_s, self._clock = ttl_s, clock
        self._entries: dict[str, float] = {}  # boundary hash -> expires at

    def clear(self) -> None:
        self._entries.clear()

    def plan(self, model: str, parts: Sequence[PromptPart]) -> OpenAIPlan:
        tokens = array("I")
        for part in parts:
            tokens.extend(_token_ids(part.text, encoding_for_model(model)))
        digest = hashlib.sha256(model.encode())
        boundaries: list[str] = []
        start = 0
        for end in range(OPENAI_MIN_CACHEABLE, len(tokens) + 1, OPENAI_CACHE_INCREMENT):
            digest.update(tokens[start:end].tobytes())
            boundaries.append(digest.copy().hexdigest()[:16])
            start = end
        now, cached = self._clock(), 0
        for n, boundary in enumerate(boundaries):
            if self._entries.get(boundary, 0.0) <= now:
                break
            self._entries[boundary] = now + self.ttl_s
            cached = OPENAI_MIN_CACHEABLE + OPENAI_CACHE_INCREMENT * n
        return OpenAIPlan(len(tokens), cached, boundaries)

    def commit(self, plan: OpenAIPlan) -> None:
        expires = self._clock() + self.ttl_s
        for boundary in plan.boundaries:
            self._entries[boundary] = expires
