"""The response cache: every answered chunk on disk, so no chunk is ever paid for twice.

Keyed by (provider, model, prompt version, document SHA-256, chunk SHA-256 and heading path):
the same chunk of the same document asked with the same prompt of the same model gets the
answer it got before. The queue looks here before sending and writes right after each
response, so a run killed at any moment re-sends only what was never answered, and an
unchanged corpus costs zero requests.

Values are JSON text (no pickle): the context, and a `flagged` field. Only accepted contexts
are stored: an answer that is no context, and a provider failure, are not, so the next run
asks again for those chunks (another model or a fixed server may answer). Entries that older
versions stored with a flag are read back with it, and the planner treats them as unanswered.
Nothing is evicted; a new prompt version or model simply stops reading the old entries.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ctxr.cache_files import cache_write, open_cache
from ctxr.types import Chunk, text_hash


@dataclass(frozen=True, slots=True)
class CachedContext:
    context: str
    flagged: str | None = None  # only in entries older versions stored: not an answer


def cache_key(
    *,
    provider: str,
    model: str,
    prompt_version: str,
    document_sha256: str,
    chunk_text: str,
    heading_path: tuple[str, ...] = (),
) -> str:
    chunk_part = {"text": text_hash(chunk_text), "headings": list(heading_path)}
    raw = json.dumps(
        [provider, model, prompt_version, document_sha256, chunk_part],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return "ctx1:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()


def chunk_key(
    provider: str, model: str, prompt_version: str, document_sha256: str, chunk: Chunk
) -> str:
    """`cache_key` of one chunk of a document."""
    return cache_key(
        provider=provider,
        model=model,
        prompt_version=prompt_version,
        document_sha256=document_sha256,
        chunk_text=chunk.text,
        heading_path=chunk.heading_path,
    )


class ResponseCache:
    """A diskcache directory of contexts. Safe across threads and processes (SQLite)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._cache = open_cache(
            self.directory, "LLM response cache", paid=True, eviction_policy="none"
        )

    def get(self, key: str) -> CachedContext | None:
        raw = self._cache.get(key)
        if not isinstance(raw, str):
            return None
        try:
            value = json.loads(raw)
            context = value["context"]
            flagged = value.get("flagged")
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # a damaged entry is a miss, never an error
        if not isinstance(context, str) or not (flagged is None or isinstance(flagged, str)):
            return None
        return CachedContext(context, flagged)

    def answer(
        self,
        provider: str,
        model: str,
        prompt_versions: tuple[str, ...],
        document_sha256: str,
        chunk: Chunk,
    ) -> CachedContext | None:
        """The context paid for before under any of `prompt_versions` (the per-chunk and the
        grouped prompt answer the same question), first found first."""
        for version in prompt_versions:
            key = chunk_key(provider, model, version, document_sha256, chunk)
            if (hit := self.get(key)) is not None:
                return hit
        return None

    def put(self, key: str, context: str, flagged: str | None = None) -> None:
        # diskcache commits before returning: once put() returns, a kill loses nothing. A full
        # disk is a StorageError naming it; every answer put before stays in the cache.
        with cache_write(self.directory, "LLM response cache"):
            self._cache.set(key, json.dumps({"context": context, "flagged": flagged}))

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
