"""Text -> BM25 terms: the one analyzer used for both documents and queries.

Qdrant only stores and scores sparse vectors; deciding what a "term" is stays on our side,
so index time and query time must run exactly this code. Its :attr:`Bm25Analyzer.name` is
recorded in the index manifest: an index built with different rules must be rebuilt, not
silently queried with mismatched terms. Bump :data:`ANALYZER_VERSION` whenever the output
of :meth:`Bm25Analyzer.terms` changes for any input.

Rules, in order:

1. **Tokens.** Runs of word characters (Unicode letters, digits, ``_``), joined by single
   dots (``os.path.join``), form one token; CJK characters (Han, Hiragana, Katakana, Hangul)
   never belong to such a token and form runs of their own.
2. **CJK runs** become overlapping character bigrams (``東京都`` -> ``東京``, ``京都``); a
   lone CJK character stays a unigram. Written Chinese and Japanese have no spaces, and
   bigrams are the dictionary-free choice Lucene's CJKAnalyzer makes too.
3. **Identifiers.** A token is split on dots into components, each component on ``_`` and
   on case changes (``getUser`` -> get|User, ``HTTPServer`` -> HTTP|Server; digits stick to
   the subword before them: ``base64Encode`` -> base64|Encode). If that yields more than one
   subword, the token emits, in order: the whole token casefolded and verbatim (an exact key
   for code search), then per component the component verbatim (when the token was dotted
   and the component itself compound), then the component's subwords as ordinary words.
   ``HTTPServer.handle_request`` -> ``httpserver.handle_request``, ``httpserver``,
   ``http``, ``server``, ``handle_request``, ``handle``, ``request``. So a prose query
   "handle request" still finds the code, and an exact identifier query ranks it first.
4. **Words** (plain tokens and subwords) are casefolded, dropped if they are stop words,
   and stemmed with Snowball when purely alphabetic. Verbatim identifiers are neither
   stop-filtered nor stemmed. Terms longer than :data:`MAX_TERM_LEN` are dropped (base64
   blobs, minified code): they would only bloat the sparse index.

Speed: text follows Zipf's law, so analysis results are cached per distinct token; a
cache hit costs one dict lookup. Measured on one core (1 MB of licence and README prose):
7.4 M chars/s with a cold cache, 20 M chars/s warm; the vim user manual: 4.9 and 18.5.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator

import snowballstemmer

ANALYZER_VERSION = 1
"""Bump when tokenisation, splitting, stop words or stemming change any output."""

MAX_TERM_LEN = 100
"""Longer terms are dropped; Lucene's StandardTokenizer caps tokens at 255 for the same reason."""

# Lucene's EnglishAnalyzer default set (33 words): small on purpose, so that phrases like
# "to be or not to be" lose little and code words ("for", "if") are kept.
# fmt: off
ENGLISH_STOP_WORDS: frozenset[str] = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
})
# fmt: on

# CJK scripts: Hangul Jamo, CJK symbols' iteration marks (々〆〇), Hiragana, Katakana
# (+ phonetic extensions), Hangul compatibility Jamo, Han (ext. A, unified, compatibility,
# ext. B+), Hangul syllables, halfwidth Katakana.
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_WORD = rf"[^\W{_CJK}]"  # a word character that is not CJK
# Two groups so that findall() says which kind each match is without a second pass.
_TOKEN_RE = re.compile(rf"({_WORD}+(?:\.{_WORD}+)*)|([{_CJK}]+)")

_CacheFn = Callable[[str], tuple[str, ...]]


def _camel_split(component: str) -> list[str]:
    """Split one ``_``-free component on case changes; digits join the preceding subword."""
    parts: list[str] = []
    start = 0
    n = len(component)
    for i in range(1, n):
        c = component[i]
        if not c.isupper():
            continue
        p = component[i - 1]
        # lower->Upper ("getUser"), digit->Upper ("v2Api"), and the last capital of an
        # acronym that starts a new word ("HTTPServer": split before "S").
        if p.islower() or p.isdigit() or (p.isupper() and i + 1 < n and component[i + 1].islower()):
            parts.append(component[start:i])
            start = i
    parts.append(component[start:])
    return parts


def _subwords(component: str) -> list[str]:
    """The subwords of one dot-free component: split on ``_``, then on case changes."""
    out: list[str] = []
    for piece in component.split("_"):
        if piece:
            out.extend(_camel_split(piece))
    return out


def _cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


