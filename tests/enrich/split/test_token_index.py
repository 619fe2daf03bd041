"""The token index counts every span exactly as encoding the span on its own would.

Its correctness rests on an argument about tiktoken's pre-tokenizing patterns (see
``ctxr.enrich.split.token_index``); these tests attack that argument with text made of what
the patterns treat specially: runs of spaces, tabs and line breaks (``\\r\\n`` too), slashes at
line starts, punctuation before newlines, digits, contractions, non-ASCII letters, emoji,
no-break and ideographic spaces, control characters Python calls whitespace and the regex
does not, and special-token text. Every span of such a text, at every start and end, must
count the same through the index and directly, for both seeded encodings.
"""

from __future__ import annotations

import os

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxr.enrich.split.sizing import Sizer, char_byte_offsets  # noqa: E402
from ctxr.enrich.split.token_index import INDEX_MIN_CHARS, TokenIndex  # noqa: E402
from ctxr.tokens import SEEDABLE, get_encoding  # noqa: E402

ATOMS = [
    "word", "Word", "x", "ünïcödé", "日本語", "😀", "42", "3.14", "1234567", "don't", "I'm",
    " ", "  ", "\t", " \t ", "\n", "\n\n", "\r\n", " \n", "\n  ", "\n\t", "\u00a0", "\u3000",
    "\x1c", "\x0b", "\x0c", ".", "...", "!?", "/", "//", "/*", "*/", "(", ")", "{", "}", "#",
    "-", "'", '"', "<|endoftext|>", "==", "->", "::", "\u0301", "'s", "});", "\r",
]  # fmt: skip

texts = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=80).map("".join)


def direct(encoding: str, text: str) -> int:
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


@pytest.mark.parametrize("encoding", SEEDABLE)
@settings(max_examples=int(os.environ.get("CTXR_PROPERTY_EXAMPLES", "150")), deadline=None)
@given(text=texts, data=st.data())
def test_every_span_counts_as_its_own_encoding(
    encoding: str, text: str, data: st.DataObject
) -> None:
    enc = get_encoding(encoding)
    index = TokenIndex(text, enc)
    for _ in range(12):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, len(text)))

        def count(a: int, b: int) -> int:
            return direct(encoding, text[a:b])

        assert index.count(start, end, count) == count(start, end), (start, end)


@pytest.mark.parametrize("encoding", SEEDABLE)
def test_all_spans_of_a_tricky_text(encoding: str) -> None:
    """Exhaustive over one text that packs the known hazards close together."""
    text = (
        "def f(x):\n    return x.\n/ slash\n.\n/path\tx  \t y\r\n\r\n  z 12345 don't\n"
        "\u00a0nbsp \u3000ideo\x1cctl\n\x0bvt é😀 <|endoftext|> end.\n\n// c\n"
        "cafe\u0301.\n\ndogs'.\nit's.\n3.14.\r\n(x) ;\n\t}\n  })\n\x1c.\n"
    )
    enc = get_encoding(encoding)
    index = TokenIndex(text, enc)

    def count(a: int, b: int) -> int:
        return direct(encoding, text[a:b])

    for start in range(len(text) + 1):
        for end in range(start, len(text) + 1):
            assert index.count(start, end, count) == count(start, end), (start, end)


def test_sizer_uses_the_index_for_long_spans_and_agrees() -> None:
    text = ("A paragraph of prose with numbers 3.5 and words.\n\n" * 40) + "    indented() end"
    assert len(text) > INDEX_MIN_CHARS
    sizer = Sizer(text, "cl100k_base")
    assert sizer.count(0, len(text)) == direct("cl100k_base", text)
    assert sizer._index is not None  # the long count built it
    for start, end in [(2, 900), (50, len(text)), (100, 140), (0, 513), (1001, 1800)]:
        assert sizer.count(start, end) == direct("cl100k_base", text[start:end])


@pytest.mark.parametrize("encoding", SEEDABLE)
def test_long_spans_cost_a_word_at_each_end_not_a_re_encoding(encoding: str) -> None:
    """The index must answer from the document's tokens; falling back to encoding the span
    would still be exact, so only the amount encoded shows that the index works."""
    paragraph = "Naïve Bayes (≈ 3.5\u00d7 faster) — 検索 and 😀 emoji, then /paths and\tTabs.\n\n"
    text = paragraph * 30 + "// end"
    enc = get_encoding(encoding)
    index = TokenIndex(text, enc)
    encoded: list[int] = []

    def count(a: int, b: int) -> int:
        encoded.append(b - a)
        return direct(encoding, text[a:b])

    for start, end in [(0, len(text)), (5, 2000), (len(paragraph), 5 * len(paragraph) - 2)]:
        encoded.clear()
        assert index.count(start, end, count) == direct(encoding, text[start:end])
        assert sum(encoded) < 40, (start, end, encoded)


def test_byte_offsets_of_characters() -> None:
    assert char_byte_offsets("plain ascii") is None
    offsets = char_byte_offsets("aé日😀b")
    assert offsets is not None
    assert offsets.tolist() == [0, 1, 3, 6, 10, 11]
