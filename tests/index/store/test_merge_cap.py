"""The merge limit a writer sets from the index's size (`ctxr.index.store.merge_cap`)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxr.atomic_write import temporary_beside
from ctxr.index.store.edge import EdgeStore, WriterSize
from ctxr.index.store.merge_cap import CONFIG_NAME, FLOOR_KB, merge_cap_kb, set_merge_cap
from ctxr.index.store.seal import read_seal
from tests.index.store.test_edge_store import DIM, POINTS


def _limit(shard: Path) -> int | None:
    config = json.loads((shard / CONFIG_NAME).read_text(encoding="utf-8"))
    limit: int | None = config["optimizers"]["max_segment_size"]
    return limit


def test_the_limit_is_a_quarter_of_the_bulk_and_never_under_the_floor() -> None:
    # 384-d float32 is 1.5 KB a point. A million points: a quarter of a 500,000-point segment,
    # as a shard is created with; 100,000: a quarter of the index would be under the floor.
    assert merge_cap_kb(1_000_000, 500_000, 384) == 500_000 * 1536 // 1024 // 4 == 187_500
    assert merge_cap_kb(400_000, 500_000, 384) == 150_000
    assert merge_cap_kb(100_000, 500_000, 384) == FLOOR_KB
    assert merge_cap_kb(0, 500_000, 384) == FLOOR_KB
    # Never above what the shard was made with: segments of 20,000 points stay apart.
    assert merge_cap_kb(100_000, 20_000, 384) == 20_000 * 1536 // 1024 // 4 == 7_500


def test_a_writer_sizes_the_limit_before_the_engine_loads_the_shard(tmp_path: Path) -> None:
    shard = tmp_path / "shard"
    segment_points = 100_000_000  # 4-d points are small: a segment over the floor is large
    created = EdgeStore.create(shard, DIM, segment_points=segment_points)
    created.upsert(POINTS)
    created.close()
    assert _limit(shard) == segment_points * 16 // 1024 // 4  # a quarter of a segment
    writer = WriterSize(points=len(POINTS), segment_points=segment_points)
    store = EdgeStore.open(shard, writer=writer)
    try:
        assert _limit(shard) == FLOOR_KB  # the engine loaded it and wrote it back as read
        assert store.count() == len(POINTS)
        assert store.query_dense([0, 0, 0, 1], 1)[0].payload["doc_id"] == "c.md"
    finally:
        store.close()
    assert read_seal(shard) is not None  # the config is not sealed: the close sealed the rest
    reader = EdgeStore.open(shard)  # a reader leaves it as it is, and finds the seal whole
    try:
        assert reader.seal_problem is None and _limit(shard) == FLOOR_KB
    finally:
        reader.close()


def test_a_shard_without_a_limit_or_a_readable_config_is_left_to_the_engine(
    tmp_path: Path,
) -> None:
    one_segment = tmp_path / "one"
    EdgeStore.create(one_segment, DIM).close()  # CTXR_SEGMENT_POINTS=0: the engine's own
    before = (one_segment / CONFIG_NAME).read_text(encoding="utf-8")
    assert set_merge_cap(one_segment, 10, 1_000) is None
    assert (one_segment / CONFIG_NAME).read_text(encoding="utf-8") == before
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / CONFIG_NAME).write_text('{"optimizers": ', encoding="utf-8")
    assert set_merge_cap(garbled, 10, 1_000) is None  # no traceback: the load will say it
    assert set_merge_cap(tmp_path / "absent", 10, 1_000) is None
    # A shard made with segments, written now with CTXR_SEGMENT_POINTS=0: its limit stays.
    segmented = tmp_path / "segmented"
    EdgeStore.create(segmented, DIM, segment_points=100_000_000).close()
    before = (segmented / CONFIG_NAME).read_text(encoding="utf-8")
    assert set_merge_cap(segmented, 10, 0) is None
    assert (segmented / CONFIG_NAME).read_text(encoding="utf-8") == before


def test_a_limit_the_disk_will_not_take_is_skipped_not_raised(tmp_path: Path) -> None:
    shard = tmp_path / "shard"
    EdgeStore.create(shard, DIM, segment_points=100_000_000).close()
    before = (shard / CONFIG_NAME).read_text(encoding="utf-8")
    # Where the new config would be written first is taken (a directory): the write fails as
    # on a full disk, and the config is left whole.
    temporary_beside(shard / CONFIG_NAME).mkdir()
    assert set_merge_cap(shard, 10, 100_000_000) is None
    assert (shard / CONFIG_NAME).read_text(encoding="utf-8") == before
