"""The anthropic-codebase set (90 source files) as the benchmarks use it: its documents, each
file's language, and the files written out with extensions so that ctxr splits them as code.

The set's JSON (``codebase_chunks.json``) has no file names, so each file's language is guessed
by `guess_language`: the grammar that parses it with the fewest error bytes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tree_sitter import Node

from bench.common.checkout import data_dir
from ctxr.enrich.split.code import CODE_SPLIT_LANGUAGES
from ctxr.enrich.split.code_languages import parser_for
from ctxr.tokens import count_tokens

EXTENSIONS = {"python": ".py", "rust": ".rs", "go": ".go", "javascript": ".js", "java": ".java",
              "typescript": ".ts", "c": ".c", "cpp": ".cpp"}  # fmt: skip


def add_data_option(parser: argparse.ArgumentParser) -> None:
    """``--data DIR``: the set's folder, when it is not where `documents` looks by default."""
    parser.add_argument(
        "--data", type=Path, help="the anthropic-codebase folder (default: the eval data's)"
    )


def documents(data: Path | None = None) -> list[dict[str, Any]]:
    """The set's documents as its JSON holds them: ``doc_id``, ``content`` and ``chunks`` (each
    with its own ``content``). `data` is the set's folder; default the evaluation data's."""
    folder = data or data_dir("anthropic-codebase")
    rows: list[dict[str, Any]] = json.loads((folder / "codebase_chunks.json").read_text())
    return rows


def _error_bytes(node: Node) -> int:
    """Bytes of the file that a grammar could only cover with ERROR or MISSING nodes."""
    if node.is_error or node.is_missing:
        return max(1, node.end_byte - node.start_byte)
    if not node.has_error:
        return 0
    return sum(_error_bytes(child) for child in node.children)


def guess_language(text: str) -> str:
    """The language whose grammar parses ``text`` with the fewest error bytes.

    ctxr routes languages by file extension; the JSON has none, and keyword markers misread
    Rust as Python or C++ (``self.``, ``::``), which sends files through the wrong grammar's
    error recovery (1-3 MB/s instead of 15-45). Parsing with every grammar is exact and is
    not part of any timed run.
    """
    raw = text.encode("utf-8")
    errors: dict[str, int] = {}
    for language in sorted(CODE_SPLIT_LANGUAGES):
        parser = parser_for(language)
        if parser is not None:
            errors[language] = _error_bytes(parser.parse(raw).root_node)
    return min(errors, key=lambda lang: errors[lang])


def write_corpus(data: Path | None, out: Path, limit: int | None) -> int:
    """The first `limit` documents (all for None) as files under `out`, each named by its doc id
    with the extension of its guessed language; returns their cl100k token total."""
    out.mkdir(parents=True)
    total = 0
    for d in documents(data)[:limit]:
        suffix = EXTENSIONS.get(guess_language(d["content"]), ".txt")
        (out / f"{d['doc_id']}{suffix}").write_text(d["content"])
        total += count_tokens(d["content"], "cl100k_base")
    return total
