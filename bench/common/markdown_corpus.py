"""A synthetic Markdown corpus on disk at any size: files that ctxr indexes as a user's notes.

Each file is one document: a title (``# ...``), then `SECTIONS` sections, each a ``## ...``
heading over one paragraph of `SECTION_WORDS` words. Words come from
`bench.common.synthetic`'s vocabulary (real English and real-looking words, code identifiers)
under its Zipf law, in sentences of about 12 words, so BM25 sees realistic term statistics.
ctxr's Markdown splitter gives each section its own chunk at the default 200-token budget:
about `SECTIONS` chunks a file (9.9 measured). File number ``n`` lives in folder
``part{n % PARTS}``, so a ``source`` filter on one folder keeps a tenth of the corpus.

Every file's text is a function of the seed and its number alone (its own generator), so a
corpus is written in one pass with little memory, and `edit` rewrites one section of a share
of the files, deterministically, as a user's edits would.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from bench.common.synthetic import ZIPF_S, Corpus, make_vocab

SECTIONS = 10
SECTION_WORDS = (30, 85)  # a paragraph's word count, both ends included: ~110 tokens
PARTS = 10
HEADING_WORDS = 3
SENTENCE_WORDS = 12


@dataclass(frozen=True)
class MarkdownCorpus:
    root: Path
    seed: int
    files: int
    vocab: list[str]
    probs: npt.NDArray[np.float64]
    cdf: npt.NDArray[np.float64]

    @property
    def words(self) -> Corpus:
        """The vocabulary and its law, as `synthetic.make_queries` takes them."""
        return Corpus(texts=[], vocab=self.vocab, probs=self.probs)

    def path(self, number: int) -> Path:
        return self.root / f"part{number % PARTS}" / f"doc{number:07d}.md"

    def text(self, number: int, edit: int = 0) -> str:
        """File `number`'s text; with edit round `edit` (1, 2, ...), the paragraph of section
        ``(edit - 1) % SECTIONS`` redrawn from a generator of its own."""
        rng = np.random.default_rng([self.seed, number])
        title = self._phrase(rng, HEADING_WORDS).title()
        headings = [self._phrase(rng, HEADING_WORDS).capitalize() for _ in range(SECTIONS)]
        bodies = [self._paragraph(rng) for _ in range(SECTIONS)]
        if edit:
            edited = np.random.default_rng([self.seed, number, edit])
            bodies[(edit - 1) % SECTIONS] = self._paragraph(edited)
        sections = "".join(f"\n## {h}\n\n{b}\n" for h, b in zip(headings, bodies, strict=True))
        return f"# {title}\n{sections}"

    def _draw(self, rng: np.random.Generator, count: int) -> list[str]:
        ids = np.searchsorted(self.cdf, rng.random(count), side="right")
        return [self.vocab[i] for i in np.minimum(ids, len(self.vocab) - 1)]

    def _phrase(self, rng: np.random.Generator, count: int) -> str:
        return " ".join(self._draw(rng, count))

    def _paragraph(self, rng: np.random.Generator) -> str:
        words = self._draw(rng, int(rng.integers(SECTION_WORDS[0], SECTION_WORDS[1] + 1)))
        sentences = (
            " ".join(words[i : i + SENTENCE_WORDS]) for i in range(0, len(words), SENTENCE_WORDS)
        )
        return ". ".join(s.capitalize() for s in sentences) + "."


def corpus(root: Path, chunks: int, seed: int) -> MarkdownCorpus:
    """The corpus of about `chunks` chunks (``ceil(chunks / SECTIONS)`` files) under `root`,
    whether or not it is written yet."""
    rng = np.random.default_rng(seed)
    vocab = make_vocab(rng)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    probs = ranks**-ZIPF_S
    probs /= probs.sum()
    files = -(-chunks // SECTIONS)
    return MarkdownCorpus(root, seed, files, vocab, probs, np.cumsum(probs))


def write(corpus: MarkdownCorpus) -> int:
    """Write every file of `corpus`; returns the bytes written."""
    for part in range(min(PARTS, corpus.files)):
        (corpus.root / f"part{part}").mkdir(parents=True, exist_ok=True)
    total = 0
    for number in range(corpus.files):
        data = corpus.text(number).encode("utf-8")
        corpus.path(number).write_bytes(data)
        total += len(data)
    return total


def edit(corpus: MarkdownCorpus, share: float, round_: int) -> list[int]:
    """Edit round `round_` (1, 2, ...): one section of every ``1 / share``-th file rewritten
    (at least one file), from an offset that moves with the round, so that each round edits
    other files; returns the numbers of the files rewritten."""
    step = max(1, round(1 / share))
    numbers = list(range((round_ - 1) % step, corpus.files, step))
    for number in numbers:
        corpus.path(number).write_text(corpus.text(number, round_), encoding="utf-8")
    return numbers
