"""Golden tests: real-looking files of every kind, split and compared with checked-in chunks.

Each input under ``tests/data/golden/`` is loaded with ``load_document`` (so routing by
suffix and sniffing is covered too), split, and compared with ``expected/<name>.json``: the
kind and language it was routed to and every chunk's start, end, token count, heading path,
prefix and pages. The PDF is written at test time by the hand-made PDF writer of
``tests/fixtures/pdf.py`` (no binary fixture is checked in).

Regenerate after an intended change with ``CTXR_UPDATE_GOLDEN=1 pytest
tests/enrich/split/test_golden.py``, then have a person review the diff of ``expected/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxr.enrich.load.documents import load_document
from ctxr.enrich.split import split_document
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document
from tests.fixtures.paths import DATA
from tests.fixtures.pdf import make_pdf, sentences

GOLDEN = DATA / "golden"
EXPECTED = GOLDEN / "expected"
UPDATE = os.environ.get("CTXR_UPDATE_GOLDEN") == "1"
MAX_TOKENS = 96  # small enough that every file splits into several chunks

# input file -> (kind, language) it must be routed to
INPUTS: dict[str, tuple[str, str | None]] = {
    "guide.md": ("markdown", None),
    "page.html": ("html", None),
    "inventory.py": ("code", "python"),
    "widget.ts": ("code", "typescript"),
    "queue.go": ("code", "go"),
    "ring.rs": ("code", "rust"),
    "Ledger.java": ("code", "java"),
    "hashmap.c": ("code", "c"),
    "matrix.cpp": ("code", "cpp"),
    "survey.txt": ("text", None),
    "support.chat": ("conversation", None),
}


def _summary(doc: Document, chunks: list[Chunk]) -> dict[str, object]:
    return {
        "kind": doc.kind,
        "language": doc.language,
        "max_tokens": MAX_TOKENS,
        "text_chars": len(doc.text),
        "chunks": [
            {
                "start": c.start,
                "end": c.end,
                "token_count": c.token_count,
                "heading_path": list(c.heading_path),
                "prefix": c.prefix,
                "pages": list(c.pages),
                # for the reviewer of a diff only; offsets are what is compared in substance
                "first_line": c.text.splitlines()[0][:80],
            }
            for c in chunks
        ],
    }


def _check(name: str, doc: Document) -> None:
    chunks = split_document(doc, max_tokens=MAX_TOKENS)
    for chunk in chunks:  # the invariants hold on real files as well
        assert doc.text[chunk.start : chunk.end] == chunk.text
        assert chunk.token_count == count_tokens(chunk.text) <= MAX_TOKENS
    assert len(chunks) >= 2, f"{name} should split into several chunks at {MAX_TOKENS} tokens"
    got = _summary(doc, chunks)
    path = EXPECTED / f"{name}.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    assert path.exists(), f"no golden {path}; run with CTXR_UPDATE_GOLDEN=1 and review it"
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert got == expected, f"{name}: split changed; see tests/data/golden/README.md"


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_golden(name: str) -> None:
    doc = load_document(GOLDEN / name)
    assert (doc.kind, doc.language) == INPUTS[name]
    _check(name, doc)


def test_prose_golden_keeps_crlf() -> None:
    """The checked-in prose file must keep its CRLF line ends (see .gitattributes there)."""
    assert b"\r\n" in (GOLDEN / "survey.txt").read_bytes()


def test_golden_pdf(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(make_pdf([sentences(page, 6) for page in (1, 2, 3)]))
    doc = load_document(path)
    assert doc.kind == "pdf"
    _check("report.pdf", doc)
    chunks = split_document(doc, max_tokens=MAX_TOKENS)
    assert {p for c in chunks for p in c.pages} == {1, 2, 3}


def test_cpp_reference_returning_method_has_a_clean_symbol_path() -> None:
    text = (
        "class Matrix {\npublic:\n"
        "    double& at(std::size_t r, std::size_t c) {\n        return data_[r + c];\n    }\n"
        "    double get(std::size_t r) const {\n        return data_[r];\n    }\n};\n"
    )
    doc = Document(
        doc_id="m", source="m.cpp", text=text, kind="code", title="m", sha256="",
        language="cpp",
    )  # fmt: skip
    chunks = split_document(doc, max_tokens=24)
    paths = {c.heading_path for c in chunks}
    assert ("Matrix", "at") in paths, paths
