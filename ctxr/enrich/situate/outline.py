"""Structural "outline" contexts: what situates a chunk when no LLM is configured.

The outline names the document (its title and path) and the chunk's heading trail (for code,
its symbol path). It costs nothing, is deterministic, and already carries the signal that
contextual retrieval adds most often: which file and which section a passage belongs to.

It does not name a code file's language. Measured on the code set with ctxr's chunks
(`bench/quality/outline_parts.py`, docs/explanation/evaluation.md): every chunk saying
"python source" scored Pass@5/10/20 84.30 / 90.22 / 94.62, the same outline without it
85.14 / 91.77 / 95.33, and all five cross-validation folds picked leaving it out. The path's
extension says it anyway.

Nor does it say a title that the chunk itself begins with (a document's first chunk, which
opens with its ``# Title``): only the path is said there. Measured on prose against the
outline that said it (`bench/quality/outline_prose.py`, whose ``full-twice`` that one now is):
hybrid nDCG@10 +0.0018 on SciFact train, +0.0005 on NFCorpus dev, and +0.0146 on ArguAna
test, which took no part in the choice; a title said twice pulls a short document's first
vector towards it.
"""

from __future__ import annotations

from ctxr.types import Chunk, ContextKind, ContextualChunk, Document

# Recorded in the manifest as the prompt version, so an index knows how its contexts were made.
OUTLINE_VERSION = "outline/3"  # 2: no "<language> source" part; 3: no title the chunk opens with


def outline_context(document: Document, chunk: Chunk) -> str:
    title = document.title
    file_name = document.source.rsplit("/", 1)[-1]
    # A title that is only the file name adds nothing to the path, and one the chunk opens
    # with is already in the chunk.
    said = title == file_name or _opens_with(chunk.text, title)
    head = document.source if said else f"{title} ({document.source})"
    parts = [f"From {head}"]
    # The first heading usually repeats the title; don't say it twice.
    trail = [h for h in chunk.heading_path if h != title] if chunk.heading_path else []
    if trail:
        parts.append("section: " + " > ".join(trail))
    return ", ".join(parts) + "."


def _opens_with(text: str, title: str) -> bool:
    """Whether `text` begins with `title` as a whole phrase, after any Markdown heading marks."""
    opening = text.lstrip().lstrip("#").lstrip()
    if not title or not opening.startswith(title):
        return False
    rest = opening[len(title) : len(title) + 1]
    return not rest or not (rest.isalnum() or rest == "_")


def situate(document: Document, chunks: list[Chunk], mode: ContextKind) -> list[ContextualChunk]:
    """Attach a context to each chunk without calling a model ("outline" or "none")."""
    if mode == "none":
        return [ContextualChunk(chunk, "", "none") for chunk in chunks]
    if mode == "outline":
        return [ContextualChunk(c, outline_context(document, c), "outline") for c in chunks]
    raise ValueError(f"situate() makes no {mode!r} contexts; the LLM queue does")
