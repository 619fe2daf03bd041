"""One open shard per index per process: services on one index share it, the last close closes
it, and a refused open names this process, not another, when the caller itself holds it."""

from __future__ import annotations

import os

import pytest

from ctxr.config import load_settings
from ctxr.errors import IndexInUseError
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.retrieve import shared
from ctxr.retrieve.searcher import SearchOptions
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex

QUERY = "fix LUM-E310 migration lock held"


def test_two_services_on_one_index_share_the_shard(examples_index: BuiltIndex) -> None:
    settings = examples_index.settings_with()
    first = SearchService(settings)
    # Another spelling of the same directory, other search settings: the same open shard.
    other = load_settings(
        index_dir=examples_index.index_dir / ".." / examples_index.index_dir.name,
        cache_dir=examples_index.cache_dir,
        fusion="rrf",
    )
    second = SearchService(other)
    try:
        assert shared.users(examples_index.index_dir) == 2
        assert first.search(QUERY, 3) and second.search(QUERY, SearchOptions(k=2))
        first.close()
        first.close()  # a second close gives back nothing more
        assert shared.users(examples_index.index_dir) == 1
        assert len(second.search(QUERY, 2)) == 2  # still open for the one left
    finally:
        first.close()
        second.close()
    assert shared.users(examples_index.index_dir) == 0
    # Closed for good: the shard opens again outside the registry.
    EdgeStore.open(shard_path(examples_index.index_dir)).close()


def test_an_open_refused_by_this_process_names_this_process(examples_index: BuiltIndex) -> None:
    settings = examples_index.settings_with()
    with SearchService(settings), pytest.raises(IndexInUseError) as refused:
        EdgeStore.open(shard_path(examples_index.index_dir))  # not through the registry
    message = str(refused.value)
    assert f"this process (pid {os.getpid()})" in message
    assert "another" not in message and "ctxr.Client" in message
