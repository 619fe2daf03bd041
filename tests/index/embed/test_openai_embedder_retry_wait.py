"""A retry-after longer than the embedder will wait fails at once, saying what was asked."""

from __future__ import annotations

import pytest

from ctxr.errors import EmbedderError
from ctxr.index.embed.openai import OpenAIEmbedder
from tests.fakes.llm_server import FakeLLMServer


def test_an_hours_retry_after_is_not_waited_for(fake_llm: FakeLLMServer) -> None:
    fake_llm.inject("429", retry_after_s=3600)
    slept: list[float] = []
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", dimensions=64, api_key="test",
        base_url=fake_llm.openai_base_url, sleep=slept.append,
    )  # fmt: skip
    with pytest.raises(EmbedderError, match="asked to wait 3600 s"):
        embedder.embed(["a passage"])
    assert slept == [] and embedder.requests_sent == 1
