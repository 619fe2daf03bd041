"""`ctxr split FILE`: one file's chunks and their metadata, through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ctxr.cli import main
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.split import split_document
from tests.fixtures.paths import ROOT, UDHR
from tests.fixtures.pdf import make_pdf, sentences

EXAMPLE = ROOT / "examples" / "docs" / "configuration.md"


@pytest.fixture(autouse=True)
def _clean_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no stray ./.env settings
    for name in ("CTXR_CHUNK_TOKENS", "CTXR_CHUNK_OVERLAP", "CTXR_CHUNKING"):
        monkeypatch.delenv(name, raising=False)


def run(*args: object) -> Result:
    return CliRunner().invoke(main, ["split", *map(str, args)], env={"COLUMNS": "200"})


def test_json_matches_the_library_split() -> None:
    result = run(EXAMPLE, "--json", "--max-tokens", "120")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    doc = load_document(EXAMPLE)
    expected = split_document(doc, max_tokens=120)
    assert data["kind"] == "markdown" and data["max_tokens"] == 120
    assert [(c["start"], c["end"], c["tokens"]) for c in data["chunks"]] == [
        (c.start, c.end, c.token_count) for c in expected
    ]
    for c in data["chunks"]:
        assert doc.text[c["start"] : c["end"]] == c["text"]
        assert c["tokens"] <= 120
    assert any(c["heading_path"] for c in data["chunks"])


def test_table_lists_every_chunk() -> None:
    result = run(EXAMPLE, "--max-tokens", "120")
    assert result.exit_code == 0, result.output
    n = len(split_document(load_document(EXAMPLE), max_tokens=120))
    assert f"{n} chunks, budget 120 tokens" in result.output
    for header in ("start-end", "tokens", "trail", "pages", "prefix", "snippet"):
        assert header in result.output


def test_pdf_pages_in_both_outputs(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(make_pdf([sentences(1, 20), sentences(2, 20)]))
    data = json.loads(run(path, "--json", "--max-tokens", "64").output)
    assert data["kind"] == "pdf"
    pages = [tuple(c["pages"]) for c in data["chunks"]]
    assert pages[0] == (1,) and pages[-1] == (2,) and (1, 2) in pages
    table = run(path, "--max-tokens", "64")
    assert table.exit_code == 0 and "1,2" in table.output


def test_conversation_markup_is_printed_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "standup.chat"
    path.write_text("[09:00] Alice: [bold]hi[/bold]\n[09:01] Bob: hello\n", encoding="utf-8")
    result = run(path)
    assert result.exit_code == 0, result.output
    assert "[09:00] Alice: [bold]hi[/bold]" in result.output
    assert "turns 1-2 > Alice, Bob" in result.output


def test_bad_file_is_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(make_pdf([[]]))
    result = run(path)
    assert result.exit_code == 2
    assert "OCR it first" in result.output


def test_several_files_report_sizes_per_kind() -> None:
    code = ROOT / "examples" / "lumen" / "thumbnails.py"
    result = run(EXAMPLE, code, "--json", "--max-tokens", "120")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [f["kind"] for f in data["files"]] == ["markdown", "code"]
    for kind, file in zip(("markdown", "code"), data["files"], strict=True):
        assert data["sizes"][kind]["chunks"] == len(file["chunks"])
        assert data["sizes"][kind]["max"] == max(c["tokens"] for c in file["chunks"])
    one = json.loads(run(code, "--json").output)
    assert one["sizes"]["code"]["chunks"] == len(one["chunks"])
    table = run(EXAMPLE, code, "--max-tokens", "120")
    assert "markdown chunk tokens:" in table.output and "code chunk tokens:" in table.output


def test_a_bad_flag_value_is_named_by_its_flag() -> None:
    result = run(EXAMPLE, "--max-tokens", "12")
    assert result.exit_code == 2
    assert "--max-tokens 12" in result.output and "CTXR_CHUNK_TOKENS" not in result.output


def test_json_says_the_language_and_the_budget_it_chose(tmp_path: Path) -> None:
    texts = json.loads((UDHR).read_text("utf-8"))["texts"]
    japanese = tmp_path / "udhr_ja.txt"
    japanese.write_text("\n\n".join(texts["ja"] * 6), encoding="utf-8")
    data = json.loads(run(japanese, "--json").output)
    assert (data["natural_language"], data["token_inflation"]) == ("ja", 2.27)
    # 200 x 2.27 = 454, stopped where MiniLM's 256 word pieces (less 48 for the context) end.
    assert data["plain_max_tokens"] == 200 and 200 < data["max_tokens"] < 454
    assert all(c["tokens"] <= data["max_tokens"] for c in data["chunks"])
    english = json.loads(run(EXAMPLE, "--json").output)
    assert (english["natural_language"], english["token_inflation"]) == ("en", 1.0)
    assert english["max_tokens"] == english["plain_max_tokens"] == 200
