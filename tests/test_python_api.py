"""The Python API (`ctxr.build`, `open_index`, `search`, `estimate`): each called twice.

`ctxr.index` used to work once: its first call imported `ctxr.index.builder`, which rebound
the attribute `ctxr.index` to the subpackage, and the second call raised TypeError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxr


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "backup.md").write_text(
        "# Backups\n\nRun `lumen backup --full` nightly; restore with `lumen restore`.\n"
    )
    (docs / "upload.md").write_text("# Uploads\n\nMAX_PARALLEL caps concurrent uploads at 4.\n")
    return docs


def test_every_public_function_works_twice(
    corpus: Path, tmp_path: Path, embed_cache_dir: Path
) -> None:
    index_dir = tmp_path / "idx"
    settings = {"cache_dir": embed_cache_dir, "context": "outline"}
    first = ctxr.build([corpus], index_dir, **settings)
    second = ctxr.build([corpus], index_dir, **settings)
    assert first.documents_indexed == 2 and first.points_total == second.points_total
    assert second.documents_indexed == 0 and second.documents_unchanged == 2
    assert callable(ctxr.build)  # the subpackages it imported did not shadow it
    for _ in range(2):
        hits = ctxr.search("MAX_PARALLEL uploads", index_dir, k=1, mode="bm25", **settings)
        assert hits[0].source.endswith("upload.md")
        with ctxr.open_index(index_dir, **settings) as service:
            assert service.search("restore a backup", k=1)[0].source.endswith("backup.md")
        cost = ctxr.estimate([corpus], index_dir, models=["gpt-4o-mini"], **settings)
        assert cost.models[0].model == "gpt-4o-mini"
    assert sorted(ctxr.__all__) == ["build", "estimate", "open_index", "search"]
