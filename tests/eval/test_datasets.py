"""Dataset loaders, on tiny files written here and on the real sets when they are present."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ctxr.errors import DatasetError
from ctxr.eval.datasets import (
    EvalDataset,
    chunk_key,
    default_data_dir,
    load_anthropic_codebase,
    load_beir,
)


def _real_data_dir() -> Path:
    try:
        return default_data_dir()
    except DatasetError:
        pytest.skip("evaluation data directory not found")


# --- anthropic-codebase, tiny ---------------------------------------------------------------


def _write_codebase(folder: Path, docs: list[dict[str, object]], queries: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "codebase_chunks.json").write_text(json.dumps(docs))
    (folder / "evaluation_set.jsonl").write_text("\n".join(queries) + "\n")


def _doc(uuid: str, parts: list[str]) -> dict[str, object]:
    return {
        "doc_id": f"doc_{uuid}",
        "original_uuid": uuid,
        "content": "".join(parts),
        "chunks": [
            {"chunk_id": f"doc_{uuid}_chunk_{i}", "original_index": i, "content": p}
            for i, p in enumerate(parts)
        ],
    }


def _query(text: str, golden: list[list[object]]) -> str:
    return json.dumps({"query": text, "answer": "", "golden_chunk_uuids": golden})


def test_codebase_offsets_and_qrels(tmp_path: Path) -> None:
    docs = [_doc("u1", ["def f():\n", "    return None\n"]), _doc("u2", ["    return None\n"])]
    _write_codebase(tmp_path, docs, [_query("what does f return", [["u1", 1]])])
    ds = load_anthropic_codebase(tmp_path)
    assert ds.name == "anthropic-codebase"
    d1 = ds.documents[0]
    assert d1.doc_id == "u1" and d1.title == "doc_u1"
    for c in d1.chunks:
        assert d1.text[c.start : c.end] == c.text
    assert [(c.start, c.end) for c in d1.chunks] == [(0, 9), (9, 25)]
    assert d1.chunks[1].chunk_key == chunk_key("u1", 1) == "u1#1"
    # Same text in both documents, but only the golden id is judged.
    assert ds.documents[1].chunks[0].text == d1.chunks[1].text
    assert ds.queries[0].qrels == {"u1#1": 1}
    assert ds.queries[0].query_id == "q1"
    assert ds.qrels() == {"q1": {"u1#1": 1}}


def test_codebase_missing_file_names_it_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"codebase_chunks\.json.*claude-cookbooks"):
        load_anthropic_codebase(tmp_path)


def test_codebase_malformed_query_line(tmp_path: Path) -> None:
    _write_codebase(tmp_path, [_doc("u1", ["x"])], [_query("ok", [["u1", 0]]), "{not json"])
    with pytest.raises(DatasetError, match=r"evaluation_set\.jsonl:2: not valid JSON"):
        load_anthropic_codebase(tmp_path)


def test_codebase_chunks_not_tiling_document(tmp_path: Path) -> None:
    doc = _doc("u1", ["abc", "def"])
    doc["content"] = "abcXdef"
    _write_codebase(tmp_path, [doc], [])
    with pytest.raises(DatasetError, match=r"document 0, chunk 1.*offset 3"):
        load_anthropic_codebase(tmp_path)


def test_codebase_unknown_golden_chunk(tmp_path: Path) -> None:
    _write_codebase(tmp_path, [_doc("u1", ["x"])], [_query("q", [["u1", 5]])])
    with pytest.raises(DatasetError, match=r"evaluation_set\.jsonl:1: golden chunk u1#5"):
        load_anthropic_codebase(tmp_path)


def test_codebase_missing_field(tmp_path: Path) -> None:
    _write_codebase(tmp_path, [_doc("u1", ["x"])], [json.dumps({"golden_chunk_uuids": []})])
    with pytest.raises(DatasetError, match=r"evaluation_set\.jsonl:1: field 'query'"):
        load_anthropic_codebase(tmp_path)


# --- BEIR, tiny -------------------------------------------------------------------------------


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, object]], gz: bool = False) -> None:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path.with_name(path.name + ".gz"), "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)


def _write_beir(folder: Path, gz: bool, qrels: str) -> None:
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {}},
        {"_id": "d2", "title": "", "text": "Dogs bark.", "metadata": {}},
    ]
    _write_jsonl(folder / "corpus.jsonl", corpus, gz=gz)
    queries = [{"_id": "1", "text": "do cats purr"}, {"_id": "2", "text": "unjudged"}]
    _write_jsonl(folder / "queries.jsonl", queries, gz=gz)
    (folder / "qrels" / "test.tsv").write_text(qrels)


@pytest.mark.parametrize("gz", [False, True])
def test_beir_tiny(tmp_path: Path, gz: bool) -> None:
    folder = tmp_path / "tiny"
    _write_beir(folder, gz, "query-id\tcorpus-id\tscore\n1\td1\t2\n1\td2\t0\n")
    ds = load_beir(folder)
    assert isinstance(ds, EvalDataset) and ds.name == "tiny"
    assert [(d.doc_id, d.title, d.text, d.chunks) for d in ds.documents] == [
        ("d1", "Cats", "Cats purr.", ()),
        ("d2", "", "Dogs bark.", ()),
    ]
    assert len(ds.queries) == 1  # only judged queries
    assert ds.queries[0].text == "do cats purr"
    assert ds.queries[0].qrels == {"d1": 2, "d2": 0}


def test_beir_missing_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="directory not found"):
        load_beir(tmp_path / "nope")
    tmp_path.joinpath("empty").mkdir()
    with pytest.raises(DatasetError, match=r"corpus\.jsonl.*download"):
        load_beir(tmp_path / "empty")
    _write_beir(tmp_path / "s", False, "query-id\tcorpus-id\tscore\n")
    with pytest.raises(DatasetError, match=r"dev\.tsv.*another split"):
        load_beir(tmp_path / "s", split="dev")


def test_beir_malformed_lines(tmp_path: Path) -> None:
    _write_beir(tmp_path / "a", True, "query-id\tcorpus-id\tscore\n1\td1\t1\n")
    with gzip.open(tmp_path / "a" / "corpus.jsonl.gz", "at", encoding="utf-8") as fh:
        fh.write('{"_id": "d3", "text": \n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl\.gz:3: not valid JSON"):
        load_beir(tmp_path / "a")

    _write_beir(tmp_path / "b", False, "query-id\tcorpus-id\tscore\n1\td1\n")
    with pytest.raises(DatasetError, match=r"test\.tsv:2: expected"):
        load_beir(tmp_path / "b")


def test_beir_judgment_of_unknown_document(tmp_path: Path) -> None:
    _write_beir(tmp_path / "a", False, "query-id\tcorpus-id\tscore\n1\td9\t1\n")
    with pytest.raises(DatasetError, match=r"'d9'\) are not in corpus\.jsonl"):
        load_beir(tmp_path / "a")
    _write_beir(tmp_path / "b", False, "query-id\tcorpus-id\tscore\n7\td1\t1\n")
    with pytest.raises(DatasetError, match=r"'7'\) are not in queries\.jsonl"):
        load_beir(tmp_path / "b")


def test_beir_query_that_is_a_corpus_document_ignores_it(tmp_path: Path) -> None:
    # ArguAna: the query is a corpus document (same id, same text). SciFact: a query id that
    # is also a document id by chance, with other text, ignores nothing.
    folder = tmp_path / "args"
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "a1", "title": "topic", "text": "Cats are better pets."},
        {"_id": "a2", "title": "topic", "text": "Dogs are better pets."},
        {"_id": "7", "title": "", "text": "A document numbered seven."},
    ]
    _write_jsonl(folder / "corpus.jsonl", corpus, gz=True)
    queries = [{"_id": "a1", "text": "Cats are better pets. "}, {"_id": "7", "text": "seven"}]
    _write_jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\na1\ta2\t1\n7\t7\t1\n")
    ds = load_beir(folder)
    assert {q.query_id: q.ignore for q in ds.queries} == {"a1": frozenset({"a1"}), "7": frozenset()}


def test_beir_few_judged_documents_missing_stay_judged(tmp_path: Path) -> None:
    # ArguAna's release lacks 5 of its 1,406 judged documents: they stay in the judgments (a
    # relevant document never found), and the set says which. Beyond 1% the files mismatch.
    folder = tmp_path / "few"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"d{i}", "text": f"document {i}"} for i in range(200)]
    _write_jsonl(folder / "corpus.jsonl", corpus)
    queries = [{"_id": f"q{i}", "text": f"query {i}"} for i in range(200)]
    _write_jsonl(folder / "queries.jsonl", queries)
    rows = [f"q{i}\td{i}\t1" for i in range(199)] + ["q199\tgone\t1"]
    (folder / "qrels" / "test.tsv").write_text("\n".join(["query-id\tcorpus-id\tscore", *rows]))
    ds = load_beir(folder)
    assert ds.missing_judged == ("gone",)
    assert ds.qrels()["q199"] == {"gone": 1}
    (folder / "qrels" / "test.tsv").write_text(
        "\n".join(["query-id\tcorpus-id\tscore", *rows[:9], "q9\tgone2\t1"])
    )
    with pytest.raises(DatasetError, match=r"'gone2'\) are not in corpus\.jsonl"):
        load_beir(folder)


# --- default_data_dir -------------------------------------------------------------------------


def test_default_data_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CTXR_DATA_DIR", str(tmp_path))
    assert default_data_dir() == tmp_path


def test_default_data_dir_walks_up_from_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CTXR_DATA_DIR", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "main" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "main" / "sub")
    assert default_data_dir() == tmp_path / "shared" / "data"


# --- the real sets ----------------------------------------------------------------------------


def test_real_anthropic_codebase() -> None:
    folder = _real_data_dir() / "anthropic-codebase"
    if not folder.is_dir():
        pytest.skip("anthropic-codebase not present")
    ds = load_anthropic_codebase(folder)
    chunks = [c for d in ds.documents for c in d.chunks]
    assert (len(ds.documents), len(chunks), len(ds.queries)) == (90, 737, 248)
    assert len({c.text for c in chunks}) == 723  # why golden chunks are matched by id
    assert len({c.chunk_key for c in chunks}) == 737
    for d in ds.documents:
        assert all(d.text[c.start : c.end] == c.text for c in d.chunks)
    sizes = Counter(len(q.qrels) for q in ds.queries)
    assert sizes[1] == 220 and max(sizes) == 7


def test_real_scifact() -> None:
    # Its speed (under 0.1 s here) is a benchmark's business, not an assertion's.
    folder = _real_data_dir() / "scifact"
    if not folder.is_dir():
        pytest.skip("scifact not present")
    ds = load_beir(folder, "test")
    assert (len(ds.documents), len(ds.queries)) == (5183, 300)
    assert sum(len(q.qrels) for q in ds.queries) == 339
    assert all(d.chunks == () for d in ds.documents)


def test_default_data_dir_from_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # .env.example lists CTXR_DATA_DIR, so a .env file must set it as it sets the others.
    (tmp_path / ".env").write_text(f"CTXR_DATA_DIR={tmp_path / 'data'}\n")
    monkeypatch.chdir(tmp_path)
    assert default_data_dir() == tmp_path / "data"


@pytest.mark.parametrize(
    ("name", "split", "docs", "queries", "judgments", "own", "missing"),
    [
        ("nfcorpus", "test", 3633, 323, 12334, 0, 0),
        ("arguana", "test", 8674, 1406, 1406, 1298, 5),
        ("cosqa", "dev", 6267, 500, 500, 0, 0),
    ],
)
def test_real_beir_sets(
    name: str, split: str, docs: int, queries: int, judgments: int, own: int, missing: int
) -> None:
    # The counts the releases publish (shared/data/*/SOURCE.md): NFCorpus's graded judgments,
    # ArguAna's queries that are corpus documents and its 5 absent judged documents, CoSQA's
    # uncompressed corpus and its queries of two splits in one file.
    folder = _real_data_dir() / name
    if not folder.is_dir():
        pytest.skip(f"{name} not present")
    ds = load_beir(folder, split)
    assert (len(ds.documents), len(ds.queries)) == (docs, queries)
    assert sum(len(q.qrels) for q in ds.queries) == judgments
    assert sum(1 for q in ds.queries if q.ignore == {q.query_id}) == own
    assert len(ds.missing_judged) == missing


def test_beir_corpus_of_code_is_indexed_as_code(tmp_path: Path) -> None:
    # CoSQA's corpus is Python functions; BEIR's files cannot say so, the caller does.
    from ctxr.eval.runner import to_documents

    _write_beir(tmp_path / "code", False, "query-id\tcorpus-id\tscore\n1\td1\t1\n")
    prose = to_documents(load_beir(tmp_path / "code"), "beir")
    code = to_documents(load_beir(tmp_path / "code", language="python"), "beir")
    assert {(d.kind, d.language) for d in prose} == {("text", None)}
    assert {(d.kind, d.language) for d in code} == {("code", "python")}
    with pytest.raises(DatasetError, match=r"unknown code language 'cobol'; choose one of"):
        load_beir(tmp_path / "code", language="cobol")
