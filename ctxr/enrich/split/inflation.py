"""Chunk budgets by meaning: a prose document's token budget scaled by its language's inflation.

tiktoken's vocabularies spend more tokens on the same meaning outside English: the same
passage takes 2.27x the tokens in Japanese, 1.92x in Turkish and 4.78x in Hindi with
``cl100k_base``. A budget of 200 tokens therefore holds a fraction of an English chunk's
meaning in those languages. ``language_budget`` detects the document's language on a bounded
sample (``ctxr.enrich.language``) and multiplies the budget by the inflation below, so that a
chunk holds about what an English chunk holds; the embedder's input stays a hard cap after
that (``ctxr.enrich.split.cap``), so with the local MiniLM (256 word pieces) CJK chunks still
end at the cap, and with a long-input embedder they do not.

``INFLATION`` is tokens(language) / tokens(English) over the 2,009 parallel sentences of
FLORES-200 dev + devtest, measured with ``bench/quality/language_inflation.py --flores``. For
cl100k_base it matches the premiums Petrov et al. published ("Language Model Tokenizers
Introduce Unfairness Between Languages", NeurIPS 2023) within 0.03 on the issue's eleven
languages; UDHR Articles 1-3 (tests/data/languages) give figures within ~15% of these.
docs/explanation/evaluation.md has the table beside both. Chinese is Simplified; Serbian (two
scripts under one label) and languages not listed keep the plain budget, as do other encodings.

A document whose sampled windows are in several languages gets the inflation of the whole
sample: its tokens over what the same meaning costs in English (each window's tokens divided
by its language's inflation; a window in no sure language counts as English). English, and
any document where detection fails, keep the budget exactly: ``inflation`` is then 1.0 (and
so it is for a whole-sample inflation under ``MIN_INFLATION``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from ctxr.enrich.language import detect_windows, dominant
from ctxr.tokens import get_encoding
from ctxr.types import DocumentKind

__all__ = [
    "INFLATION",
    "SCALED_KINDS",
    "LanguageBudget",
    "detected_budget",
    "fit_to_input",
    "language_budget",
    "plain_budget",
]

# Every kind but code: prose, Markdown-like renderings, PDF pages and conversations share the
# prose splitting. Code reads alike in every language; its comments are not worth a budget.
SCALED_KINDS: Final[frozenset[DocumentKind]] = frozenset(
    {"markdown", "html", "rst", "notebook", "office", "text", "pdf", "conversation"}
)
# The largest budget a scaled document gets: the most `CTXR_CHUNK_TOKENS` allows.
MAX_SCALED_TOKENS: Final = 8192
# A mostly English document with a stray window in another language (a quotation, a name)
# keeps its budget: every measured language is above 1.2, so under 1.1 is English with noise.
MIN_INFLATION: Final = 1.1
# Word pieces per tiktoken token vary along a text: a budget fitted to the sample's average
# aims a little under the embedder's input, so that few chunks need the cap's second cut.
_FIT_AIM: Final = 0.9

INFLATION: Final[dict[str, dict[str, float]]] = {
    "cl100k_base": {
        "af": 1.69, "am": 7.66, "ar": 3.03, "az": 2.64, "be": 3.53, "bg": 2.63, "bn": 5.82,
        "bs": 1.88, "ca": 1.71, "cs": 2.10, "cy": 2.13, "da": 1.63, "de": 1.58, "el": 5.13,
        "en": 1.00, "eo": 1.87, "es": 1.55, "et": 1.87, "eu": 1.89, "fa": 3.27, "fi": 1.99,
        "fr": 1.60, "ga": 2.32, "gl": 1.56, "gu": 7.67, "he": 3.65, "hi": 4.78, "hr": 1.85,
        "hu": 2.14, "hy": 9.91, "id": 1.55, "is": 2.14, "it": 1.64, "ja": 2.27, "ka": 9.78,
        "kk": 3.78, "km": 8.82, "kn": 8.87, "ko": 2.37, "lt": 2.21, "lv": 2.35, "mk": 2.76,
        "ml": 8.94, "mr": 5.05, "ms": 1.62, "my": 11.64, "ne": 4.77, "nl": 1.60, "no": 1.56,
        "pa": 7.84, "pl": 1.91, "pt": 1.48, "ro": 1.88, "ru": 2.48, "si": 8.77, "sk": 2.14,
        "sl": 1.89, "sq": 2.25, "sv": 1.58, "sw": 1.95, "ta": 7.63, "te": 8.32, "th": 4.35,
        "tl": 2.06, "tr": 1.92, "uk": 2.98, "ur": 4.36, "uz": 2.17, "vi": 2.44, "zh": 1.88,
    },
    "o200k_base": {
        "af": 1.43, "am": 5.83, "ar": 1.38, "az": 1.71, "be": 2.00, "bg": 1.71, "bn": 1.70,
        "bs": 1.50, "ca": 1.48, "cs": 1.60, "cy": 1.73, "da": 1.39, "de": 1.31, "el": 2.14,
        "en": 1.00, "eo": 1.53, "es": 1.32, "et": 1.49, "eu": 1.61, "fa": 1.53, "fi": 1.56,
        "fr": 1.36, "ga": 1.85, "gl": 1.33, "gu": 1.79, "he": 1.48, "hi": 1.58, "hr": 1.48,
        "hu": 1.79, "hy": 1.79, "id": 1.24, "is": 1.61, "it": 1.46, "ja": 1.66, "ka": 1.79,
        "kk": 1.59, "km": 3.34, "kn": 1.99, "ko": 1.47, "lt": 1.69, "lv": 1.82, "mk": 1.78,
        "ml": 1.95, "mr": 1.82, "ms": 1.30, "my": 3.17, "ne": 1.62, "nl": 1.24, "no": 1.35,
        "pa": 2.62, "pl": 1.64, "pt": 1.23, "ro": 1.63, "ru": 1.43, "si": 2.72, "sk": 1.68,
        "sl": 1.51, "sq": 1.83, "sv": 1.35, "sw": 1.48, "ta": 1.98, "te": 1.94, "th": 1.96,
        "tl": 1.69, "tr": 1.43, "uk": 1.75, "ur": 1.66, "uz": 1.77, "vi": 1.48, "zh": 1.26,
    },
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LanguageBudget:
    """A document's language (None: not detected) and the budget scaled for it."""

    language: str | None
    inflation: float  # 1.0: English, undetected, unmeasured, or scaling off
    plain_tokens: int  # the kind's budget before scaling
    max_tokens: int
    sample: tuple[tuple[int, int], ...] = ()  # the windows detection read

    def scale(self, tokens: int) -> int:
        """Another token amount of the same document (an overlap, a parent budget), scaled
        alike; unchanged when the inflation is 1."""
        return tokens if self.inflation == 1.0 else round(tokens * self.inflation)


