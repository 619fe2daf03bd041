"""Provider facts that decide what a prompt costs: the minimum cacheable prompt sizes (below
them a prefix is billed uncached), and the system prompt Anthropic adds to a forced tool call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    pass
from ctxr.llm.pricing import canonical_model

# Minimum cacheable prompt length in tokens, from Anthropic's prompt-caching documentation
# (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, table as quoted in
# anthropics/anthropic-sdk-python issue #1194, read 2026-11-29): 4096 for Opus 4.6/4.5 and
# Haiku 4.5; 2048 for Haiku 3.5 and Haiku 3; 1024 for Sonnet 4.6/4.5/4/3.7 and Opus 4.1/4.
# Keys are canonical names (snapshot dates and -latest/-0 suffixes removed).
ANTHROPIC_MIN_CACHEABLE: Final[Mapping[str, int]] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-3-opus": 1024,
}


# An unknown Claude model gets the largest documented minimum: treating a cacheable document
# as uncached costs some money, but marking one the server will not cache breaks the
# one-write-per-document schedule and makes the estimate promise savings that never come.
ANTHROPIC_DEFAULT_MIN_CACHEABLE: Final = 4096


# OpenAI caches prompts of 1024 tokens and more, for every model that caches at all
# (https://platform.openai.com/docs/guides/prompt-caching).
OPENAI_MIN_CACHEABLE: Final = 1024


def min_cacheable_tokens(provider: str, model: str) -> int:
    if provider == "anthropic":
        return ANTHROPIC_MIN_CACHEABLE.get(canonical_model(model), ANTHROPIC_DEFAULT_MIN_CACHEABLE)
    return OPENAI_MIN_CACHEABLE


# The system prompt Anthropic adds to every request with tools, billed as input and placed
# before the tools (so inside any cached prefix): 313 tokens with `tool_choice` "any" or
# "tool", on every Claude 4 model, Haiku 4.5 and Sonnet 3.7 included; 340 on Haiku 3.5
# (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/overview#pricing, read
# 2026-12-01; a 2026 write-up reports 588 for Haiku 4.5: the ledger always has the billed figure).
ANTHROPIC_FORCED_TOOL_PROMPT_TOKENS: Final[Mapping[str, int]] = {"claude-3-5-haiku": 340}
ANTHROPIC_DEFAULT_FORCED_TOOL_PROMPT_TOKENS: Final = 313


def forced_tool_prompt_tokens(model: str) -> int:
    """Input tokens Anthropic adds to a request that forces a tool call with `model`."""
    return ANTHROPIC_FORCED_TOOL_PROMPT_TOKENS.get(
        canonical_model(model), ANTHROPIC_DEFAULT_FORCED_TOOL_PROMPT_TOKENS
    )
