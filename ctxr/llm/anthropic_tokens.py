"""How Anthropic counts and bills a request's prompt, without sending it (the cost estimate).

The parts up to the `cache_control` marker are the cached prefix, the rest plain input; a
forced tool call (a JSON schema) adds the tool-use system prompt to the prefix. Per cached
prefix the first request writes it (1-hour writes priced apart) and the others read it; below
the minimum every request sends it as plain input.

Claude's tokenizer is not public. Tokens are counted with ctok's offline reconstruction where
it is installed, else tiktoken's cl100k_base (which runs low), or asked of Anthropic's free
`count_tokens` endpoint (`exact`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ctxr.errors import ConfigError, ProviderError
from ctxr.llm import clients
from ctxr.llm.base import LLM, PromptGroup, Usage
from ctxr.llm.cache_minimums import forced_tool_prompt_tokens
from ctxr.tokens import count_tokens

if TYPE_CHECKING:
    from anthropic.types import TextBlockParam

# Claude's tokenizer is not public. On anthropic-codebase, Anthropic's reported run billed
# 3,666,878 prompt tokens; cl100k_base counts 2,795,746 for the same 737 prompts: one corpus,
# one comparison, so a stated bias, not a measured margin.
CLAUDE_UNDERCOUNT = 0.31
# Chunk parts per count_tokens call; the sums are all the estimate needs.
COUNT_BATCH = 64
ENCODING = "cl100k_base"  # document sizes, comparable across models


def message_texts(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """A Messages request body's text parts in order, each with whether it carries a cache
    marker."""
    parts: list[tuple[str, bool]] = []
    if body.get("tools"):  # tool definitions open the prompt (and its cached prefix)
        parts.append((json.dumps(body["tools"], ensure_ascii=False, sort_keys=True), False))
    system = body.get("system")
    if isinstance(system, str):
        parts.append((system, False))
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append((content, False))
            continue
        for block in content:
            parts.append((str(block.get("text", "")), "cache_control" in block))
    return parts


def _split_at_marker(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The texts up to and including the last cache marker (the prefix), and the rest."""
    parts = message_texts(body)
    last = max((i for i, (_, marked) in enumerate(parts) if marked), default=-1)
    return [t for t, _ in parts[: last + 1]], [t for t, _ in parts[last + 1 :]]


def claude_counter(choice: str = "auto") -> tuple[Callable[[str], int], int] | None:
    """Claude token counts offline from `ctok` (MIT; Python 3.12+, `pip install
    'ctxr[claude-tokens]'`), as (content tokens of a text, message framing per request); None
    where `choice` is "cl100k", or "auto" and ctok is not installed. Measured on
    anthropic-codebase's 737 prompts: 3,654,662 against the 3,666,878 Anthropic billed (0.3%
    low), where cl100k_base counts 2,795,746 (24% low)."""
    if choice == "cl100k":
        return None
    try:
        from ctok import token_count  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        if choice == "ctok":
            raise ConfigError(
                "CTXR_CLAUDE_TOKENIZER=ctok: ctok is not installed; pip install "
                "'ctxr[claude-tokens]' (Python 3.12+), or use auto or cl100k"
            ) from None
        return None
    framing = int(token_count("a")) - 1  # ctok counts a text as a whole one-message request

    def content(text: str) -> int:
        return int(token_count(text)) - framing if text else 0

    return content, framing


class AnthropicCounter:
    """`RequestCounter` of Anthropic's Messages API, over the bodies `llm` would send.
    `tokenizer` is CTXR_CLAUDE_TOKENIZER (auto, ctok, cl100k); `exact` asks count_tokens."""

    def __init__(self, llm: LLM, *, tokenizer: str = "auto", exact: bool = False) -> None:
        self._llm = llm
        self.exact = exact
        self.encoding = ENCODING
        self._claude = None if exact else claude_counter(tokenizer)
        self.label = "ctok" if self._claude is not None else ENCODING
        if exact:
            self.note = "exact (Anthropic count_tokens)"
        elif self._claude is not None:
            # Prompts are counted by ctok; document tokens stay cl100k, comparable across models.
            self.note = "ctok's offline Claude counts (0.3% low on anthropic-codebase)"
        else:
            self.note = f"estimate: cl100k_base, may be ~{CLAUDE_UNDERCOUNT:.0%} low"

    def notes(self) -> list[str]:
        if self.exact:
            return []
        if self._claude is not None:
            return [
                "Claude tokens are ctok's offline reconstruction of Claude's tokenizer (0.3% "
                "below Anthropic's billed count on anthropic-codebase's 737 prompts); --exact "
                "asks Anthropic's free count_tokens endpoint"
            ]
        return [
            "Claude tokens are tiktoken cl100k_base counts; Claude's tokenizer differs (on "
            f"anthropic-codebase Anthropic's reported run billed {CLAUDE_UNDERCOUNT:.0%} more "
            "prompt tokens than cl100k counts; not measured on your corpus); ctok counts "
            "them offline (pip install 'ctxr[claude-tokens]', Python 3.12+), --exact asks "
            "Anthropic's free count_tokens endpoint"
        ]

    def prompt_usages(self, groups: Sequence[PromptGroup]) -> list[Usage]:
        # Every body rendered marked: the marker shows where the cacheable prefix ends;
        # `cached` decides whether it is billed as cached (a run sends none below the minimum).
        bodies = [
            [self._llm.request_body(dataclasses.replace(r, cache=True)) for r in g.requests]
            for g in groups
        ]
        usages = anthropic_usages(
            [(g.cached, b) for g, b in zip(groups, bodies, strict=True)],
            ENCODING,
            self._llm.model if self.exact else None,
            self._claude,
        )
        for k, group in enumerate(groups):
            if group.cached and group.requests[0].cache_ttl == "1h":  # priced apart
                written = usages[k].cache_write_tokens
                usages[k] = dataclasses.replace(
                    usages[k], cache_write_tokens=0, cache_write_1h_tokens=written
                )
        return usages


