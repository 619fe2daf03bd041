"""The situating prompt, kept as a text file in `ctxr/prompts/` and versioned by its content.

The prompt has two parts because providers cache a prefix: the document part is identical for
every chunk of a document (Anthropic marks it with `cache_control`, OpenAI caches it as the
prompt's prefix), and the chunk part, which changes per request, comes after it.

The version is a hash of the file's bytes, not a number someone must remember to bump: any edit
to the wording changes the key of the response cache, so no context made with an old prompt is
served for a new one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ctxr.errors import ConfigError
from ctxr.llm.base import CompletionRequest
from ctxr.prompts import load_template, prompt_version

DOCUMENT_MARKER = "=== document ==="
CHUNK_MARKER = "=== chunk ==="
TRAIL_PREFIX = "The chunk sits under: "

# One pass over the template only: a document or chunk that itself contains "{{CHUNK_CONTENT}}"
# is inserted verbatim and never substituted again.
_DOCUMENT_SLOT = re.compile(r"\{\{WHOLE_DOCUMENT\}\}")
_CHUNK_SLOTS = re.compile(r"\{\{CHUNK_CONTENT\}\}|^\{\{HEADING_TRAIL\}\}(?:\n|\Z)", re.MULTILINE)


def heading_trail(heading_path: Sequence[str]) -> str:
    """The heading trail or symbol path as one line; empty when there is nothing to say."""
    parts = [" ".join(part.split()) for part in heading_path]
    return " > ".join(part for part in parts if part)


@dataclass(frozen=True, slots=True)
class SituatePrompt:
    document_template: str
    chunk_template: str
    version: str

    @classmethod
    def parse(cls, data: bytes, name: str = "situate") -> SituatePrompt:
        """Split the file at its two markers; leading `#` lines are comments for editors."""
        text = data.decode("utf-8").replace("\r\n", "\n")
        lines = text.split("\n")
        try:
            doc_at = lines.index(DOCUMENT_MARKER)
            chunk_at = lines.index(CHUNK_MARKER)
        except ValueError:
            raise ConfigError(
                f"prompt {name!r} needs a {DOCUMENT_MARKER!r} line and a {CHUNK_MARKER!r} line"
            ) from None
        if not doc_at < chunk_at or any(
            line.strip() and not line.startswith("#") for line in lines[:doc_at]
        ):
            raise ConfigError(
                f"prompt {name!r}: only '#' comments may precede {DOCUMENT_MARKER!r}, "
                f"and the document part must come before {CHUNK_MARKER!r}"
            )
        document = "\n".join(lines[doc_at + 1 : chunk_at]).strip("\n")
        chunk = "\n".join(lines[chunk_at + 1 :]).strip("\n")
        if "{{WHOLE_DOCUMENT}}" not in document or "{{CHUNK_CONTENT}}" not in chunk:
            raise ConfigError(
                f"prompt {name!r}: the document part needs {{{{WHOLE_DOCUMENT}}}} and the "
                "chunk part needs {{CHUNK_CONTENT}}"
            )
        return cls(document, chunk, prompt_version(data, name))

    def document_part(self, document: str) -> str:
        return _DOCUMENT_SLOT.sub(lambda _: document, self.document_template)

    def chunk_part(self, chunk: str, heading_path: Sequence[str] = ()) -> str:
        trail = heading_trail(heading_path)
        trail_line = f"{TRAIL_PREFIX}{trail}\n" if trail else ""

        def fill(match: re.Match[str]) -> str:
            return chunk if match.group(0) == "{{CHUNK_CONTENT}}" else trail_line

        return _CHUNK_SLOTS.sub(fill, self.chunk_template)


@functools.cache
def load_prompt(name: str = "situate") -> SituatePrompt:
    return SituatePrompt.parse(load_template(name).data, name)


SITUATE = load_prompt()
PROMPT_VERSION = SITUATE.version


def document_part(document: str) -> str:
    """The cached prefix: the whole document (or its window) in `<document>` tags."""
    return SITUATE.document_part(document)


def chunk_part(chunk: str, heading_path: Sequence[str] = ()) -> str:
    """The per-request part: the chunk, its heading trail when known, and the instruction."""
    return SITUATE.chunk_part(chunk, heading_path)


@dataclass(frozen=True, slots=True)
class SituateRequest:
    """One chunk to situate. Requests with the same `document` share one cached prefix."""

    document: str  # the whole document, or the window of it that fits the model
    chunk: str
    heading_path: tuple[str, ...] = ()
    cache: bool = True  # False below the model's minimum cacheable size: send no cache marker

    def completion(self) -> CompletionRequest:
        """The provider request: the document part as the cached prefix, the chunk part after."""
        return CompletionRequest(
            instruction=chunk_part(self.chunk, self.heading_path),
            prefix=document_part(self.document),
            cache=self.cache,
        )
