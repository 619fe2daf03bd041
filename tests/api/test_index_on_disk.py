"""The server and the index on disk: damaged, deleted, replaced, or held by another server.

Before, a damaged shard stopped `ctxr serve` from starting (the warm-up search raised a plain
exception), a deleted index kept answering 200 from the files the server still held open, and
a second server stayed 503 after the first one stopped.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ctxr.api import holder as holder_module
from ctxr.api.app import create_app
from ctxr.config import Settings, load_settings
from ctxr.pipeline.build import build_index
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

QUERY = {"query": "backup and restore", "k": 3}
# Another process holding the index open until its stdin closes.
HOLD = """import sys, ctxr
service = ctxr.open_index(sys.argv[1], cache_dir=sys.argv[2])
print("open", flush=True)
sys.stdin.read()
service.close()
"""


@pytest.fixture(autouse=True)
def _check_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Requests look at the disk at most once a second and retry at most every two; the tests
    # look at once (this changes when the holder looks, not what it does).
    monkeypatch.setattr(holder_module, "CHECK_SECONDS", 0.0)
    monkeypatch.setattr(holder_module, "RETRY_SECONDS", 0.0)


def _copy(index: BuiltIndex, to: Path) -> Settings:
    return index.settings_with(index_dir=index.copy_to(to))


def test_a_damaged_store_starts_and_answers_503_with_the_reason(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    settings = _copy(examples_index, tmp_path / "idx")
    (segment,) = (tmp_path / "idx" / "qdrant" / "segments").iterdir()
    os.truncate(segment / "vector_storage-dense" / "vectors" / "chunk_0.mmap", 1000)
    with TestClient(create_app(settings)) as client:
        health = client.get("/health")
        assert health.status_code == 503
        assert "is damaged" in health.json()["reason"] and "ctxr doctor" in health.json()["reason"]
        search = client.post("/search", json=QUERY)
        assert search.status_code == 503 and "is damaged" in search.json()["detail"]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["mutable_id_tracker.mappings", "payload_index"])
def test_damage_that_aborted_the_engine_starts_and_answers_503(
    target: str, examples_index: BuiltIndex, tmp_path: Path
) -> None:
    # Random bytes over the id tracker aborted the process (SIGABRT); over a payload index's
    # tracker the engine panicked and the server did not start. The shard's seal finds both
    # before the engine reads them.
    settings = _copy(examples_index, tmp_path / "idx")
    (segment,) = (tmp_path / "idx" / "qdrant" / "segments").iterdir()
    path = segment / target
    if target == "payload_index":
        (path,) = segment.glob("payload_index/*-source-map/tracker.dat")
    with open(path, "r+b") as damaged:
        damaged.seek(100)
        damaged.write(random.Random(7).randbytes(800))
    with TestClient(create_app(settings)) as client:
        health = client.get("/health")
        assert health.status_code == 503
        assert "is damaged" in health.json()["reason"] and "--repair" in health.json()["reason"]
        assert client.post("/search", json=QUERY).status_code == 503


@pytest.mark.slow
def test_a_deleted_index_is_noticed_and_a_rebuilt_one_reopened(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _copy(examples_index, tmp_path / "idx")
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/stats").json()["documents"] == 10
        shutil.rmtree(tmp_path / "idx")
        health = client.get("/health")
        assert health.status_code == 503 and "was deleted" in health.json()["reason"]
        assert client.post("/search", json=QUERY).status_code == 503
        # A new `ctxr index` into the same path (the old lock went with the directory).
        monkeypatch.chdir(ROOT)
        build_index(["examples/docs"], settings)
        assert client.get("/health").status_code == 200
        assert client.get("/stats").json()["documents"] == 5
        hits = client.post("/search", json=QUERY).json()["hits"]
        assert hits and all(h["source"].startswith("examples/docs/") for h in hits)


@pytest.mark.slow
def test_a_replaced_index_is_reopened(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _copy(examples_index, tmp_path / "idx")
    monkeypatch.chdir(ROOT)
    build_index(["examples/notes"], load_settings(index_dir=tmp_path / "new",
                                                  cache_dir=examples_index.cache_dir))  # fmt: skip
    with TestClient(create_app(settings)) as client:
        assert client.get("/stats").json()["documents"] == 10
        os.rename(tmp_path / "idx", tmp_path / "old")
        os.rename(tmp_path / "new", tmp_path / "idx")
        # No /health first: a search notices the swap by itself.
        hits = client.post("/search", json=QUERY).json()["hits"]
        assert hits and all(h["source"].startswith("examples/notes/") for h in hits)
        assert client.get("/stats").json()["documents"] == 2


@pytest.mark.slow
def test_a_second_server_becomes_ready_when_the_first_stops(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    settings = _copy(examples_index, tmp_path / "idx")
    # The first holder is another process: in one process, services share the open shard.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(settings.index_dir), str(settings.cache_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with TestClient(create_app(settings)) as second:
            waiting = second.get("/health")
            reason = waiting.json()["reason"]
            assert waiting.status_code == 503 and "in use" in reason
            assert f"pid {holder.pid}" in reason  # the holder named, not guessed at
            assert holder.stdin is not None
            holder.stdin.close()  # the first holder stops, releasing the shard
            assert holder.wait(timeout=60) == 0
            assert second.get("/health").status_code == 200
            assert second.post("/search", json=QUERY).status_code == 200
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


@pytest.mark.slow
def test_two_servers_in_one_process_share_the_index(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    settings = _copy(examples_index, tmp_path / "idx")
    with TestClient(create_app(settings)) as first, TestClient(create_app(settings)) as second:
        assert first.get("/health").status_code == 200
        assert second.get("/health").status_code == 200
        first.__exit__(None, None, None)  # the other keeps the shard open
        assert second.post("/search", json=QUERY).status_code == 200
