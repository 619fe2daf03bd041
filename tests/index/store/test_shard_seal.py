"""Damage that would abort the process is found before the engine reads it: the shard's seal.

Random bytes over the id tracker make qdrant-edge abort the process (SIGABRT) when it loads the
shard; over a payload index's tracker it panics (`pyo3_runtime.PanicException`, which no
`except Exception` catches); over that index's page nothing noticed them. Each damage here is a
real byte edit of a copy of the examples index, and each command runs in its own process, as
a user runs it, so that an abort shows as a signal and not as a dead test run.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.errors import IndexCorruptError
from ctxr.file_stamp import RACY_NS
from ctxr.index.store import seal
from ctxr.index.store.edge import EdgeStore
from ctxr.index.store.factory import shard_path
from ctxr.pipeline.build import build_index
from ctxr.retrieve.service import SearchService
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

MAIN = "import sys; sys.argv[0] = 'ctxr'; from ctxr.cli import main; main()"


def _segment(index_dir: Path) -> Path:
    (segment,) = (shard_path(index_dir) / "segments").iterdir()
    return segment


def _random_bytes(path: Path, count: int, seed: int, offset: int | None = None) -> None:
    rng = random.Random(seed)
    at = rng.randrange(0, 800) if offset is None else offset
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(bytes(rng.randrange(256) for _ in range(count)))


def garble_id_tracker(index_dir: Path) -> None:
    """800 random bytes over the id tracker's mappings (these made the engine abort)."""
    _random_bytes(_segment(index_dir) / "mutable_id_tracker.mappings", 800, seed=10)


def _source_index(index_dir: Path) -> Path:
    (found,) = _segment(index_dir).glob("payload_index/*-source-map")
    return found


def garble_payload_index_tracker(index_dir: Path) -> None:
    """16 KB over the tracker of the `source` payload index (the engine panicked)."""
    _random_bytes(_source_index(index_dir) / "tracker.dat", 16384, seed=1, offset=0)


def garble_payload_index_page(index_dir: Path) -> None:
    """16 KB over that index's first page (went unnoticed: searches answered as before)."""
    _random_bytes(_source_index(index_dir) / "page_0.dat", 16384, seed=1, offset=0)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "garbled id tracker": garble_id_tracker,
    "garbled payload index tracker": garble_payload_index_tracker,
    "garbled payload index page": garble_payload_index_page,
}


def _unsealed_copy(index: BuiltIndex, tmp_path: Path) -> Path:
    index_dir = index.copy_to(tmp_path / "idx")
    seal.remove_seal(shard_path(index_dir))
    return index_dir


