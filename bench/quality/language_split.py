"""Chunk sizes by language, with and without language budgets, through `ctxr split`'s
own chunker (`default_chunker`: kind budget, language scaling, the embedder's cap).

For each language a plain-text document of the same passages is split at the default budget
(200 tiktoken tokens, 10% overlap) four ways: language budgets off / on, each under the local
MiniLM (256 word pieces, 48 kept for the context: the cap binds for CJK) and under OpenAI's
text-embedding-3 input (8,191 tokens: the cap does not bind; counted offline with tiktoken,
no request is made). Reported per language: chunks, median and mean characters per chunk.

Documents: with ``--flores DIR`` (FLORES-200 with ``devtest/``) the first ``--sentences``
sentences of devtest, five to a paragraph, the same sentences in every language; otherwise
UDHR Articles 1-3 (tests/data/languages) repeated ``--repeat`` times (smaller and repetitive:
good for a smoke run, not for figures). Counts only, nothing timed. Usage::

    python -m bench.quality.language_split [--flores DIR] [--sentences 200] [--langs en,ja,tr]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import TESTS
from bench.common.measure import parser as cli
from ctxr.config import load_settings
from ctxr.index import components
from ctxr.pipeline.chunking import chunk_budget, default_chunker
from ctxr.types import Document

UDHR = TESTS / "data" / "languages" / "udhr_1_3.json"
FLORES = {
    "en": "eng_Latn", "ja": "jpn_Jpan", "zh": "zho_Hans", "ko": "kor_Hang", "ru": "rus_Cyrl",
    "ar": "arb_Arab", "hi": "hin_Deva", "tr": "tur_Latn", "de": "deu_Latn", "fr": "fra_Latn",
    "es": "spa_Latn",
}  # fmt: skip


def paragraphs(args: argparse.Namespace, lang: str) -> list[str]:
    if args.flores:
        path = args.flores / "devtest" / f"{FLORES[lang]}.devtest"
        lines = path.read_text(encoding="utf-8").split("\n")[: args.sentences]
        sep = "" if lang in ("ja", "zh") else " "
        return [sep.join(lines[i : i + 5]) for i in range(0, len(lines), 5)]
    texts: list[str] = json.loads(UDHR.read_text(encoding="utf-8"))["texts"][lang]
    return texts * args.repeat


def document(lang: str, text: str) -> Document:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Document(f"bench-{lang}", f"{lang}.txt", text, "text", lang, digest)


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--flores", type=Path)
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--langs", default=",".join(FLORES))
    args = parser.parse_args(argv)
    # The OpenAI embedder only counts here (tiktoken, offline); a key is required to build it.
    os.environ.setdefault("OPENAI_API_KEY", "bench-no-request-is-made")
    embedders = {
        "MiniLM": components.make_embedder(load_settings(embedder="local")),
        "OpenAI": components.make_embedder(load_settings(embedder="openai")),
    }
    print(
        "| language | embedder | off: chunks, median / mean chars "
        "| on: x inflation -> budget, chunks, median / mean chars |"
    )
    print("|---|---|---|---|")
    for lang in args.langs.split(","):
        doc = document(lang, "\n\n".join(paragraphs(args, lang)))
        for name, embedder in embedders.items():
            cells = []
            for on in (False, True):
                settings = load_settings(language_budgets=on)
                chunks = default_chunker(settings, embedder)(doc)
                chars = [len(c.text) for c in chunks]
                median, mean = statistics.median(chars), statistics.mean(chars)
                cell = f"{len(chunks)}, {median:.0f} / {mean:.0f}"
                if on:
                    budget = chunk_budget(settings, doc, embedder)
                    scaled = f"x{budget.inflation:g} ({budget.language}) -> {budget.max_tokens}"
                    cell = f"{scaled}, {cell}"
                cells.append(cell)
            print(f"| {lang} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
