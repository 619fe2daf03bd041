"""`passage_around`: the exact text around a span, rebuilt from chunk payloads alone."""

from __future__ import annotations

from typing import Any

from ctxr.retrieve.around import passage_around

TEXT = "# Title\n\nFirst paragraph here.\n\n## Part\n\nSecond paragraph, longer.\n"


def _points(spans: list[tuple[int, int]]) -> list[dict[str, Any]]:
    points = []
    for i, (start, end) in enumerate(spans):
        following = spans[i + 1][0] if i + 1 < len(spans) else len(TEXT)
        space = TEXT[end:following] if following > end else ""
        points.append({"start": start, "end": end, "text": TEXT[start:end], "source": "a.md",
                       "space_after": space, "heading_path": [f"h{i}"]})  # fmt: skip
    return points


def _spans() -> list[tuple[int, int]]:
    first = TEXT.index("First")
    second = TEXT.index("## Part")
    return [(0, 7), (first, first + 21), (second, len(TEXT) - 1)]


def test_window_is_exact_and_clipped_to_the_chunks() -> None:
    points = _points(_spans())
    start, end = _spans()[1]
    for window in (0, 3, 10, 1000):
        found = passage_around(points, start, end, window)
        assert found is not None
        assert found["text"] == TEXT[found["start"] : found["end"]]
        assert found["start"] == max(0, start - window)
        # the trailing newline is in no chunk
        assert found["end"] == min(len(TEXT) - 1, end + window)
        assert found["heading_path"] == ["h1"] and found["source"] == "a.md"


def test_overlapping_chunks_join_and_unknown_spans_are_none() -> None:
    overlapping = _points([(0, 20), (10, 40), (35, len(TEXT) - 1)])
    found = passage_around(overlapping, 12, 30, 5)
    assert found is not None and found["text"] == TEXT[7:35]
    assert passage_around(overlapping, 10_000, 10_005, 10) is None
    assert passage_around([], 0, 5, 10) is None


def test_a_gap_the_stored_whitespace_does_not_bridge_is_none() -> None:
    points = _points(_spans())
    for p in points:
        p["space_after"] = ""  # an index written before space_after existed
    start, end = _spans()[1]
    assert passage_around(points, start, end, 50) is None
    assert passage_around(points, start, end, 0) is not None  # one chunk needs no bridging
