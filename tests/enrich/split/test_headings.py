"""Headings with no body of their own travel with the content after them: a Markdown file of
many empty headings is packed into chunks near the budget, not one tiny chunk per heading."""

from __future__ import annotations

from ctxr.enrich.split import split_document
from tests.fixtures.chunks import check_invariants
from tests.fixtures.documents import make_document


def test_a_file_of_empty_headings_packs_up_to_the_budget() -> None:
    text = "".join(f"# Heading {i}\n" for i in range(5000))
    doc = make_document(text, "markdown")

    chunks = split_document(doc, max_tokens=200, overlap_tokens=0)

    check_invariants(doc, chunks, 200)
    assert len(chunks) < 5000 / 20  # 4 tokens a heading: dozens of headings a chunk
    assert sum(c.token_count for c in chunks) / len(chunks) > 100


def test_an_empty_heading_travels_with_the_section_after_it() -> None:
    text = (
        "# Guide\n\nIntroduction to the guide.\n\n"
        "# Reference\n\n"  # no body: a heading over nothing
        "# Install\n\nRun the installer and follow the prompts.\n\n"
        "## Options\n\nPass --quiet to silence it.\n"
    )
    doc = make_document(text, "markdown")

    chunks = split_document(doc, max_tokens=200, overlap_tokens=0)

    check_invariants(doc, chunks, 200)
    assert [c.text.split("\n")[0] for c in chunks] == ["# Guide", "# Reference"]
    second = chunks[1]
    assert second.text.startswith("# Reference\n\n# Install\n\nRun the installer")
    assert second.text.endswith("Pass --quiet to silence it.")
    assert second.heading_path == ("Install",)  # the trail of the content it holds


def test_sections_with_a_body_keep_their_own_chunks() -> None:
    text = "# A\n\nalpha text.\n\n# B\n\nbeta text.\n"
    doc = make_document(text, "markdown")

    chunks = split_document(doc, max_tokens=200, overlap_tokens=0)

    assert [c.heading_path for c in chunks] == [("A",), ("B",)]
