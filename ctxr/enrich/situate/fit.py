"""Sizing situating requests to the server's context window.

A local server's window is small (llama.cpp's 4,096 tokens a slot, Ollama's 4,096 default)
and a request past it is refused, or cut. When the window is known (`ctxr.llm.server_limits`,
or `CTXR_LLM_CONTEXT_TOKENS`), the planner (`plan.py`) keeps every request inside it:

- documents longer than what is left for a document are sent as windows (`window.py`);
- a prefix's group holds only as many chunks as their answers fit beside the prefix;
- a pack of small documents closes before its prompt and answers pass the window.

Counts are ctxr's tokenizer's, not the server's (a local model's vocabulary is often smaller,
so its counts are larger): the plan fills `FIT_SHARE` of the window, and a request the server
still refuses is split by the queue. The answer's budget counts too: vLLM and OpenAI refuse a
prompt plus `max_tokens` past the window, and llama.cpp stops the answer where the slot ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ctxr.enrich.situate.group import ANSWER_OVERHEAD_TOKENS, output_budget

# The share of the window the plan fills, by ctxr's count: a pack of 8,000 tokens by tiktoken's
# count was 8,588 by SmolLM2's (7% more); 20% covers vocabularies further apart.
FIT_SHARE: Final = 0.8
# An instruction, the chat template's framing and the JSON schema of a grouped request.
INSTRUCTION_TOKENS: Final = 300
# A chunk marked in place (``[[c12]]`` ... ``[[/c12]]``) or its id in a schema.
MARK_TOKENS: Final = 12
# Below this a document is not worth sending at all: the outline says as much.
MIN_DOCUMENT_TOKENS: Final = 256


@dataclass(frozen=True, slots=True)
class Fit:
    """The token budget of one request, from the server's window and output limit."""

    window: int  # the server's window, as it said or as set
    output_limit: int | None = None  # the most tokens one answer may have, where it says

    @property
    def budget(self) -> int:
        """What one request may hold by ctxr's count: prompt and answer budget together."""
        return int(self.window * FIT_SHARE)

    def context_tokens(self, wanted: int) -> int:
        """One context's output budget, within the server's output limit."""
        return min(wanted, self.output_limit) if self.output_limit else wanted

    def document_tokens(self, wanted: int, context_tokens: int, chunk_tokens: int) -> int:
        """The longest document sent whole: a per-chunk request holds it, the chunk again, the
        instruction and one answer."""
        room = self.budget - INSTRUCTION_TOKENS - chunk_tokens - context_tokens
        return max(MIN_DOCUMENT_TOKENS, min(wanted, room))

    def group_size(
        self, wanted: int, prefix_tokens: int, chunks: int, context_tokens: int, quoted: int
    ) -> int:
        """How many chunks one grouped request of this prefix may ask about (at least 1): the
        prefix with its `chunks` marked, the instruction, and each answer's budget, plus
        `quoted` tokens per chunk where the chunks are quoted after a window."""
        if wanted <= 1:
            return wanted
        room = self.budget - INSTRUCTION_TOKENS - prefix_tokens - chunks * MARK_TOKENS - 16
        size = max(1, min(wanted, room // (context_tokens + ANSWER_OVERHEAD_TOKENS + quoted)))
        if self.output_limit:
            while size > 1 and output_budget(size, context_tokens) > self.output_limit:
                size -= 1
        return size

    def pack_fits(self, prefix_tokens: int, chunks: int, context_tokens: int) -> bool:
        """Whether a pack of documents of `prefix_tokens` holding `chunks` chunks fits."""
        answers = output_budget(chunks, context_tokens)
        if self.output_limit and answers > self.output_limit:
            return False
        marks = chunks * MARK_TOKENS
        return prefix_tokens + marks + INSTRUCTION_TOKENS + answers <= self.budget
