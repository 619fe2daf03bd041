"""What a served update may do (`POST /index/update`): who may send one, what it may read, and
that it never creates an index.

Before, the ordinary search token (CTXR_API_TOKEN) could make the server index `/etc/ssh` or
`/`, and `/search` then served those files; and an update into a deleted index wrote a new
index of the few files that had just changed, which the server then served as sound.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ctxr.api.app import create_app
from ctxr.config import Settings, load_settings
from ctxr.index.manifest import MANIFEST_NAME
from ctxr.index.roots import ROOTS_NAME, recorded_roots
from ctxr.pipeline.build import build_index
from tests.fixtures.live import LOCAL, bearer, otters_index, owner_record


@pytest.fixture
def settings(tmp_path: Path, embed_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The otters index behind a search token, with a private folder beside `docs/` that no
    update may read."""
    monkeypatch.setenv("CTXR_API_TOKEN", "search-secret")
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "key.md").write_text("# Key\n\nThe vault code is zebra-42.\n")
    return otters_index(tmp_path, embed_cache_dir, monkeypatch)


def _body(tmp_path: Path, root: str, *changed: str) -> dict[str, object]:
    return {"roots": [root], "changed": list(changed) or [root], "cwd": str(tmp_path)}


def _vault_found(client: TestClient) -> bool:
    query = {"query": "vault code zebra", "k": 5, "mode": "bm25"}
    hits = client.post("/search", json=query, headers=bearer("search-secret")).json()["hits"]
    return any("zebra" in h["text"] for h in hits)


def test_the_index_records_the_roots_it_was_built_from(settings: Settings, tmp_path: Path) -> None:
    assert recorded_roots(tmp_path / "idx") == [str((tmp_path / "docs").resolve())]
    build_index(["private"], settings)  # a later run adds its roots
    assert len(recorded_roots(tmp_path / "idx")) == 2
    build_index(["docs"], settings, rebuild=True)  # --rebuild starts afresh
    assert recorded_roots(tmp_path / "idx") == [str((tmp_path / "docs").resolve())]
    assert json.loads((tmp_path / "idx" / ROOTS_NAME).read_text())["roots"]


def test_the_search_token_cannot_change_the_index(settings: Settings, tmp_path: Path) -> None:
    owner = owner_record(tmp_path)
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        body = _body(tmp_path, "docs")
        refused = client.post("/index/update", json=body, headers=bearer("search-secret"))
        assert refused.status_code == 403
        detail = refused.json()["detail"]
        assert "CTXR_API_TOKEN lets a client search" in detail and "CTXR_API_UPDATE_TOKEN" in detail
        assert client.post("/index/update", json=body, headers=bearer(owner.token)).is_success


def test_an_update_reads_only_the_roots_the_index_was_built_from(
    settings: Settings, tmp_path: Path
) -> None:
    owner = owner_record(tmp_path)
    (tmp_path / "docs" / "sneaky").symlink_to(tmp_path / "private")
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        for root in ("/etc/ssh", "/", str(tmp_path / "private"), "docs/../private",
                     "docs/sneaky", str(tmp_path)):  # fmt: skip
            refused = client.post(
                "/index/update", json=_body(tmp_path, root), headers=bearer(owner.token)
            )
            assert refused.status_code == 403, (root, refused.text)
            assert "outside the folders this index was built from" in refused.json()["detail"]
        assert not _vault_found(client)
        inside = client.post(
            "/index/update", json=_body(tmp_path, "docs"), headers=bearer(owner.token)
        )
        assert inside.is_success, inside.text


def test_a_root_given_at_start_and_the_update_token_open_the_way(
    settings: Settings, tmp_path: Path
) -> None:
    given = load_settings(
        index_dir=settings.index_dir, cache_dir=settings.cache_dir,
        api_update_roots="private", api_update_token="update-secret",
    )  # fmt: skip
    with TestClient(create_app(given, owner_record(tmp_path)), client=LOCAL) as client:
        answer = client.post(
            "/index/update", json=_body(tmp_path, "private"), headers=bearer("update-secret")
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["documents_indexed"] == 1
        assert _vault_found(client)


def test_an_update_into_a_deleted_index_is_refused_and_creates_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    owner = owner_record(tmp_path)
    with TestClient(create_app(settings, owner), client=LOCAL) as client:
        assert client.get("/health").status_code == 200
        shutil.rmtree(tmp_path / "idx")
        (tmp_path / "docs" / "otters.md").write_text("# Otters\n\nEdited after the delete.\n")
        body = _body(tmp_path, "docs", str(tmp_path / "docs" / "otters.md"))
        refused = client.post("/index/update", json=body, headers=bearer(owner.token))
        assert refused.status_code == 410, refused.text
        assert "ctxr index" in refused.json()["detail"]
        assert not (tmp_path / "idx" / MANIFEST_NAME).exists()
        health = client.get("/health", headers=bearer("search-secret"))
        assert health.status_code == 503 and str(tmp_path / "idx") in health.json()["reason"]


def test_health_names_paths_only_to_a_client_with_the_token(
    settings: Settings, tmp_path: Path
) -> None:
    with TestClient(create_app(settings), client=LOCAL) as client:
        shutil.rmtree(tmp_path / "idx")
        anonymous = client.get("/health")
        assert anonymous.status_code == 503
        reason = anonymous.json()["reason"]
        assert "was deleted" in reason and "idx" in reason
        assert str(tmp_path) not in reason
        told = client.get("/health", headers=bearer("search-secret")).json()["reason"]
        assert str(tmp_path / "idx") in told
