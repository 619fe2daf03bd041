"""The `ctxr` CLI through its real entry point (click's CliRunner on `ctxr.cli.main`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxr.cli import main
from ctxr.config import load_settings
from ctxr.pipeline.build import build_index
from tests.fakes.hash_embedder import HashEmbedder
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

HIT_FIELDS = {
    "rank", "chunk_id", "doc_id", "source", "start", "end", "heading_path", "pages", "text",
    "context", "score", "scores", "expanded", "flags",
}  # fmt: skip


def run(*args: str | Path) -> Result:
    # A wide terminal so rich does not wrap paths in the human tables.
    return CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "200"})


def test_index_json_report(
    examples_index: BuiltIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CTXR_CACHE_DIR", str(examples_index.cache_dir))  # cached embeddings
    result = run("index", "examples", "--index", tmp_path / "idx", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["index_dir"] == str(tmp_path / "idx")
    assert report["context_kind"] == "outline"
    assert report["files_seen"] == 10
    assert report["documents_indexed"] == 10
    assert report["documents_unchanged"] == report["documents_removed"] == 0
    assert report["points_total"] == report["chunks_written"] == examples_index.report.points_total
    assert report["skipped"] == [] and report["failed"] == []
    assert isinstance(report["seconds"], float)
    sizes = report["chunk_sizes"]  # per kind, over the chunks written
    assert {"markdown", "code"} <= set(sizes)
    assert sum(s["chunks"] for s in sizes.values()) == report["chunks_written"]
    assert all(s["min"] <= s["median"] <= s["max"] for s in sizes.values())

    again = run("index", "examples", "--index", tmp_path / "idx", "--json")
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert (second["documents_indexed"], second["documents_unchanged"]) == (0, 10)
    assert second["points_total"] == report["points_total"]

    rebuilt = run("index", "examples", "--index", tmp_path / "idx", "--rebuild", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert json.loads(rebuilt.stdout)["points_total"] == report["points_total"]


def test_index_human_summary_and_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bad.txt").write_bytes(b"caf\xe9\n")
    (corpus / ".hidden").write_text("x", encoding="utf-8")
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    # Only a bad file: nothing is embedded, so the real embedder is never loaded.
    result = run("index", corpus, "--index", tmp_path / "idx")
    assert result.exit_code == 3, result.output  # partial: a file failed, the rest is indexed
    assert "documents indexed" in result.stderr
    assert "skipped 1 path: 1 hidden file" in result.stderr
    assert "bad.txt" in result.stderr and "not valid UTF-8" in result.stderr
    strict = run("index", corpus, "--index", tmp_path / "idx", "--strict", "--json")
    assert strict.exit_code == 1
    assert json.loads(strict.stdout)["failed"][0]["path"] == (corpus / "bad.txt").as_posix()


def _search_json(index_dir: Path, *args: str) -> list[dict[str, Any]]:
    result = run("search", *args, "--index", index_dir, "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["schema"] == "ctxr.hits/1"
    hits: list[dict[str, Any]] = answer["hits"]
    return hits


def test_search_json_hit_fields(examples_index: BuiltIndex) -> None:
    hits = _search_json(
        examples_index.index_dir, "What is the default value of THUMB_CACHE_MAX?", "-k", "3"
    )
    assert len(hits) == 3
    for rank, hit in enumerate(hits, start=1):
        assert set(hit) == HIT_FIELDS
        assert hit["rank"] == rank
        assert set(hit["scores"]) <= {"dense", "bm25", "bm25_doc"}
        for per in hit["scores"].values():
            assert set(per) == {"score", "rank"} and per["rank"] >= 1
        assert hit["doc_id"] == hit["source"]
        assert 0 <= hit["start"] < hit["end"]
        assert isinstance(hit["heading_path"], list) and hit["context"].startswith("From ")
    top = hits[0]
    assert top["source"] == "examples/docs/configuration.md"
    assert set(top["scores"]) == {"dense", "bm25", "bm25_doc"}  # short prose: three rankings
    text = (ROOT / top["source"]).read_bytes().decode("utf-8-sig")
    assert text[top["start"] : top["end"]] == top["text"]


def test_search_bm25_mode_has_only_bm25_scores(examples_index: BuiltIndex) -> None:
    hits = _search_json(examples_index.index_dir, "lumen-backup.timer", "--mode", "bm25", "-k", "4")
    assert hits and all(set(h["scores"]) == {"bm25"} for h in hits)
    assert hits[0]["source"] == "examples/docs/backup-restore.md"
    dense = _search_json(examples_index.index_dir, "nightly backups", "--mode", "dense", "-k", "2")
    assert all(set(h["scores"]) == {"dense"} for h in dense)


def test_search_human_table(examples_index: BuiltIndex) -> None:
    result = run("search", "MAX_PARALLEL uploads", "--index", examples_index.index_dir, "-k", "2")
    assert result.exit_code == 0, result.output
    assert "2 hits for 'MAX_PARALLEL uploads'" in result.stdout
    assert "examples/web/uploadQueue.ts" in result.stdout
    assert "bm25 #1" in result.stdout


def test_batch_queries_one_json_line_each(examples_index: BuiltIndex, tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        '{"id": "a", "query": "restore --drop-existing"}\n\n'
        '{"id": 7, "query": "撮影日時がずれる タイムゾーンの設定"}\n',
        encoding="utf-8",
    )
    result = run("search", "--queries", queries, "--index", examples_index.index_dir, "-k", "2")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["a", "7"]
    assert lines[1]["query"] == "撮影日時がずれる タイムゾーンの設定"
    assert all(len(line["hits"]) == 2 for line in lines)
    assert set(lines[0]["hits"][0]) == HIT_FIELDS
    assert lines[0]["hits"][0]["source"] == "examples/docs/backup-restore.md"
    assert lines[1]["hits"][0]["source"] == "examples/docs/faq.ja.md"


def test_malformed_queries_line_names_file_and_line(
    examples_index: BuiltIndex, tmp_path: Path
) -> None:
    queries = tmp_path / "bad.jsonl"
    queries.write_text('{"id": "a", "query": "x"}\n{"id": "b"}\n', encoding="utf-8")
    result = run("search", "--queries", queries, "--index", examples_index.index_dir)
    assert result.exit_code == 2
    assert f"{queries}:2" in result.stderr
    assert '"query"' in result.stderr
    not_json = tmp_path / "worse.jsonl"
    not_json.write_text("not json\n", encoding="utf-8")
    result = run("search", "--queries", not_json, "--index", examples_index.index_dir)
    assert result.exit_code == 2 and f"{not_json}:1" in result.stderr


def test_query_and_queries_are_exclusive(examples_index: BuiltIndex) -> None:
    result = run("search", "--index", examples_index.index_dir)
    assert result.exit_code == 2
    assert "give either a QUERY or --queries" in result.output


def test_missing_index_exit_2(tmp_path: Path) -> None:
    result = run("search", "anything", "--index", tmp_path / "nope")
    assert result.exit_code == 2
    assert "no ctxr index at" in result.stderr
    assert "ctxr index PATH --index DIR" in result.stderr
    assert "Traceback" not in result.output


def test_mismatched_embedder_exit_2(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nbrass lanterns\n", encoding="utf-8")
    build_index(
        [corpus],
        load_settings(index_dir=tmp_path / "idx", cache_dir=tmp_path / "cache"),
        embedder=HashEmbedder(),
    )
    result = run("search", "lanterns", "--index", tmp_path / "idx")
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())  # rich may wrap the line
    assert "fake:hash-64" in message
    assert "onnx:all-MiniLM-L6-v2-int8" in message
    assert "--rebuild" in message


def test_invalid_setting_exit_2(tmp_path: Path) -> None:
    result = run("index", tmp_path, "--index", tmp_path / "idx", "--chunk-tokens", "1")
    assert result.exit_code == 2
    assert "--chunk-tokens 1" in result.stderr  # the flag given, not the variable
