"""Shared fixtures: the examples corpus indexed once per session with the real local embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.pipeline.build import build_index
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

# Fixtures of the loopback fake LLM server (fake_llm, fake_llm_factory, fake_llm_env).
pytest_plugins = ["tests.fakes.pytest_plugin"]


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's CTXR_* variables or provider keys must not change what the tests see
    (a real ANTHROPIC_API_KEY would turn `--context auto` into paid LLM calls)."""
    for name in list(os.environ):
        if name.startswith(("CTXR_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def embed_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the session: re-indexing the examples elsewhere costs no model."""
    return tmp_path_factory.mktemp("embed-cache")


@pytest.fixture(scope="session")
def examples_index(tmp_path_factory: pytest.TempPathFactory, embed_cache_dir: Path) -> BuiltIndex:
    """`examples/` indexed with the real OnnxEmbedder, from the repo root as the README runs it,
    so sources read `examples/...` like the judged set's. Read-only for tests: open a
    `SearchService` per test and close it (a Qdrant shard can be open only once at a time)."""
    index_dir = tmp_path_factory.mktemp("examples-index") / "idx"
    settings = load_settings(index_dir=index_dir, cache_dir=embed_cache_dir)
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        report = build_index(["examples"], settings)
    finally:
        os.chdir(cwd)
    return BuiltIndex(settings, report, index_dir, embed_cache_dir)


@pytest.fixture
def in_repo_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(ROOT)
    yield ROOT
