"""A damaged Qdrant store, damaged the way a disk damages it: real byte edits to a real index.

Each case copies the session's examples index (real MiniLM vectors, a real qdrant-edge shard)
and edits one of the files qdrant-edge lays out under `qdrant/segments/<id>/`. Before the fix,
the loud cases gave a raw traceback on `ctxr search`, and the quiet ones (overwritten vector
bytes, an emptied id tracker) answered plausible hits with scores of 7e37 or below zero.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxr.cli import main
from ctxr.config import Settings
from ctxr.errors import IndexCorruptError
from ctxr.index import integrity
from ctxr.index.manifest import Manifest
from ctxr.index.store.base import ScoredRecord
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT


def _segment(index_dir: Path) -> Path:
    (segment,) = (shard_path(index_dir) / "segments").iterdir()
    return segment


def truncate_dense(index_dir: Path) -> None:
    os.truncate(_segment(index_dir) / "vector_storage-dense/vectors/chunk_0.mmap", 1000)


def garble_payload(index_dir: Path) -> None:
    with open(_segment(index_dir) / "payload_storage/page_0.dat", "r+b") as page:
        page.write(bytes(range(256)) * 16)  # 4 KiB of not-LZ4 over the first values


def overwrite_vectors(index_dir: Path) -> None:
    with open(_segment(index_dir) / "vector_storage-dense/vectors/chunk_0.mmap", "r+b") as f:
        f.write(b"\x7f\x7f\x7f\x7f" * 2000)  # 3.4e38 floats over the first five vectors


def empty_id_tracker(index_dir: Path) -> None:
    os.truncate(_segment(index_dir) / "mutable_id_tracker.mappings", 0)


def garble_bm25(index_dir: Path) -> None:
    with open(_segment(index_dir) / "vector_storage-bm25/store/page_0.dat", "r+b") as page:
        page.write(b"\xff" * 8192)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "truncated dense vectors": truncate_dense,
    "garbled payload page": garble_payload,
    "overwritten vector bytes": overwrite_vectors,
    "emptied id tracker": empty_id_tracker,
    "garbled BM25 page": garble_bm25,
}


def copy_index(index: BuiltIndex, to: Path) -> Settings:
    return index.settings_with(index_dir=index.copy_to(to))


def run(*args: str | Path, cache: Path) -> Result:
    return CliRunner().invoke(
        main, [str(a) for a in args], env={"COLUMNS": "200", "CTXR_CACHE_DIR": str(cache)}
    )


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_damage_is_named_with_the_fix_never_a_traceback(
    damage: str, examples_index: BuiltIndex, tmp_path: Path
) -> None:
    index_dir = tmp_path / "idx"
    copy_index(examples_index, index_dir)
    DAMAGES[damage](index_dir)
    result = run("search", "backup and restore", "--index", index_dir, "--json",
                 cache=examples_index.cache_dir)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), "".join(
        traceback.format_exception(result.exception)
    )
    assert f"the index at {index_dir} is damaged" in result.output
    assert "ctxr doctor" in result.output and "--rebuild" in result.output
    assert "Traceback" not in result.output


def test_overwritten_vectors_are_found_at_open(examples_index: BuiltIndex, tmp_path: Path) -> None:
    settings = copy_index(examples_index, tmp_path / "idx")
    overwrite_vectors(tmp_path / "idx")
    with pytest.raises(IndexCorruptError, match="dense vector of squared length"):
        SearchService(settings)


def test_absurd_scores_are_refused() -> None:
    payload = {"doc_id": "a"}
    sane = [ScoredRecord("p", 0.99, payload), ScoredRecord("q", -0.2, payload)]  # type: ignore[arg-type]
    integrity.check_scores("dense", sane, Path("idx"))
    by_bytes = [ScoredRecord("p", 1.0051, payload)]  # type: ignore[arg-type]
    integrity.check_scores("dense", by_bytes, Path("idx"))  # int8, not rescored: past 1
    integrity.check_scores("bm25", [ScoredRecord("p", 12.5, payload)], Path("idx"))  # type: ignore[arg-type]
    for retriever, score in (("dense", 2.9e37), ("dense", 1.2), ("dense", float("nan")),
                             ("bm25", -2.4)):  # fmt: skip
        with pytest.raises(IndexCorruptError, match="no sound index gives"):
            integrity.check_scores(retriever, [ScoredRecord("p", score, payload)], Path("idx"))  # type: ignore[arg-type]


def test_a_sound_index_passes_the_full_check(examples_index: BuiltIndex, tmp_path: Path) -> None:
    copy_index(examples_index, tmp_path / "idx")
    store = EdgeStore.open(shard_path(tmp_path / "idx"))
    try:
        found = integrity.verify(store, Manifest.load(tmp_path / "idx"))
    finally:
        store.close()
    assert found.sound and found.complete, found.summary()
    assert found.points_read == found.points_stored == examples_index.report.points_total


@pytest.mark.slow
def test_doctor_repairs_damaged_points_and_the_next_index_restores_them(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_dir, cache = tmp_path / "idx", examples_index.cache_dir
    copy_index(examples_index, index_dir)
    overwrite_vectors(index_dir)
    checked = run("doctor", "--index", index_dir, "--json", cache=cache)
    assert checked.exit_code == 1, checked.output
    report = json.loads(checked.stdout)
    assert not report["sound"] and any("dense vector" in p for p in report["problems"])

    repaired = run("doctor", "--index", index_dir, "--repair", "--json", cache=cache)
    assert repaired.exit_code == 0, repaired.output
    dropped = json.loads(repaired.stdout)["dropped_sources"]
    assert 0 < len(dropped) < 10  # only the documents whose points were damaged
    assert run("doctor", "--index", index_dir, cache=cache).exit_code == 0

    monkeypatch.chdir(ROOT)
    again = run("index", "examples", "--index", index_dir, "--json", cache=cache)
    assert again.exit_code == 0, again.output
    redo = json.loads(again.stdout)
    assert redo["documents_indexed"] == len(dropped)
    assert redo["points_total"] == examples_index.report.points_total
    searched = run("search", "backup and restore", "--index", index_dir, "--json", cache=cache)
    assert searched.exit_code == 0 and json.loads(searched.stdout)["hits"]


def test_doctor_sets_an_unreadable_shard_aside(examples_index: BuiltIndex, tmp_path: Path) -> None:
    index_dir = tmp_path / "idx"
    copy_index(examples_index, index_dir)
    garble_payload(index_dir)
    repaired = run("doctor", "--index", index_dir, "--repair", "--json", cache=tmp_path)
    assert repaired.exit_code == 0, repaired.output
    report = json.loads(repaired.stdout)
    assert len(report["dropped_sources"]) == 10
    aside = Path(report["moved_aside"])
    assert aside.parent == index_dir and aside.name.startswith("qdrant.damaged-")
    assert (aside / "segments").is_dir()  # kept for the user, not deleted
    assert Manifest.load(index_dir).documents == {}
    assert run("doctor", "--index", index_dir, cache=tmp_path).exit_code == 0


def test_index_over_a_damaged_store_does_not_exit_0(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_dir = tmp_path / "idx"
    copy_index(examples_index, index_dir)
    overwrite_vectors(index_dir)
    monkeypatch.chdir(ROOT)
    result = run("index", "examples", "--index", index_dir, cache=examples_index.cache_dir)
    assert result.exit_code == 2, result.output
    assert "is damaged" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_index_clears_a_killed_runs_leftover_points(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = copy_index(examples_index, tmp_path / "idx")
    manifest = Manifest.load(tmp_path / "idx")
    # A run killed after writing a batch and before saving the manifest: points the manifest
    # does not know. The open check lets them be (they are not damage); the run removes them.
    gone = next(d for d in manifest.documents if not d.endswith("faq.md"))
    del manifest.documents[gone]
    manifest.save(tmp_path / "idx")
    SearchService(settings).close()
    doctor = run("doctor", "--index", tmp_path / "idx", "--json", cache=examples_index.cache_dir)
    assert doctor.exit_code == 0, doctor.output  # leftovers are not damage
    assert json.loads(doctor.stdout)["leftover_points"] == _chunks(examples_index, gone)
    monkeypatch.chdir(ROOT)
    report = build_index(["examples/docs/faq.md"], settings, prune=False)
    assert report.points_total == examples_index.report.points_total - _chunks(examples_index, gone)


def _chunks(index: BuiltIndex, doc_id: str) -> int:
    return Manifest.load(index.index_dir).documents[doc_id].chunks
