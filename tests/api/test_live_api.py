"""The owning server's side, in-process: the owner file follows the shard, the write endpoint
(`POST /index/update`) needs the owner's token and a local client, and an update through the
open store is searchable at once without the server reopening the index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.config import Settings, load_settings
from ctxr.index.owner import OWNER_NAME, live_owner, read_owner
from tests.fixtures.live import LOCAL, bearer, otters_index, owner_record


@pytest.fixture
def settings(tmp_path: Path, embed_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    return otters_index(tmp_path, embed_cache_dir, monkeypatch)


def _update(tmp_path: Path, *changed: str) -> dict[str, object]:
    return {"roots": ["docs"], "changed": list(changed), "cwd": str(tmp_path)}


def test_the_owner_file_stands_while_the_shard_is_open(settings: Settings, tmp_path: Path) -> None:
    owner = owner_record(tmp_path)
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        assert client.get("/health").status_code == 200
        assert read_owner(tmp_path / "idx") == owner
        assert (os.stat(tmp_path / "idx" / OWNER_NAME).st_mode & 0o777) == 0o600
        assert live_owner(tmp_path / "idx") == owner  # this process holds the shard
    assert read_owner(tmp_path / "idx") is None
    with TestClient(create_app(settings), client=LOCAL) as client:  # no owner: no file
        assert client.get("/health").status_code == 200
        assert read_owner(tmp_path / "idx") is None
        assert client.post("/index/update", json=_update(tmp_path)).status_code == 404


def test_an_update_through_the_server_is_searchable_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    owner = owner_record(tmp_path)
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        holder = client.app.state.holder  # type: ignore[attr-defined]
        service = holder.service
        (tmp_path / "docs" / "walrus.md").write_text("# Walrus\n\nThe walrus hums a zeppelin.\n")
        (tmp_path / "docs" / "otters.md").unlink()
        changed = [str(tmp_path / "docs" / n) for n in ("walrus.md", "otters.md")]
        answer = client.post(
            "/index/update", json=_update(tmp_path, *changed), headers=bearer(owner.token)
        )
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert (report["documents_indexed"], report["documents_removed"]) == (1, 1)
        query = {"query": "walrus zeppelin otter pebble", "k": 5, "mode": "bm25"}
        hits = client.post("/search", json=query).json()["hits"]
        assert {h["source"] for h in hits} == {"docs/walrus.md"}
        assert client.get("/stats").json()["documents"] == 1
        assert client.get("/health").status_code == 200
        assert holder.service is service  # its own write did not make the server reopen


def test_the_write_endpoint_needs_a_token_and_a_local_client(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = owner_record(tmp_path)
    body = _update(tmp_path, str(tmp_path / "docs" / "otters.md"))
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        # No CTXR_API_TOKEN: searches are open, writes are not.
        assert client.post("/search", json={"query": "otter"}).status_code == 200
        refused = client.post("/index/update", json=body)
        assert refused.status_code == 401 and "owner file" in refused.json()["detail"]
        wrong = client.post("/index/update", json=body, headers=bearer("nope"))
        assert wrong.status_code == 401
        elsewhere = {**body, "cwd": "/"}
        moved = client.post("/index/update", json=elsewhere, headers=bearer(owner.token))
        assert moved.status_code == 409 and "run `ctxr watch` from" in moved.json()["detail"]
    with TestClient(create_app(settings, owner), client=("10.1.2.3", 40000)) as remote:
        far = remote.post("/index/update", json=body, headers=bearer(owner.token))
        assert far.status_code == 403 and "own machine" in far.json()["detail"]
    monkeypatch.setenv("CTXR_API_TOKEN", "api-secret")
    guarded = load_settings(index_dir=settings.index_dir, cache_dir=settings.cache_dir)
    with TestClient(create_app(guarded, owner), client=LOCAL) as client:
        assert client.post("/search", json={"query": "otter"}).status_code == 401
        for token in ("api-secret", owner.token):  # the owner file's token works like the API's
            headers = bearer(token)
            assert client.post("/search", json={"query": "otter"}, headers=headers).is_success
        # ... but the API's does not change the index: that is the owner file's to allow.
        searcher = client.post("/index/update", json=body, headers=bearer("api-secret"))
        assert searcher.status_code == 403 and "owner file" in searcher.json()["detail"]
        assert client.post("/index/update", json=body, headers=bearer(owner.token)).is_success