class Bm25Analyzer:
    """Turns text into BM25 terms (see the module docstring for the exact rules).

    Instances are cheap to share and safe to use from several threads: the caches are
    thread-safe and the (stateful) Snowball stemmer is only called under a lock.
    """

    def __init__(
        self, language: str = "english", stem: bool = True, stopwords: bool = True
    ) -> None:
        language = language.lower()
        if stopwords and language != "english":
            raise ValueError(
                f"No stop-word list for language {language!r} (only 'english' has one); "
                "pass stopwords=False."
            )
        self._stemmer: snowballstemmer.Stemmer | None = None
        if stem:
            try:
                self._stemmer = snowballstemmer.stemmer(language)
            except KeyError:
                known = ", ".join(sorted(snowballstemmer.algorithms()))
                raise ValueError(
                    f"Snowball has no stemmer for language {language!r}; use one of: {known}, "
                    "or pass stem=False."
                ) from None
        self._language = language
        self._stem_enabled = stem
        self._stop: frozenset[str] = ENGLISH_STOP_WORDS if stopwords else frozenset()
        self._lock = threading.Lock()
        # Per-instance caches (not module-level): settings differ between instances.
        self._stem: Callable[[str], str] = functools.lru_cache(maxsize=1 << 17)(self._stem_word)
        self._analyse: _CacheFn = functools.lru_cache(maxsize=1 << 18)(self._analyse_token)

    @property
    def name(self) -> str:
        """Versioned id of these exact rules, e.g. ``ctxr-bm25/1:english+stem+stop``."""
        flags = ("+stem" if self._stem_enabled else "") + ("+stop" if self._stop else "")
        return f"ctxr-bm25/{ANALYZER_VERSION}:{self._language}{flags}"

    def terms(self, text: str) -> list[str]:
        """Analysed terms of ``text`` in order, repeats kept (term frequency matters)."""
        out: list[str] = []
        analyse = self._analyse
        for token, cjk in _TOKEN_RE.findall(text):
            if token:
                out.extend(analyse(token))
            else:
                # Not cached: CJK runs are whole phrases, rarely repeated verbatim.
                out.extend(_cjk_bigrams(cjk))
        return out

    def term_spans(self, text: str) -> Iterator[tuple[int, int, tuple[str, ...]]]:
        """Where `terms` finds its terms: `(start, end, terms)` per token of ``text``, in order
        (a CJK bigram is its own span), so a reader can mark the words that share a term with
        a query. Offsets are Python's (code points)."""
        analyse = self._analyse
        for found in _TOKEN_RE.finditer(text):
            token, cjk = found.group(1), found.group(2)
            if token:
                terms = analyse(token)
                if terms:
                    yield found.start(), found.end(), terms
            else:
                start = found.start()
                if len(cjk) == 1:
                    yield start, start + 1, (cjk,)
                for i in range(len(cjk) - 1):
                    yield start + i, start + i + 2, (cjk[i : i + 2],)

    def __repr__(self) -> str:
        return f"Bm25Analyzer(name={self.name!r})"

    def _stem_word(self, word: str) -> str:
        if self._stemmer is None:
            return word
        with self._lock:  # Snowball stemmers keep their working string on the instance.
            stemmed: str = self._stemmer.stemWord(word)
        return stemmed

    def _word(self, word: str) -> str | None:
        """A plain word -> its term, or None when it is a stop word or too long."""
        word = word.casefold()
        if word in self._stop or len(word) > MAX_TERM_LEN:
            return None
        if word.isalpha():
            word = self._stem(word)
        return word

    def _analyse_token(self, token: str) -> tuple[str, ...]:
        if "." not in token and "_" not in token:
            # Fast path for prose: no case change after the first letter -> a plain word.
            rest = token[1:]
            if rest.islower() or not any(c.isupper() for c in rest):
                word = self._word(token)
                return (word,) if word else ()
        components = token.split(".")
        split = [_subwords(c) for c in components]
        n_subwords = sum(len(s) for s in split)
        if n_subwords == 0:  # "___" or "_._": nothing searchable
            return ()
        terms: list[str] = []
        dotted = len(components) > 1
        if dotted or n_subwords > 1 or token != split[0][0]:
            # Compound ("getUser"), dotted, or decorated ("__init__"): keep the exact form.
            terms.append(token.casefold())
        for component, subwords in zip(components, split, strict=True):
            if dotted and len(subwords) > 1:
                terms.append(component.casefold())
            for sub in subwords:
                word = self._word(sub)
                if word:
                    terms.append(word)
        return tuple(t for t in terms if len(t) <= MAX_TERM_LEN)
