"""A full disk, for real: a small tmpfs filled up, with the index (and its caches) on it.

Before, `ctxr index` died of SIGBUS (rc 135, no message) when qdrant-edge's memory-mapped
writes hit the full filesystem, and LLM answers in flight were lost; `ctxr doctor` on a full
disk could call a sound shard damaged. Mounting needs root (CI runs as root); where mounting is
not permitted the tests skip. What a full disk makes SQLite say is tested without a mount in
`tests/test_cache_files.py` (a page limit SQLite enforces itself).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxr.config import load_settings
from ctxr.disk import free_bytes
from ctxr.errors import StorageError
from ctxr.index.manifest import MANIFEST_NAME, Manifest
from ctxr.index.store import seal
from ctxr.pipeline.build import build_index
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

MAIN = "import sys; sys.argv[0] = 'ctxr'; from ctxr.cli import main; main()"
MB = 2**20


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 300 MB tmpfs (its files are sparse, as on a disk), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> None:
    """Fill the disk until `leave` bytes are free (one real file, its blocks allocated)."""
    free = free_bytes(disk) or 0
    with open(disk / "filler", "ab") as filler:
        os.posix_fallocate(filler.fileno(), 0, max(0, free - leave))


def _ctxr(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CTXR_", "ANTHROPIC_",
                                                                      "OPENAI_"))}  # fmt: skip
    return subprocess.run([sys.executable, "-c", MAIN, *map(str, args)], cwd=ROOT,
                          env={**clean, "COLUMNS": "200", **env}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_a_run_on_a_nearly_full_disk_stops_before_it_pays_or_writes(
    small_disk: Path, fake_llm: FakeLLMServer
) -> None:
    _fill(small_disk, 8 * MB)  # a new index's shard alone takes more (18 MB on tmpfs)
    env = {**fake_llm.env(), "CTXR_CACHE_DIR": str(small_disk / "cache")}
    done = _ctxr("index", "examples", "--index", small_disk / "idx", env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 2, f"rc {done.returncode}: {out[-1500:]}"  # not 135 (SIGBUS)
    assert f"not enough space for this run on the disk holding the index at {small_disk}" in out
    assert "MB free, about" in out and "needed" in out and "Traceback" not in out
    assert not fake_llm.requests  # nothing asked, nothing paid
    assert not (small_disk / "idx" / "qdrant").exists()  # nothing half-written


@pytest.mark.slow
def test_a_sound_index_on_a_full_disk_is_never_called_damaged(
    small_disk: Path, examples_index: BuiltIndex, tmp_path: Path, in_repo_root: Path
) -> None:
    # Built here, not the session's index (other tests load that one): never loaded since
    # its build closed it, as after a user's `ctxr index`.
    built = tmp_path / "built"
    build_index(["examples"], load_settings(index_dir=built, cache_dir=examples_index.cache_dir))
    index_dir = small_disk / "idx"
    subprocess.run(["cp", "-r", "--sparse=always", str(built), str(index_dir)], check=True)
    (index_dir / ".lock").unlink(missing_ok=True)
    env = {"CTXR_CACHE_DIR": str(examples_index.cache_dir)}
    # A freshly written shard's first load folds its journals into their trackers through
    # mapped pages: on a full disk it cannot, and that is said as a full disk (it was SIGBUS,
    # or "damaged"), never repaired by setting the shard aside.
    _fill(small_disk, 0)
    assert (free_bytes(small_disk) or 0) < MB
    for args in (("doctor",), ("doctor", "--repair"), ("search", "backup and restore")):
        done = _ctxr(*args, "--index", index_dir, env=env)
        out = done.stdout + done.stderr
        assert done.returncode == 2, f"{args}: rc {done.returncode}: {out[-1500:]}"
        assert f"the disk holding the index at {index_dir} is full" in out, out[-1500:]
        assert "Nothing was damaged" in out and "Traceback" not in out
    assert [p.name for p in index_dir.iterdir() if "damaged" in p.name] == []
    (small_disk / "filler").unlink()
    assert _ctxr("doctor", "--index", index_dir, env=env).returncode == 0  # folds, seals
    # Loaded once, the shard reads on a full disk, or says the disk is full (a load may still
    # write its state): sealed, then unsealed (probed in a child), never "damaged".
    for sealed in (True, False):
        if not sealed:
            seal.remove_seal(index_dir / "qdrant")
        _fill(small_disk, 0)
        for command in (("doctor", "--json"), ("search", "backup and restore", "--json")):
            done = _ctxr(*command, "--index", index_dir, env=env)
            out = done.stdout + done.stderr
            assert done.returncode in (0, 2), f"{command}: rc {done.returncode}: {out[-1500:]}"
            if done.returncode == 2:
                assert "is full" in out and "Nothing was damaged" in out, out[-1500:]
            else:
                assert "damaged" not in out and json.loads(done.stdout), out[-1500:]
        (small_disk / "filler").unlink()
    again = _ctxr("doctor", "--index", index_dir, env=env)  # room again: sealed at its close
    assert again.returncode == 0 and seal.read_seal(index_dir / "qdrant") is not None
    shutil.rmtree(index_dir)


def test_the_check_before_a_run_names_the_space_free_and_needed(
    tmp_path: Path, fake_llm_env: FakeLLMServer, in_repo_root: Path
) -> None:
    # No mount needed: asking for more headroom than any disk has makes the same check refuse.
    settings = load_settings(index_dir=tmp_path / "idx", min_free_mb=10**9)
    with pytest.raises(StorageError, match="not enough space for this run") as raised:
        build_index(["examples/docs"], settings)
    assert f"the index at {tmp_path / 'idx'}" in str(raised.value)
    assert "free, about" in str(raised.value) and "Nothing was written" in str(raised.value)
    assert not fake_llm_env.requests
    assert not (tmp_path / "idx" / "qdrant").exists()
    existing = load_settings(index_dir=tmp_path / "idx", min_free_mb=0)  # 0: no check
    assert build_index(["examples/docs/faq.md"], existing).points_total > 0
    asked = len(fake_llm_env.requests)
    again = load_settings(index_dir=tmp_path / "idx", min_free_mb=10**9)  # over an index
    with pytest.raises(StorageError, match="not enough space"):
        build_index(["examples/docs"], again)
    assert len(fake_llm_env.requests) == asked  # the new documents were not asked about


def test_a_manifest_that_cannot_be_saved_names_the_disk_and_the_old_one_stands(
    small_disk: Path, examples_index: BuiltIndex
) -> None:
    index_dir = small_disk / "idx"
    index_dir.mkdir()
    manifest = Manifest.load(examples_index.index_dir)
    manifest.save(index_dir)
    before = (index_dir / MANIFEST_NAME).read_bytes()
    _fill(small_disk, 0)
    with pytest.raises(StorageError, match=r"the disk holding the index manifest .* is full"):
        manifest.save(index_dir)
    assert (index_dir / MANIFEST_NAME).read_bytes() == before  # atomic: the old one stands
    assert not list(index_dir.glob("*.tmp"))


def test_a_ledger_the_disk_cannot_take_is_named_and_the_old_one_stands(small_disk: Path) -> None:
    from ctxr.enrich.situate.ledger import Ledger

    ledger = Ledger(small_disk / "ledger.json")
    ledger.begin("anthropic", "claude-haiku-4-5", "situate/1", None)
    ledger.finish()
    ledger.write()
    before = (small_disk / "ledger.json").read_text()
    _fill(small_disk, 0)
    for i in range(2000):  # a ledger larger than what is left (nothing)
        ledger.add_prefix(f"doc-{i}", f"docs/doc-{i}.md", chunks=3, tokens=900, cached=True)
    with pytest.raises(StorageError, match="LLM ledger") as raised:
        ledger.write()
    assert "is full" in str(raised.value)
    assert (small_disk / "ledger.json").read_text() == before
    assert not list(small_disk.glob("*.tmp"))