def anthropic_usages(
    work: Sequence[tuple[bool, Sequence[dict[str, Any]]]],
    encoding: str,
    exact_model: str | None,
    claude: tuple[Callable[[str], int], int] | None = None,
) -> list[Usage]:
    """Per prefix (whether cached, its request bodies): the first request writes the prefix,
    the others read it; below the minimum every request sends it as plain input. Counted with
    `claude` (`claude_counter`) or the local `encoding`, or by `count_tokens` when
    `exact_model` is given; `count_tokens` and `claude` also charge each request its message
    framing as input."""
    heads = [_split_at_marker(bodies[0])[0] for _, bodies in work]
    hidden = [_hidden_prompt_tokens(bodies[0]) for _, bodies in work]
    rests = [[t for body in bodies for t in _split_at_marker(body)[1]] for _, bodies in work]
    framing = 0
    if exact_model is None:
        count: Callable[[str], int] = functools.partial(count_tokens, encoding=encoding)
        if claude is not None:
            count, framing = claude
        head_tokens = [sum(count(t) for t in head) for head in heads]
        rest_tokens = [sum(count(t) for t in rest) for rest in rests]
    else:
        batches = [
            rest[i : i + COUNT_BATCH] for rest in rests for i in range(0, len(rest), COUNT_BATCH)
        ]
        counted = count_remote([["."], *heads, *batches], exact_model)
        framing = max(0, counted[0] - 1)  # "." is one token: the rest is the message frame
        head_tokens = [n - framing for n in counted[1 : 1 + len(heads)]]
        sums = iter(n - framing for n in counted[1 + len(heads) :])
        rest_tokens = [sum(next(sums) for _ in range(0, len(r), COUNT_BATCH)) for r in rests]
    usages = []
    for (cached, bodies), head, rest, extra in zip(
        work, head_tokens, rest_tokens, hidden, strict=True
    ):
        n, head = len(bodies), head + extra
        if cached:
            usage = Usage(rest + framing * n, head, head * (n - 1))
        else:
            usage = Usage(input_tokens=head * n + rest + framing * n)
        usages.append(usage)
    return usages


def _hidden_prompt_tokens(body: dict[str, Any]) -> int:
    """Input Anthropic bills that no request text shows: the tool-use system prompt of a
    forced tool call (a JSON schema, `ctxr.llm.anthropic`), which opens the prompt, so it is
    part of the cached prefix. A prefix's requests share one schema form, so the first
    request's body stands for all of them."""
    choice = body.get("tool_choice")
    if body.get("tools") and isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return forced_tool_prompt_tokens(str(body.get("model", "")))
    return 0


def count_remote(messages: list[list[str]], model: str) -> list[int]:
    """Input tokens of each user message (a list of text blocks), from Anthropic's free
    `POST /v1/messages/count_tokens`, through the SDK; ANTHROPIC_BASE_URL is honoured."""
    import anthropic

    key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    if not key and not os.environ.get("ANTHROPIC_BASE_URL"):
        raise ConfigError(
            "--exact asks Anthropic's count_tokens endpoint: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_BASE_URL for a compatible server), or leave --exact out"
        )

    async def run() -> list[int]:
        # The SDK's default retries: counting is free, and a transient 429 should not fail it.
        client = clients.anthropic_client(api_key=None, base_url=None, timeout=60.0, max_retries=2)
        slots = asyncio.Semaphore(8)

        async def one(texts: list[str]) -> int:
            blocks: list[TextBlockParam] = [{"type": "text", "text": t} for t in texts]
            async with slots:
                counted = await client.messages.count_tokens(
                    model=model, messages=[{"role": "user", "content": blocks}]
                )
            return counted.input_tokens

        try:
            return list(await asyncio.gather(*(one(m) for m in messages)))
        except anthropic.APIError as exc:
            raise ProviderError(f"Anthropic count_tokens failed: {exc}", retryable=False) from exc
        finally:
            await client.close()

    return asyncio.run(run())