def _ctxr(*args: str | Path, cache: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXR_", "ANTHROPIC_",
                                                                    "OPENAI_"))}  # fmt: skip
    env.update(CTXR_CACHE_DIR=str(cache), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-c", MAIN, *map(str, args)],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _named(done: subprocess.CompletedProcess[str], index_dir: Path, code: int = 2) -> None:
    out = done.stdout + done.stderr
    assert done.returncode == code, f"rc {done.returncode}: {out[-2000:]}"
    assert "Traceback" not in out and "panicked" not in out.split("damaged")[0], out[-2000:]
    assert f"the index at {index_dir} is damaged" in out or "damaged:" in out, out[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damage_that_aborted_the_engine_is_named_in_every_command(
    damage: str, examples_index: BuiltIndex, tmp_path: Path
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    DAMAGES[damage](index_dir)
    cache = examples_index.cache_dir
    searched = _ctxr("search", "backup and restore", "--index", index_dir, "--json", cache=cache)
    _named(searched, index_dir)
    assert "ctxr doctor --index" in searched.stderr and "--repair" in searched.stderr
    indexed = _ctxr("index", "examples", "--index", index_dir, cache=cache)
    _named(indexed, index_dir)
    checked = _ctxr("doctor", "--index", index_dir, "--json", cache=cache)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert not json.loads(checked.stdout)["sound"]

    repaired = _ctxr("doctor", "--index", index_dir, "--repair", "--json", cache=cache)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    report = json.loads(repaired.stdout)
    assert Path(report["moved_aside"]).name.startswith("qdrant.damaged-")
    assert len(report["dropped_sources"]) == 10
    again = _ctxr("index", "examples", "--index", index_dir, "--json", cache=cache)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["points_total"] == examples_index.report.points_total
    found = _ctxr("search", "backup and restore", "--index", index_dir, "--json", cache=cache)
    assert found.returncode == 0 and json.loads(found.stdout)["hits"]


def test_an_unsealed_shard_that_aborts_the_engine_is_probed_in_a_child(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    # An index of an older ctxr, or one whose owner was killed: no seal to compare with.
    index_dir = _unsealed_copy(examples_index, tmp_path)
    garble_id_tracker(index_dir)
    done = _ctxr("search", "backup", "--index", index_dir, cache=examples_index.cache_dir)
    _named(done, index_dir)


def test_an_engine_panic_is_a_named_error_not_a_base_exception(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    # Without a seal the payload index's tracker reaches the engine, which panics in the load:
    # `pyo3_runtime.PanicException` derives from BaseException, and it is answered as damage.
    index_dir = _unsealed_copy(examples_index, tmp_path)
    garble_payload_index_tracker(index_dir)
    with pytest.raises(IndexCorruptError, match="panicked"):
        EdgeStore.open(shard_path(index_dir))


@pytest.mark.slow
def test_a_sound_index_stays_sound_through_closes_reopens_copies_and_updates(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    shard = shard_path(index_dir)
    assert seal.read_seal(shard) is not None  # the build sealed it at its close
    settings = load_settings(index_dir=index_dir, cache_dir=examples_index.cache_dir)
    for _ in range(6):  # each load folds journals and each close rewrites segment.json
        service = SearchService(settings)
        assert service.search("backup and restore")
        service.close()
        recorded = seal.read_seal(shard)
        assert recorded is not None
        assert seal.difference(recorded, seal.survey(shard, recorded)) is None
        # The close read only the files the session changed: what it kept is what is there.
        assert seal.difference(recorded, seal.survey(shard)) is None
    copied = examples_index.copy_to(tmp_path / "copy")  # a copy writes the holes out as zeros
    SearchService(load_settings(index_dir=copied, cache_dir=examples_index.cache_dir)).close()

    monkeypatch.chdir(ROOT)
    work = tmp_path / "corpus"
    shutil.copytree(ROOT / "examples", work)
    fresh = load_settings(index_dir=tmp_path / "live", cache_dir=examples_index.cache_dir)
    build_index([work], fresh)
    (work / "docs" / "faq.md").write_text("# FAQ\n\nBackups run nightly.\n", encoding="utf-8")
    (work / "docs" / "new.md").write_text("# New\n\nA page written later.\n", encoding="utf-8")
    for _ in range(3):  # re-index incrementally, then an unchanged run, then search
        report = build_index([work], fresh)
        assert report.points_total > 0
        service = SearchService(fresh)
        assert service.search("backups nightly")
        service.close()
    checked = _ctxr("doctor", "--index", tmp_path / "live", "--json",
                    cache=examples_index.cache_dir)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["sound"]


@pytest.mark.slow
def test_a_killed_owner_leaves_no_seal_and_the_next_open_is_sound(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from ctxr.index.store.edge import EdgeStore\n"
        "store = EdgeStore.open(Path(sys.argv[1]))\n"
        "store.delete_documents(['examples/docs/faq.md'])\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(shard_path(index_dir))],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == -9, done.stderr
    assert seal.read_seal(shard_path(index_dir)) is None  # removed before the load
    store = EdgeStore.open(shard_path(index_dir))  # probed in a child, then loaded here
    try:
        assert store.count() > 0
    finally:
        store.close()
    assert seal.read_seal(shard_path(index_dir)) is not None


@pytest.mark.slow
def test_changed_bulk_data_is_loaded_and_repaired_document_by_document(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    # Same-size bytes over the dense vectors: the engine reads them back as absurd values and
    # never aborts, so the shard is loaded and the point checks name the documents.
    index_dir = examples_index.copy_to(tmp_path / "idx")
    with open(_segment(index_dir) / "vector_storage-dense/vectors/chunk_0.mmap", "r+b") as f:
        f.write(b"\x7f\x7f\x7f\x7f" * 2000)
    cache = examples_index.cache_dir
    checked = _ctxr("doctor", "--index", index_dir, "--json", cache=cache)
    assert checked.returncode == 1
    problems = json.loads(checked.stdout)["problems"]
    assert any("changed since ctxr last closed it" in p for p in problems), problems
    assert any("dense vector of squared length" in p for p in problems), problems
    repaired = _ctxr("doctor", "--index", index_dir, "--repair", "--json", cache=cache)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert 0 < len(json.loads(repaired.stdout)["dropped_sources"]) < 10
    assert _ctxr("doctor", "--index", index_dir, cache=cache).returncode == 0


def test_the_seal_reads_content_not_layout(tmp_path: Path) -> None:
    sparse, dense = tmp_path / "a" / "segments", tmp_path / "b" / "segments"
    sparse.mkdir(parents=True)
    dense.mkdir(parents=True)
    with open(sparse / "page_0.dat", "wb") as f:
        f.truncate(1 << 22)  # a hole of 4 MiB ...
        f.seek(1 << 21)
        f.write(b"data")
    body = bytearray(1 << 22)  # ... and the same bytes written out
    body[1 << 21 : (1 << 21) + 4] = b"data"
    (dense / "page_0.dat").write_bytes(bytes(body))
    (sparse / "segment.json").write_text('{"a": 1, "b": [2]}', encoding="utf-8")
    (dense / "segment.json").write_text('{"b": [2], "a": 1}', encoding="utf-8")
    assert _checksums(tmp_path / "a") == _checksums(tmp_path / "b")
    body[5] = 1
    (dense / "page_0.dat").write_bytes(bytes(body))
    assert _checksums(tmp_path / "a") != _checksums(tmp_path / "b")


def _checksums(shard: Path) -> dict[str, seal.FileSum]:
    """Every segment file's size and content checksum, each file read; stamps left out."""
    return {name: checksum for name, (checksum, _stamp) in seal.survey(shard).items()}


def _settle(root: Path) -> None:
    """Wait until every file under `root` changed longer ago than the racy window, so that
    stamps taken now are trusted."""
    files = [p for p in root.rglob("*") if p.is_file()]
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in files)
    while time.time_ns() - newest < RACY_NS:
        time.sleep(0.05)


def test_a_file_whose_stamp_holds_is_not_read_again_but_every_byte_reads_it(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    index_dir = examples_index.copy_to(tmp_path / "idx")
    shard = shard_path(index_dir)
    _settle(shard)
    EdgeStore.open(shard).close()  # the first open reads all (a copy: new inodes), the close stamps
    recorded = seal.read_seal(shard)
    assert recorded is not None
    stamped = sorted(n for n, (_sum, stamp) in recorded.items() if stamp is not None)
    assert len(stamped) > len(recorded) // 2  # all but what the session itself wrote
    tracker = next(n for n in stamped if n.endswith("id_tracker.mappings"))
    # A disk that changes bytes by itself leaves the stamp as it was. Modelled here by a seal
    # that remembers other bytes for the id tracker: an open trusts the stamp and reads nothing,
    body = json.loads(seal.seal_path(shard).read_text(encoding="utf-8"))
    body["files"][tracker][1] ^= 1
    seal.seal_path(shard).write_text(json.dumps(body), encoding="utf-8")
    recorded = seal.read_seal(shard) or {}
    assert seal.difference(recorded, seal.survey(shard, recorded)) is None
    # ... while reading every byte, as `ctxr doctor` does, finds the difference.
    with pytest.raises(IndexCorruptError, match="id_tracker"):
        EdgeStore.open(shard, every_byte=True)
