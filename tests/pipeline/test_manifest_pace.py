"""When a run saves its manifest (`ctxr.pipeline.manifest_pace`): after each batch while a save
is cheap against the time since the last one, and always at the end."""

from __future__ import annotations

from pathlib import Path

from ctxr.index.manifest import MANIFEST_NAME, DocumentEntry, IndexSettings, Manifest
from ctxr.pipeline.manifest_pace import SAVE_SHARE, PacedSaves

SETTINGS = IndexSettings(
    embedder="onnx:all-MiniLM-L6-v2-int8", dim=384, analyzer="ctxr-bm25/1", bm25_k1=1.2, bm25_b=0.75
)


class SteppedClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LargeManifest(Manifest):
    """A manifest whose every save takes a second on `clock` (a large index's)."""

    clock: SteppedClock

    def save(self, index_dir: Path) -> None:
        super().save(index_dir)
        self.clock.now += 1.0


class Flushes:
    """Counts the store flushes a save makes first."""

    def __init__(self) -> None:
        self.count = 0

    def flush(self) -> None:
        self.count += 1


def _entry(n: int) -> DocumentEntry:
    return DocumentEntry(f"d{n}.md", "0" * 64, "r", 1, 10, "outline", "2026-12-06T00:00:00Z")


def _saved(index_dir: Path) -> set[str]:
    if not (index_dir / MANIFEST_NAME).exists():
        return set()
    return set(Manifest.load(index_dir).documents)


def test_a_save_waits_while_the_last_one_is_recent_against_its_cost(tmp_path: Path) -> None:
    clock = SteppedClock()
    flushes = Flushes()
    manifest = LargeManifest(settings=SETTINGS)
    manifest.clock = clock
    saves = PacedSaves(manifest, tmp_path, flushes.flush, clock=clock)
    manifest.documents["d0"] = _entry(0)
    saves.recorded()  # the first save is due: none was made yet
    assert _saved(tmp_path) == {"d0"}
    manifest.documents["d1"] = _entry(1)
    clock.now += 1.0
    saves.recorded()  # a second after a save that cost a second: not due
    assert _saved(tmp_path) == {"d0"} and saves.pending
    clock.now += 1.0 / SAVE_SHARE
    manifest.documents["d2"] = _entry(2)
    saves.recorded()  # long enough since: saved, with everything recorded
    assert _saved(tmp_path) == {"d0", "d1", "d2"} and not saves.pending
    manifest.documents["d3"] = _entry(3)
    saves.recorded()
    assert _saved(tmp_path) == {"d0", "d1", "d2"}
    saves.finish()  # the run's end saves what is left
    assert _saved(tmp_path) == {"d0", "d1", "d2", "d3"} and not saves.pending
    assert flushes.count == 3  # one flush before each save, none for a skipped one


def test_save_now_saves_whatever_the_pace(tmp_path: Path) -> None:
    clock = SteppedClock()
    flushes = Flushes()
    manifest = Manifest(settings=SETTINGS)
    saves = PacedSaves(manifest, tmp_path, flushes.flush, clock=clock)
    for n in range(3):
        manifest.documents[f"d{n}"] = _entry(n)
        saves.save_now()  # a removal is saved before the points go
        assert _saved(tmp_path) == {f"d{i}" for i in range(n + 1)}
    saves.finish()  # nothing pending: no save
    assert flushes.count == 3
