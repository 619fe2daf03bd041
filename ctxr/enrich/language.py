"""Which natural language a document is written in: offline, once per document, on a sample.

py3langid (BSD-3, numpy only, its naive-Bayes model shipped in the wheel as ``model.npz.xz``,
no pickle, 140 labels) classifies up to ``WINDOWS`` evenly spaced windows of ``WINDOW_CHARS``
characters, so a long document costs what a short one does and a document in two languages is
seen as both (docs/explanation/dependencies.md has the measured choice). A window counts only when
the model's calibrated probability reaches ``MIN_CONFIDENCE``; markup, numbers, code and a few
words rarely do, and so detection fails into "unknown", never into a wrong language.

The model loads once per process (about 0.8 s), when the first prose document is split; each
window then costs about half a millisecond. The language scales the chunk budget (unless
``CTXR_LANGUAGE_BUDGETS`` is off) and goes into the payload as ``natural_language``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

WINDOW_CHARS = 500
WINDOWS = 8
# English windows of FLORES-200 score at least 0.9936 (median 0.999998); text with no language
# in it (a code block, a table of numbers, "Hello world") scores under 0.2. Chosen from those
# two ends, not tuned on any retrieval query.
MIN_CONFIDENCE = 0.9
# Labels that are not a language: "zxx" is py3langid's "no linguistic content".
_NOT_LANGUAGES = frozenset({"zxx", "und"})


@dataclass(frozen=True, slots=True)
class Window:
    """One sampled window: where it starts, its length, and its language (None: unsure)."""

    start: int
    end: int
    language: str | None
    confidence: float


class _Identifier(Protocol):
    def classify(self, text: str) -> tuple[str, float]: ...


@functools.cache
def _identifier() -> _Identifier | None:
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:  # an install without it: every document keeps its plain budget
        log.warning("py3langid is not installed: chunk budgets are not scaled by language")
        return None
    identifier: _Identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    return identifier


def sample_windows(
    text: str, *, width: int = WINDOW_CHARS, count: int = WINDOWS
) -> list[tuple[int, int]]:
    """Up to ``count`` spans of ``width`` characters spread evenly over ``text``; the whole
    text when it is shorter than one window."""
    n = len(text)
    if n <= width:
        return [(0, n)] if text.strip() else []
    windows = min(count, -(-n // width))
    if windows == 1:
        return [(0, width)]
    step = (n - width) / (windows - 1)
    return [(round(i * step), round(i * step) + width) for i in range(windows)]


def detect_windows(text: str) -> list[Window]:
    """The language of each sampled window of ``text``; empty when no detector is installed."""
    identifier = _identifier()
    if identifier is None:
        return []
    out: list[Window] = []
    for start, end in sample_windows(text):
        label, confidence = identifier.classify(text[start:end])
        sure = confidence >= MIN_CONFIDENCE and label not in _NOT_LANGUAGES
        out.append(Window(start, end, label if sure else None, confidence))
    return out


def dominant(windows: Sequence[Window]) -> str | None:
    """The language most windows are in (ties: the first seen), or None if none is sure."""
    counts: dict[str, int] = {}
    for window in windows:
        if window.language is not None:
            counts[window.language] = counts.get(window.language, 0) + 1
    return max(counts, key=lambda lang: counts[lang]) if counts else None
