"""The splitter's invariants, structure rules and sentence rule."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from ctxr.enrich.split import split_document
from ctxr.enrich.split.recursive import sentences
from ctxr.errors import ConfigError
from ctxr.types import DocumentKind
from tests.fixtures.chunks import split_checked
from tests.fixtures.documents import make_document

MARKDOWN = """# Guide

Welcome to the guide. It explains everything.

## Install

You need Python 3.11 or later.

### From source

```bash
# clone the repository
git clone https://example.org/repo.git
## still not a heading
cd repo
```

### From PyPI

~~~
# pip, not a heading either
pip install thing
~~~

## Usage

| option | meaning |
|--------|---------|
| -v     | verbose |
| -q     | quiet   |

Usage Notes
-----------

Some closing words.

# Reference

The end.
"""


def test_markdown_heading_trails_and_fences() -> None:
    doc = make_document(MARKDOWN, "markdown")
    chunks = split_checked(doc, 40)
    paths = {c.heading_path for c in chunks}
    assert ("Guide", "Install", "From source") in paths
    assert ("Guide", "Install", "From PyPI") in paths
    assert ("Guide", "Usage Notes") in paths  # setext level 2 under the level-1 "Guide"
    assert ("Reference",) in paths
    # '#' lines inside fences are code, not headings.
    assert not any("clone" in "/".join(p) or "pip" in "/".join(p) for p in paths)
    for fence in (r"```bash.*?```", r"~~~.*?~~~"):
        match = re.search(fence, MARKDOWN, re.DOTALL)
        assert match is not None
        assert any(c.start <= match.start() and match.end() <= c.end for c in chunks)
    for chunk in chunks:  # the chunk's own heading, if it starts with one, ends its trail
        first = chunk.text.splitlines()[0]
        if first.startswith("#"):
            assert chunk.heading_path[-1] == first.lstrip("#").strip()


def test_markdown_merges_nested_sections_but_not_siblings() -> None:
    doc = make_document(MARKDOWN, "markdown")
    chunks = split_checked(doc, 2000)
    # Everything under "# Guide" nests under it; "# Reference" is a same-level sibling.
    assert [c.heading_path for c in chunks] == [("Guide",), ("Reference",)]
    assert chunks[1].text == "# Reference\n\nThe end."


def test_markdown_continuation_prefix() -> None:
    body = " ".join(f"Sentence number {i} talks about installing things." for i in range(80))
    text = f"# Guide\n\nIntro.\n\n## Install\n\n{body}\n\n## Next\n\nDone.\n"
    doc = make_document(text, "markdown")
    chunks = split_checked(doc, 64)
    install = [c for c in chunks if c.heading_path == ("Guide", "Install")]
    assert len(install) > 2
    assert install[0].text.startswith("## Install")
    assert install[0].prefix == ""
    for chunk in install[1:]:
        assert chunk.prefix == "# Guide\n## Install"
        assert "## Install" not in chunk.text
    assert chunks[-1].heading_path == ("Guide", "Next")
    assert chunks[-1].prefix == ""


def test_markdown_table_cut_between_rows_with_header_prefix() -> None:
    rows = "".join(f"| row {i} | value {i} and some more words |\n" for i in range(60))
    text = f"## Data\n\n| name | value |\n|------|-------|\n{rows}\nAfter the table.\n"
    doc = make_document(text, "markdown")
    chunks = split_checked(doc, 50)
    line_starts = {0} | {m.end() for m in re.finditer("\n", text)}
    line_ends = {m.start() for m in re.finditer("\r?\n", text)} | {len(text)}
    for chunk in chunks:
        assert chunk.start in line_starts
        assert chunk.end in line_ends
    assert len(chunks) > 3
    for chunk in chunks[1:]:
        if chunk.text.startswith("| row"):
            assert chunk.prefix == "## Data\n\n| name | value |\n|------|-------|"


@pytest.mark.parametrize("gap", ["\n\n", "\n"])
def test_markdown_list_stays_with_the_line_that_introduces_it(gap: str) -> None:
    # Sweep the filler so that, somewhere, greedy packing would end a chunk right after
    # "Before you start:" (with a blank line before the list) or cut the long list's block
    # by lines right after it (no blank line).
    items = "\n".join(f"- step {i}: check the {i}th thing" for i in range(12))
    for words in range(5, 60, 3):
        filler = " ".join(f"filler{i}" for i in range(words))
        text = f"# Setup\n\n{filler}.\n\nBefore you start:{gap}{items}\n\nThe end.\n"
        doc = make_document(text, "markdown")
        chunks = split_checked(doc, 48)
        first_item = next(c for c in chunks if "- step 0:" in c.text)
        assert "Before you start:" in first_item.text, (words, [c.text for c in chunks])


def test_big_fence_is_split_by_lines() -> None:
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(200))
    text = f"# Code\n\n```python\n{code}\n```\n"
    doc = make_document(text, "markdown")
    chunks = split_checked(doc, 60)
    assert len(chunks) > 5
    line_ends = {m.start() for m in re.finditer("\n", text)} | {len(text)}
    assert all(c.end in line_ends for c in chunks)


def test_markdown_crlf_and_unicode() -> None:
    text = MARKDOWN.replace("Welcome", "Willkommen, Grüße 😀 欢迎").replace("\n", "\r\n")
    doc = make_document(text, "markdown")
    chunks = split_checked(doc, 30)
    assert ("Guide", "Install", "From source") in {c.heading_path for c in chunks}
    assert all("\r" not in part for c in chunks for part in c.heading_path)


PYTHON = '''"""A module."""

import os
import sys


def first(x: int) -> int:
    """Double it."""
    y = x * 2

    return y


class Thing:
    def method(self) -> str:
        return os.sep

    def other(self) -> None:
        print(sys.argv)


def last() -> None:
    # a comment with # marks
    pass
'''


def test_code_file_splits_at_top_level_definitions() -> None:
    doc = make_document(PYTHON * 3, "code")
    chunks = split_checked(doc, 48)
    for prev, cur in itertools.pairwise(chunks):
        assert prev.end <= cur.start  # no overlap for code by default
    assert all(c.heading_path == () and c.prefix == "" for c in chunks)
    assert any(c.text.startswith("class Thing") for c in chunks)


UNICODE = (
    "Grüße aus München! Die Straße ist schön, z.B. im Frühling. Über 3.14 Äpfel.\r\n"
    "中文句子在这里。另一个句子！第三句？\r\n"  # noqa: RUF001 - CJK punctuation on purpose
    "Emoji time 😀👍🏽 and a family 👨‍👩‍👧 walk into a bar. Dr. Who was there.\r\n\r\n"
)


def test_unicode_crlf_text_with_overlap() -> None:
    doc = make_document(UNICODE * 30, "text")
    chunks = split_checked(doc, 60)
    overlapping = sum(prev.end > cur.start for prev, cur in itertools.pairwise(chunks))
    assert overlapping > 0  # text gets 10% overlap by default
    for chunk in chunks:  # overlap starts at a word boundary, never mid-word
        assert (
            chunk.start == 0
            or doc.text[chunk.start - 1].isspace()
            or (doc.text[chunk.start - 1] in "\u3002\uff01\uff1f")
        )


@pytest.mark.parametrize("kind", ["text", "code", "markdown"])
def test_huge_single_line_never_exceeds_budget(kind: DocumentKind) -> None:
    words = " ".join(f"word{i}" for i in range(20000))
    blob = "x9Z/" * 3000  # no whitespace at all: cut at token boundaries
    cjk = "这是一个没有空格的很长的中文段落😀" * 300
    doc = make_document(f"{words} {blob} {cjk}", kind)
    chunks = split_checked(doc, 100)
    assert max(c.token_count for c in chunks) > 80  # chunks are filled, not scraps


def test_sentence_rule_keeps_abbreviations_and_decimals() -> None:
    text = (
        "Dr. Smith measured 3.14 units, e.g. in the U.S. lab. It worked! "
        "Prices rose approx. five percent. Did it? Yes."
    )
    got = [text[s:e] for s, e in sentences(text, 0, len(text))]
    assert got == [
        "Dr. Smith measured 3.14 units, e.g. in the U.S. lab.",
        "It worked!",
        "Prices rose approx. five percent.",
        "Did it?",
        "Yes.",
    ]


def test_deterministic_and_empty() -> None:
    doc = make_document(UNICODE * 10 + MARKDOWN, "text")
    assert split_document(doc, max_tokens=40) == split_document(doc, max_tokens=40)
    assert split_document(make_document(" \r\n\t ", "markdown")) == []
    assert split_document(make_document("", "text")) == []


def test_bad_budgets_are_rejected() -> None:
    doc = make_document("hello", "text")
    with pytest.raises(ConfigError, match="max_tokens"):
        split_document(doc, max_tokens=2)
    with pytest.raises(ConfigError, match="overlap_tokens"):
        split_document(doc, max_tokens=100, overlap_tokens=80)


# Pieces that random documents are made of: structure markers, abbreviations, CRLF, wide and
# combined characters, words long and short.
PARTS = [
    *"ab .,!?|#=-`~\n\t", "\r\n", "Dr.", "3.14", "e.g.", "```", "~~~", "# ", "## ", "ü", "中",
    "😀", "👨\u200d👩\u200d👧", "word", " longerword", "\n\n", "|---|", "---\n", "x" * 40,
]  # fmt: skip
KINDS: list[DocumentKind] = ["text", "code", "markdown"]


def test_invariants_hold_for_random_texts() -> None:
    """A seeded stand-in for the property test below, so it runs without hypothesis too."""
    rng = random.Random(1234)
    for _ in range(200):
        text = "".join(rng.choices(PARTS, k=rng.randrange(0, 400)))
        doc = make_document(text, rng.choice(KINDS))
        max_tokens = rng.randrange(4, 80)
        overlap = rng.choice([None, 0, 1, max_tokens // 4])
        split_checked(doc, max_tokens, overlap)


try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is a dev extra
    pass
else:

    @settings(max_examples=200, deadline=None)
    @given(
        parts=st.lists(st.sampled_from(PARTS), max_size=300),
        kind=st.sampled_from(KINDS),
        max_tokens=st.integers(min_value=4, max_value=64),
        overlap=st.one_of(st.none(), st.integers(min_value=0, max_value=2)),
    )
    def test_invariants_hold_for_any_text(
        parts: list[str], kind: DocumentKind, max_tokens: int, overlap: int | None
    ) -> None:
        doc = make_document("".join(parts), kind)
        split_checked(doc, max_tokens, overlap)
