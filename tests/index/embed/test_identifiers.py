"""Identifiers written as words for the dense embedder (`ctxr.index.embed.identifiers`)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxr.index.embed.identifiers import dense_text, split_counter, split_identifiers, splits


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parseHTTPResponse", "parse HTTP Response"),
        ("XMLHttpRequest", "XML Http Request"),
        ("DiffExecutor::new()", "Diff Executor::new()"),
        ("observe_stdout(buf)", "observe stdout(buf)"),
        ("base64Encode", "base64 Encode"),
        ("MAX_TOKENS", "MAX TOKENS"),
        # Prose, and the mixed-case terms of biology, stay as they are.
        ("mRNA and miRNAs in iPhone users at NASA", "mRNA and miRNAs in iPhone users at NASA"),
        ("HbA1c in HeLa cells, PBMCs and SINEs", "HbA1c in HeLa cells, PBMCs and SINEs"),
        ("getX and isOpen and __init__ and _private", "getX and isOpen and __init__ and _private"),
        ("", ""),
    ],
)
def test_split_identifiers(text: str, expected: str) -> None:
    assert split_identifiers(text) == expected


def test_only_code_is_split_and_only_when_enabled() -> None:
    assert splits("code", True)
    assert not splits("code", False)
    assert not any(splits(kind, True) for kind in ("markdown", "text", "html", "pdf"))
    assert dense_text("fooBarBaz", True) == "foo Bar Baz"
    assert dense_text("fooBarBaz", False) == "fooBarBaz"


def test_counter_counts_the_split_text() -> None:
    words = split_counter(lambda text: len(text.split()), True)
    assert words("parseHttpResponse(raw_bytes)") == 4  # parse Http Response(raw bytes)
    assert split_counter(len, False) is len


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _by_every_word(text: str) -> str:
    """The rule as first written: every word of ``_WORD`` through the cut, one at a time."""

    def one(match: re.Match[str]) -> str:
        word = match.group(0)
        if word.islower() or word.isupper() or (word[0].isupper() and word[1:].islower()):
            return word
        parts = re.split(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", word)
        short = [p for p in parts if len(p) < (2 if p.isupper() or p.isdigit() else 3)]
        return word if len(parts) < 2 or short else " ".join(parts)

    return _WORD.sub(one, re.sub(r"(?<=[A-Za-z0-9])_+(?=[A-Za-z0-9])", " ", text))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aAbBzZ09_ é.:(", max_size=40))
def test_only_mixed_words_are_looked_at_and_the_result_is_the_rule(text: str) -> None:
    assert split_identifiers(text) == _by_every_word(text)
