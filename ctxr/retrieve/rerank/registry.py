"""The rerankers by name: which one a request uses, and making it from the settings.

Each kind is imported only when made, so a search without reranking loads none of them."""

from __future__ import annotations

from typing import Final

from ctxr.config import SearchSettings, Settings
from ctxr.errors import ConfigError
from ctxr.retrieve.rerank.base import Reranker

RERANKERS: Final = ("llm", "http", "cross-encoder")


OFF: Final = "none"


def resolve(name: str | None, search: SearchSettings) -> str | None:
    """The reranker a request uses: its own choice, else `CTXR_RERANK`; "none" is off."""
    chosen = (name if name is not None else search.rerank or OFF).strip().lower()
    if chosen in ("", OFF):
        return None
    if chosen not in RERANKERS:
        raise ConfigError(f"unknown reranker {chosen!r}; use one of {', '.join((*RERANKERS, OFF))}")
    return chosen


def make_reranker(name: str, settings: Settings) -> Reranker:
    """A reranker by name, configured from `settings`; raises `ConfigError` when it cannot be
    used at all (no provider, no URL, no local model)."""
    if name == "llm":
        from ctxr.retrieve.rerank.llm import LLMReranker

        return LLMReranker.from_settings(settings.llm, settings.search.rerank_timeout)
    if name == "http":
        from ctxr.retrieve.rerank.http import HTTPReranker

        return HTTPReranker.from_settings(settings.search)
    if name == "cross-encoder":
        from ctxr.retrieve.rerank.cross_encoder import CrossEncoderReranker

        return CrossEncoderReranker.from_settings(settings.search, settings.embed.embed_threads)
    raise ConfigError(f"unknown reranker {name!r}; use one of {', '.join((*RERANKERS, OFF))}")
