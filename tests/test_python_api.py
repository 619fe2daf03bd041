"""The Python API (`ctxr.build`, `open_index`, `search`, `estimate`, `trial`): each called
twice.

`ctxr.index` used to work once: its first call imported `ctxr.index.builder`, which rebound
the attribute `ctxr.index` to the subpackage, and the second call raised TypeError.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import ctxr
import ctxr.errors


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
    settings: dict[str, Any] = {"cache_dir": embed_cache_dir, "context": "outline"}
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
    assert sorted(ctxr.__all__) == [
        "Client", "Hit", "SearchOptions", "Searcher", "build", "estimate", "open_index", "search",
        "trial",
    ]  # fmt: skip


def test_trial_runs_twice_from_a_question_file(
    corpus: Path, tmp_path: Path, embed_cache_dir: Path
) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"question": "how many uploads at once", "answers": [
            {"source": str(corpus / "upload.md"), "text": "MAX_PARALLEL caps concurrent uploads"}
        ]}) + "\n"
    )  # fmt: skip
    for _ in range(2):
        found = ctxr.trial(
            [corpus], questions=questions, sample=None, without=["llm"], baseline="none",
            resamples=100, out_dir=tmp_path / "out", cache_dir=embed_cache_dir,
        )  # fmt: skip
        assert [r.name for r in found.rows] == ["none", "outline"]
        assert found.rows[0].scores["pass@5"].mean == 1.0
        assert found.to_json()["questions"]["count"] == 1


def test_the_client_is_the_search_of_the_python_api(
    corpus: Path, tmp_path: Path, embed_cache_dir: Path
) -> None:
    index_dir = tmp_path / "idx"
    settings: dict[str, Any] = {"cache_dir": embed_cache_dir, "context": "outline"}
    ctxr.build([corpus], index_dir, **settings)
    expected = ctxr.search("restore a backup", index_dir, k=2, mode="bm25", **settings)
    options = ctxr.SearchOptions(k=2, mode="bm25")
    with ctxr.Client(index_dir=index_dir, **settings) as client:
        assert isinstance(client, ctxr.Searcher)
        assert client.search("restore a backup", options) == expected
        assert client.search("restore a backup", k=2, mode="bm25") == expected  # by field
        assert client.search_many(["restore a backup"] * 2, options) == [expected] * 2
        # Beside an open Client, open_index shares its shard rather than being refused.
        with ctxr.open_index(index_dir, **settings) as service:
            assert service.search("restore a backup", options) == expected
        assert client.search("restore a backup", options) == expected  # still open
    for _ in range(2):  # no client is bound to the event loop it first ran in
        with ctxr.Client(index_dir=index_dir, **settings) as client:
            assert asyncio.run(client.asearch("restore a backup", options)) == expected


def test_search_options_are_typed_and_refused_at_once() -> None:
    with pytest.raises(ctxr.errors.ConfigError, match="unknown search mode 'fuzzy'"):
        ctxr.SearchOptions(mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ctxr.errors.ConfigError, match="unknown fusion 'sum'"):
        ctxr.SearchOptions(fusion="sum")  # type: ignore[arg-type]
    with pytest.raises(ctxr.errors.ConfigError, match="k must be at least 1"):
        ctxr.SearchOptions(k=0)
    with pytest.raises(ctxr.errors.ConfigError, match="candidates must be"):
        ctxr.SearchOptions(candidates=True)
    given = ctxr.SearchOptions.given(5, "bm25", merge=True)  # the old argument order
    assert given == ctxr.SearchOptions(k=5, mode="bm25", merge=True)
    assert ctxr.SearchOptions.given(given, k=2).k == 2
    with pytest.raises(ctxr.errors.ConfigError, match="exactly one of index_dir="):
        ctxr.Client()
