"""`LLMReranker`: the configured LLM provider scores every candidate in one prompt.

The provider is the one that writes contexts (`CTXR_LLM_PROVIDER`, else detected from the
ANTHROPIC_* / OPENAI_* variables), with the same model setting. The answer must be a JSON list
of ``{"id": n, "score": 0-10}`` naming every passage exactly once; anything else is not
guessed at: the fused order comes back, flagged "rerank: unparseable answer".

The SDKs' sync clients are used, with their own retries off: a reranker has a time budget
(`CTXR_RERANK_TIMEOUT`), and falling back to the fused order is better than waiting.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any, Final

from ctxr.config import Settings
from ctxr.errors import ConfigError, RerankError
from ctxr.llm import clients, registry
from ctxr.retrieve.rerank.base import RerankResult, rerank_with
from ctxr.types import Hit

UNPARSEABLE: Final = "rerank: unparseable answer"
MAX_SCORE: Final = 10.0
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)
# Slots are filled in one pass, so a query or passage containing "{{PASSAGES}}" stays verbatim.
_SLOTS = re.compile(r"\{\{(QUERY|PASSAGES|COUNT)\}\}")
_REASONING = re.compile(r"^(o\d|gpt-5)")


@functools.cache
def _template() -> str:
    raw = resources.files("ctxr").joinpath("prompts/rerank.txt").read_text(encoding="utf-8")
    lines = raw.replace("\r\n", "\n").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "\n".join(lines).strip("\n")


def rerank_prompt(query: str, passages: Sequence[str]) -> str:
    """The one prompt: the query and the numbered passages, asking for a JSON list."""
    numbered = "\n".join(
        f'<passage id="{i}">\n{text}\n</passage>' for i, text in enumerate(passages, start=1)
    )
    values = {"QUERY": query, "PASSAGES": numbered, "COUNT": str(len(passages))}
    return _SLOTS.sub(lambda m: values[m.group(1)], _template())


def parse_scores(answer: str, count: int) -> list[float]:
    """Scores in passage order from the model's answer; `RerankError(UNPARSEABLE)` unless it is
    a JSON list giving every id 1..count exactly once a number from 0 to 10."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError:
        raise RerankError(UNPARSEABLE) from None
    if not isinstance(data, list) or len(data) != count:
        raise RerankError(UNPARSEABLE)
    scores: dict[int, float] = {}
    for item in data:
        if not isinstance(item, dict):
            raise RerankError(UNPARSEABLE)
        key, score = item.get("id"), item.get("score")
        if isinstance(key, bool) or not isinstance(key, int) or not 1 <= key <= count:
            raise RerankError(UNPARSEABLE)
        if key in scores or isinstance(score, bool) or not isinstance(score, int | float):
            raise RerankError(UNPARSEABLE)
        if not (math.isfinite(score) and 0.0 <= score <= MAX_SCORE):
            raise RerankError(UNPARSEABLE)
        scores[key] = float(score)
    return [scores[i] for i in range(1, count + 1)]


class LLMReranker:
    """Satisfies `ctxr.retrieve.rerank.base.Reranker` structurally."""

    def __init__(
        self,
        provider: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if provider not in registry.PROVIDERS:
            raise ConfigError(
                f"unknown LLM provider {provider!r}; use one of {', '.join(registry.PROVIDERS)}"
            )
        self.provider = provider
        self.model = model or registry.DEFAULT_MODELS[provider]
        self._client: Any = _client(provider, api_key, base_url, timeout)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMReranker:
        provider = settings.llm_provider or registry.detect_provider(os.environ)
        if provider is None:
            raise ConfigError(
                "the llm reranker needs an LLM provider: set ANTHROPIC_API_KEY or "
                "OPENAI_API_KEY (or ANTHROPIC_BASE_URL / OPENAI_BASE_URL for a local server), "
                "or CTXR_LLM_PROVIDER"
            )
        return cls(provider, settings.llm_model, timeout=settings.rerank_timeout)

    @property
    def name(self) -> str:
        return "llm"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> RerankResult:
        return rerank_with(self.score, query, hits, top_n)

    def score(self, query: str, passages: list[str]) -> list[float]:
        return parse_scores(
            self.complete(rerank_prompt(query, passages), len(passages)), len(passages)
        )

    def complete(self, prompt: str, count: int) -> str:
        """The model's answer to `prompt`; `RerankError` on any failure of the call."""
        budget = 16 * count + 64  # about 12 tokens per {"id": n, "score": s} entry
        message = {"role": "user", "content": prompt}
        if self.provider == "anthropic":
            import anthropic

            try:
                reply = self._client.messages.create(
                    model=self.model,
                    max_tokens=budget,
                    messages=[message],
                    extra_body={"temperature": 0},
                )
            except anthropic.APIError as exc:
                raise RerankError(_flag(exc)) from None
            return "".join(b.text for b in reply.content if getattr(b, "type", "") == "text")
        import openai

        body: dict[str, Any] = {"model": self.model, "messages": [message]}
        if _REASONING.match(self.model):
            body["max_completion_tokens"] = budget
        else:
            body.update(max_tokens=budget, temperature=0)
        try:
            completion = self._client.chat.completions.create(**body)
        except openai.APIError as exc:
            raise RerankError(_flag(exc)) from None
        if not completion.choices:
            raise RerankError(UNPARSEABLE)
        return str(completion.choices[0].message.content or "")

    def close(self) -> None:
        self._client.close()


def _flag(exc: Exception) -> str:
    """A short flag for a failed call: timeout, HTTP status, or connection failure."""
    name = type(exc).__name__
    if "Timeout" in name:
        return "rerank failed: timeout"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return f"rerank failed: HTTP {status}"
    if "Connection" in name:
        return "rerank failed: connection failed"
    return f"rerank failed: {name}"


def _client(provider: str, api_key: str | None, base_url: str | None, timeout: float) -> Any:
    # As the context writers do: None lets the SDK read its own variables; a base URL with no
    # credential (a local server) gets a placeholder key, since the SDKs refuse to start without.
    if provider == "anthropic":
        import anthropic

        has_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not (has_key or os.environ.get("ANTHROPIC_AUTH_TOKEN")) and (
            base_url or os.environ.get("ANTHROPIC_BASE_URL")
        ):
            api_key = clients.PLACEHOLDER_KEY
        return anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
        )
    import openai

    if not (api_key or os.environ.get("OPENAI_API_KEY")) and (
        base_url or os.environ.get("OPENAI_BASE_URL")
    ):
        api_key = clients.PLACEHOLDER_KEY
    try:
        return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)
    except openai.OpenAIError as exc:
        raise ConfigError(
            "the llm reranker found no OpenAI key; set OPENAI_API_KEY, or OPENAI_BASE_URL for "
            "a local OpenAI-compatible server"
        ) from exc
