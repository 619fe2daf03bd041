"""Fixtures for the fake LLM server, registered in ``tests/conftest.py`` with
``pytest_plugins = ["tests.fakes.pytest_plugin"]``.

- ``fake_llm``: a started `FakeLLMServer` with default settings, stopped after the test.
- ``fake_llm_factory``: ``fake_llm_factory(latency=0.05, rpm_limit=600, ...)`` starts one
  with any `FakeLLMServer` keyword; all are stopped after the test.
- ``fake_llm_env``: ``fake_llm`` with ``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` and test API
  keys set in the environment, for code that builds its own SDK clients (CLI, subprocesses).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .llm_server import FakeLLMServer


@pytest.fixture
def fake_llm_factory() -> Iterator[Callable[..., FakeLLMServer]]:
    started: list[FakeLLMServer] = []

    def make(**kwargs: Any) -> FakeLLMServer:
        server = FakeLLMServer(**kwargs).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def fake_llm_env(fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    for name, value in fake_llm.env().items():
        monkeypatch.setenv(name, value)
    return fake_llm
