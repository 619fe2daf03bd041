"""Identifiers written as words for the dense embedder (`ctxr.index.embed.identifiers`)."""

from __future__ import annotations

import numpy as np
import pytest
from fakes.hash_embedder import HashEmbedder

from ctxr.config import load_settings
from ctxr.index import components
from ctxr.index.embed.identifiers import NAME_SUFFIX, IdentifierSplitting, split_identifiers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parseHTTPResponse", "parse HTTP Response"),
        ("XMLHttpRequest", "XML Http Request"),
        ("DiffExecutor::new()", "Diff Executor::new()"),
        ("observe_stdout(buf)", "observe stdout(buf)"),
        ("base64Encode", "base64 Encode"),
        ("MAX_TOKENS", "MAX TOKENS"),
        # Prose and short mixed-case words stay as they are.
        (
            "mRNA levels in iPhone users at NASA, Paris",
            "mRNA levels in iPhone users at NASA, Paris",
        ),
        ("getX and __init__ and _private", "getX and __init__ and _private"),
        ("", ""),
    ],
)
def test_split_identifiers(text: str, expected: str) -> None:
    assert split_identifiers(text) == expected


def test_wrapper_embeds_and_counts_the_split_text() -> None:
    inner = HashEmbedder()
    wrapped = IdentifierSplitting(inner)
    assert wrapped.name == inner.name + NAME_SUFFIX  # an unsplit index is refused, not mixed
    assert (wrapped.dim, wrapped.max_tokens) == (inner.dim, inner.max_tokens)
    texts = ["fn parseHttpResponse(raw_bytes)", "plain words"]
    np.testing.assert_array_equal(
        wrapped.embed(texts), inner.embed([split_identifiers(t) for t in texts])
    )
    assert wrapped.count_tokens(texts[0]) == inner.count_tokens(split_identifiers(texts[0]))


def test_the_local_embedder_splits_by_default_and_can_be_told_not_to() -> None:
    on = components.make_embedder(load_settings())
    off = components.make_embedder(load_settings(split_identifiers=False))
    assert isinstance(on, IdentifierSplitting) and not isinstance(off, IdentifierSplitting)
    assert on.name == off.name + NAME_SUFFIX
    # Fewer word pieces for the same code: more of a chunk fits the model's input.
    code = "let observersTuple = self.primaryExecutor.observers_mut();"
    assert on.count_tokens(code) < off.count_tokens(code)
