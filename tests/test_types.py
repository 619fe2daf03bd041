"""Chunk ids are persisted as Qdrant point ids: their derivation must never drift."""

from __future__ import annotations

import uuid

import pytest

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxr.types import CHUNK_NAMESPACE, chunk_id_for  # noqa: E402


@given(doc_id=st.text(), index=st.integers(0, 2**40))
def test_chunk_id_is_the_uuid5_of_doc_id_and_index(doc_id: str, index: int) -> None:
    expected = str(uuid.uuid5(CHUNK_NAMESPACE, f"{doc_id}\x00{index}"))
    assert chunk_id_for(doc_id, index) == expected


def test_chunk_id_of_a_known_document_is_stable() -> None:
    # Pinned: a change in the namespace or the name's layout would orphan every point
    # already indexed, and the comparison above would not notice it.
    assert chunk_id_for("docs/guide.md", 3) == "8d230b02-e753-590e-a78b-f09e18f4f4dd"