def plain_budget(max_tokens: int) -> LanguageBudget:
    return LanguageBudget(None, 1.0, max_tokens, max_tokens)


def detected_budget(text: str, max_tokens: int) -> LanguageBudget:
    """``max_tokens`` unscaled, with ``text``'s language detected (language budgets off: the
    language still goes into the payload)."""
    return LanguageBudget(dominant(detect_windows(text)), 1.0, max_tokens, max_tokens)


def language_budget(text: str, max_tokens: int, encoding: str) -> LanguageBudget:
    """``max_tokens`` scaled by the inflation of ``text``'s language(s) under ``encoding``."""
    windows = detect_windows(text)
    language = dominant(windows)
    table = INFLATION.get(encoding)
    if language is None or table is None:
        return LanguageBudget(language, 1.0, max_tokens, max_tokens)
    enc = get_encoding(encoding)
    tokens = 0
    english = 0.0
    for window in windows:
        count = len(enc.encode_ordinary(text[window.start : window.end]))
        tokens += count
        english += count / table.get(window.language or "", 1.0)
    inflation = round(tokens / english, 2) if english else 1.0
    if inflation < MIN_INFLATION:
        return LanguageBudget(language, 1.0, max_tokens, max_tokens)
    scaled = min(MAX_SCALED_TOKENS, max(max_tokens, round(max_tokens * inflation)))
    sample = tuple((w.start, w.end) for w in windows)
    return LanguageBudget(language, inflation, max_tokens, scaled, sample)


def fit_to_input(
    budget: LanguageBudget,
    text: str,
    count: Callable[[str], int],
    limit: int,
    encoding: str,
) -> LanguageBudget:
    """``budget`` no larger than what the embedder reads (``count`` its tokens, ``limit`` its
    input less the context's share), estimated on the detection sample, and never smaller
    than the plain budget.

    A scaled budget past the embedder's input would only be cut again by the cap, into a
    full piece and a remainder: more and smaller chunks than the plain budget gave (measured:
    Korean, Russian and Arabic under MiniLM). So where the cap binds anyway the plain budget
    stands, and where it leaves room (Japanese, Hindi under MiniLM) the budget grows into it.
    """
    if budget.inflation == 1.0 or not budget.sample:
        return budget
    sample = "\n".join(text[start:end] for start, end in budget.sample)
    pieces = count(sample)
    if pieces <= 0:
        return budget
    tokens = len(get_encoding(encoding).encode_ordinary(sample))
    fits = int(limit * tokens / pieces * _FIT_AIM)
    return replace(budget, max_tokens=max(budget.plain_tokens, min(budget.max_tokens, fits)))
