"""An index directory damaged around the shard: the manifest's shape and the run lock.

Each damage is a real edit to a real index directory, and each is answered with the named
error (exit 2, what is wrong and what to run), never a traceback, in every command that reads
the index.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxr.cli import main
from ctxr.errors import IndexError_
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.index.run_lock import LOCK_NAME, index_lock
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT


def _run(*args: str | Path, cache: Path) -> Result:
    return CliRunner().invoke(
        main, [str(a) for a in args], env={"COLUMNS": "200", "CTXR_CACHE_DIR": str(cache)}
    )


def _named(result: Result) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), "".join(
        traceback.format_exception(result.exception)
    )
    assert "Traceback" not in result.output


BAD_DOCUMENTS = {
    "a list": [],
    "a string": "docs",
    "entries of the wrong type": {"a.md": 3},
    "an entry missing fields": {"a.md": {"source": "a.md"}},
}


@pytest.mark.parametrize("documents", BAD_DOCUMENTS)
def test_a_manifest_of_the_wrong_shape_is_named_with_the_fix(
    documents: str, examples_index: BuiltIndex, tmp_path: Path
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    body = json.loads((index_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    body["documents"] = BAD_DOCUMENTS[documents]
    (index_dir / MANIFEST_NAME).write_text(json.dumps(body), encoding="utf-8")
    with pytest.raises(IndexError_, match=r"manifest\.json is damaged"):
        Manifest.load(index_dir)
    cache = examples_index.cache_dir
    for args in (("search", "backup"), ("doctor",), ("index", "examples")):
        result = _run(*args, "--index", index_dir, cache=cache)
        _named(result)
        assert f"{index_dir / MANIFEST_NAME} is damaged" in result.output
        assert "--rebuild" in result.output


@pytest.mark.parametrize("settings", [[], "x", {"dim": 384}, None])
def test_a_manifest_with_settings_of_the_wrong_shape_is_named(
    settings: object, tmp_path: Path
) -> None:
    tmp_path.joinpath(MANIFEST_NAME).write_text(json.dumps(
        {"format": 1, "settings": settings, "documents": {}, "created_at": "", "updated_at": ""}
    ), encoding="utf-8")  # fmt: skip
    with pytest.raises(IndexError_, match="is damaged"):
        Manifest.load(tmp_path)


def test_a_lock_that_is_a_directory_is_named_with_the_fix(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    (index_dir / LOCK_NAME).mkdir()
    with pytest.raises(IndexError_, match="is a directory"), index_lock(index_dir):
        pass
    monkeypatch.chdir(ROOT)
    for args in (("index", "examples"), ("doctor",)):
        result = _run(*args, "--index", index_dir, cache=examples_index.cache_dir)
        _named(result)
        assert f"{index_dir / LOCK_NAME} is a directory" in result.output
        assert "remove it" in result.output


def test_an_index_path_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "idx").write_text("not a directory", encoding="utf-8")
    with pytest.raises(IndexError_, match="not a directory"), index_lock(tmp_path / "idx"):
        pass
