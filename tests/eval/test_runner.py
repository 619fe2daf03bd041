"""The evaluation runner end to end on tiny data sets, through the real index and search."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from ctxr.cli.eval import eval_command
from ctxr.config import Settings, load_settings
from ctxr.errors import ConfigError
from ctxr.eval import metrics
from ctxr.eval.datasets import load_anthropic_codebase
from ctxr.eval.judging import document_ranks, spans_match
from ctxr.eval.report import plot_recall, print_report, to_json, to_markdown
from ctxr.eval.rows import parse_rows
from ctxr.eval.runner import (
    NO_RERANKER,
    EvalResult,
    given_chunker,
    run_eval,
    search_and_score,
)
from ctxr.retrieve.service import SearchService
from ctxr.types import Document, Hit, text_hash
from tests.fixtures.index import BuiltIndex

# --- fixtures ----------------------------------------------------------------------------------

_BEIR_DOCS = {
    "d1": ("Photosynthesis in algae", "Chlorophyll absorbs light to fix carbon dioxide."),
    "d2": ("Vaccines and immunity", "Measles vaccination induces lasting antibody responses."),
    "d3": ("Plate tectonics", "Subduction zones cause earthquakes and volcanic arcs."),
    "d4": ("Gut microbiome", "Intestinal bacteria ferment dietary fibre into butyrate."),
    "d5": ("Dark matter halos", "Galaxy rotation curves imply unseen gravitating mass."),
    "d6": ("Telomere shortening", "Telomerase activity declines with cellular ageing."),
    "d7": ("Ocean acidification", "Dissolved carbon dioxide lowers seawater pH and harms corals."),
    "d8": ("", "Insulin resistance precedes type 2 diabetes in obese adults."),
}
_BEIR_QUERIES = {
    "q1": ("measles vaccination antibody", {"d2": 1}),
    "q2": ("telomerase ageing", {"d6": 1}),
    "q3": ("carbon dioxide", {"d1": 1, "d7": 2}),
}


def _write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": i, "title": t, "text": x, "metadata": {}} for i, (t, x) in _BEIR_DOCS.items()]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    queries = [{"_id": q, "text": t, "metadata": {}} for q, (t, _) in _BEIR_QUERIES.items()]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    rows = ["query-id\tcorpus-id\tscore"]
    rows += [
        f"{q}\t{d}\t{g}" for q, (_, judged) in _BEIR_QUERIES.items() for d, g in judged.items()
    ]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return folder


_CODE_DOCS = {
    "u1": ["def parse_header(raw):\n    return raw.split(':')\n\n", "RETRY = 3\n",
           "def connect_socket(host):\n    return open_tcp(host)\n"],
    "u2": ["RETRY = 3\n", "class LruCache:\n    def evict_oldest(self):\n        pass\n"],
}  # fmt: skip
_CODE_QUERIES = [
    ("how are headers parsed", [["u1", 0]]),
    ("which retry count is used", [["u2", 0]]),  # same text as u1#1: matched by id, not text
    ("socket connection and cache eviction", [["u1", 2], ["u2", 1]]),
]


def _write_codebase(folder: Path) -> Path:
    folder.mkdir(parents=True)
    docs = [
        {"doc_id": f"doc_{n}", "original_uuid": uuid, "content": "".join(parts),
         "chunks": [{"chunk_id": f"{uuid}_{i}", "original_index": i, "content": p}
                    for i, p in enumerate(parts)]}
        for n, (uuid, parts) in enumerate(_CODE_DOCS.items())
    ]  # fmt: skip
    (folder / "codebase_chunks.json").write_text(json.dumps(docs))
    lines = [
        json.dumps({"query": q, "answer": "", "golden_chunk_uuids": g}) for q, g in _CODE_QUERIES
    ]
    (folder / "evaluation_set.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(cache_dir=tmp_path / "cache", index_dir=tmp_path / "unused")


# --- the overlap rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "hit", "expected"),
    [
        ((0, 100), (0, 100), True),  # identical
        ((0, 100), (50, 150), True),  # half of both
        ((0, 100), (51, 151), False),  # 49 of 100
        ((0, 100), (100, 200), False),  # touching, no overlap
        ((100, 200), (0, 1000), True),  # a big hit holding the whole golden chunk
        ((0, 1000), (400, 420), True),  # a small hit inside a big golden chunk
        ((0, 1000), (990, 1030), False),  # 10 of the hit's 40 characters
        ((0, 10), (9, 11), True),  # 1 of the hit's 2 characters
    ],
)
def test_spans_match(gold: tuple[int, int], hit: tuple[int, int], expected: bool) -> None:
    assert spans_match(*gold, *hit) is expected


def test_score_ranks_agrees_with_score_query() -> None:
    rng = random.Random(7)
    for _ in range(200):
        retrieved = [f"d{rng.randrange(15)}" for _ in range(rng.randrange(0, 25))]
        qrels = {f"d{rng.randrange(15)}": rng.randrange(0, 3) for _ in range(rng.randrange(1, 5))}
        expected = metrics.score_query(retrieved, qrels, (1, 5, 20))
        got = metrics.score_ranks(metrics.first_ranks(retrieved), qrels, (1, 5, 20))
        assert got == pytest.approx(expected)


def test_recall_curve_is_macro_recall_at_each_k() -> None:
    found = {"a": {"x": 1, "y": 3}, "b": {"z": 2}}
    qrels = {"a": {"x": 1, "y": 1}, "b": {"z": 1, "w": 1}}
    assert metrics.recall_curve(found, qrels, 3) == pytest.approx([0.25, 0.5, 0.75])


def test_parse_rows() -> None:
    assert [r.name for r in parse_rows("dense:none, hybrid")] == ["dense:none", "hybrid:outline"]
    with pytest.raises(ConfigError, match="unknown ablation row"):
        parse_rows("sparse")


# --- anthropic-codebase --------------------------------------------------------------------------


def test_given_chunker_keeps_offsets_and_maps_keys(tmp_path: Path) -> None:
    dataset = load_anthropic_codebase(_write_codebase(tmp_path / "cb"))
    chunker, keys = given_chunker(dataset, "cl100k_base")
    d = dataset.documents[0]
    doc = Document(d.doc_id, d.title, d.text, "code", d.title, text_hash(d.text))
    chunks = chunker(doc)
    assert [c.text for c in chunks] == [doc.text[c.start : c.end] for c in chunks]
    assert [keys[c.chunk_id] for c in chunks] == ["u1#0", "u1#1", "u1#2"]
    assert all(c.token_count > 0 for c in chunks)


def test_given_chunks_end_to_end(tmp_path: Path, settings: Settings) -> None:
    result = run_eval(
        "anthropic-codebase", _write_codebase(tmp_path / "cb"), chunks="given",
        rows=parse_rows("bm25:none,dense:outline"), ks=[1, 2, 5], settings=settings,
    )  # fmt: skip
    bm25 = result.rows[0]
    assert bm25.name == "bm25:none"
    assert result.indexes["none"]["points"] == 5
    # q1 at rank 1; q2's golden text is duplicated in u1, so it is at rank 1 or 2; q3 has two.
    assert bm25.scores["pass@5"] == pytest.approx(1.0)
    assert bm25.scores["pass@2"] == pytest.approx(1.0)
    assert 0 < result.rows[1].scores["pass@5"] <= 1


def test_our_chunks_use_the_overlap_rule(tmp_path: Path, settings: Settings) -> None:
    result = run_eval(
        "anthropic-codebase", _write_codebase(tmp_path / "cb"), chunks="ours",
        rows=parse_rows("bm25:none"), ks=[5], settings=settings,
    )  # fmt: skip
    # ctxr's splitter keeps these tiny files whole: each hit holds every golden chunk of its
    # document, so every golden chunk is found within 2 hits.
    assert result.indexes["none"]["points"] == 2
    assert result.rows[0].scores["pass@5"] == pytest.approx(1.0)
    assert result.rows[0].settings["chunks"] == "ours"


# --- BEIR, all rows, through the CLI and the report -----------------------------------------


@pytest.mark.slow
def test_beir_all_rows_end_to_end(tmp_path: Path, settings: Settings) -> None:
    data = _write_beir(tmp_path / "tiny")
    result = run_eval("beir", data, ks=[1, 10], settings=settings, index_dir=tmp_path / "idx")
    assert [r.name for r in result.rows] == [
        "dense:none", "dense:outline", "bm25:none", "bm25:outline", "hybrid:none",
        "hybrid:outline", "rerank:outline",
    ]  # fmt: skip
    rerank = result.rows[-1]
    assert not rerank.available and rerank.note == NO_RERANKER and not rerank.scores
    by_name = {r.name: r for r in result.rows}
    assert by_name["bm25:none"].scores["recall@1"] == pytest.approx(2 / 3 + 1 / 6)
    for row in result.rows[:-1]:
        assert row.scores["recall@10"] == pytest.approx(1.0)  # 8 documents: all retrieved
        assert row.curve == sorted(row.curve) and len(row.curve) == 10
        assert (
            row.settings["candidates"] == settings.search.candidates and row.settings["hits"] == 30
        )
        assert row.settings["bm25_k1"] == 1.2
    assert by_name["hybrid:outline"].settings["fusion"] == "dbsf"
    assert by_name["hybrid:outline"].settings["rrf_k"] is None
    assert by_name["hybrid:outline"].settings["dense_confidence"] == "auto"
    assert by_name["dense:none"].settings["dense_confidence"] is None
    assert by_name["dense:none"].settings["fusion"] is None
    assert (tmp_path / "idx").is_dir()  # a named index directory is kept

    body = json.loads(json.dumps(to_json(result)))
    assert body["rows"][2]["published"] == []  # not scifact: no reference numbers
    console = Console(record=True, width=200)
    print_report(result, console)
    assert NO_RERANKER in console.export_text()
    markdown = to_markdown(result).splitlines()
    assert markdown[0].startswith("| row | ndcg@10 | recall@1 | recall@10 | mrr@10 |")
    assert len(markdown) == 2 + len(result.rows)
    assert markdown[-1].startswith("| rerank:outline | - |") and NO_RERANKER in markdown[-1]
    pytest.importorskip("matplotlib")
    assert plot_recall(result, tmp_path / "recall.png").stat().st_size > 1000


def test_cli_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    data = _write_beir(tmp_path / "tiny")
    args = ["beir", "--data", str(data), "--modes", "bm25:none,rerank", "--k", "1,5", "--json"]
    out = CliRunner().invoke(eval_command, args)
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert [r["name"] for r in body["rows"]] == ["bm25:none", "rerank:outline"]
    assert body["ks"] == [1, 5] and body["queries"] == 3
    bad = CliRunner().invoke(eval_command, ["beir", "--data", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "directory not found" in bad.output


def test_beir_scifact_gets_published_numbers(tmp_path: Path, settings: Settings) -> None:
    data = _write_beir(tmp_path / "scifact")
    result = run_eval("beir", data, rows=parse_rows("bm25:none"), ks=[10], settings=settings)
    assert isinstance(result, EvalResult)
    refs = to_json(result)["rows"][0]["published"]
    assert refs[0]["label"] == "Anserini BM25 flat" and refs[0]["ndcg@10"] == 0.6789


def test_rows_may_name_their_fusion(tmp_path: Path, settings: Settings) -> None:
    rows = parse_rows("hybrid:none:rrf,hybrid:none:dbsf,hybrid")
    assert [r.name for r in rows] == ["hybrid:none:rrf", "hybrid:none:dbsf", "hybrid:outline"]
    data = _write_beir(tmp_path / "tiny")
    result = run_eval("beir", data, ks=[1, 10], rows=rows[:2], settings=settings)
    rrf, dbsf = result.rows
    assert (rrf.settings["fusion"], rrf.settings["rrf_k"]) == ("rrf", 60)
    assert (dbsf.settings["fusion"], dbsf.settings["rrf_k"]) == ("dbsf", None)
    for bad in ("dense:none:rrf", "hybrid:none:borda"):
        with pytest.raises(ConfigError, match="MODE\\[:CONTEXT\\[:FUSION\\]\\]"):
            parse_rows(bad)


def test_cli_bars_count_each_index_run_from_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two contexts mean two indexing runs on one set of bars: the second used to add to the
    # first (`chunks 180/90`, `embeddings 1474/737`); each total must be what is counted.
    import re

    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    data = _write_beir(tmp_path / "tiny")
    args = ["beir", "--data", str(data), "--modes", "bm25:none,bm25:outline", "--k", "1"]
    out = CliRunner().invoke(eval_command, args)
    assert out.exit_code == 0, out.output
    bars = re.findall(r"^(split|embeddings)\s.*?(\d+)/(\d+)", out.stderr, re.M)
    assert {name for name, _, _ in bars} == {"split", "embeddings"}, out.stderr
    assert all(done == total for _, done, total in bars), out.stderr


def test_beir_ranks_distinct_documents_at_their_best_chunk() -> None:
    # A document's second chunk takes no place: d2 is the second document, not the third hit.
    def hit(rank: int, doc_id: str) -> Hit:
        return Hit(rank, f"{doc_id}#{rank}", doc_id, doc_id, 0, 1, (), "text", "", 1 / rank)

    hits = [hit(1, "d1"), hit(2, "d1"), hit(3, "d2"), hit(4, "d3"), hit(5, "d2")]
    assert document_ranks(hits) == {"d1": 1, "d2": 2, "d3": 3}
    scores = metrics.score_ranks(document_ranks(hits), {"d3": 1}, (2, 3))
    assert scores["recall@2"] == 0.0 and scores["recall@3"] == 1.0


def test_beir_drops_a_query_own_document_and_moves_the_rest_up() -> None:
    # BEIR's ignore_identical_ids: ArguAna's query finds itself first; that hit is no hit.
    def hit(rank: int, doc_id: str) -> Hit:
        return Hit(rank, f"{doc_id}#{rank}", doc_id, doc_id, 0, 1, (), "text", "", 1 / rank)

    hits = [hit(1, "q1"), hit(2, "d2"), hit(3, "q1"), hit(4, "d3")]
    assert document_ranks(hits, {"q1"}) == {"d2": 1, "d3": 2}


def test_own_documents_dropped_or_left_out(tmp_path: Path, settings: Settings) -> None:
    # The query d5 is the document d5 itself (ArguAna's shape): found first when its hits are
    # dropped afterwards, absent from the ranking when it is left out; either way no hit.
    data = _write_beir(tmp_path / "own")
    text = _BEIR_DOCS["d5"][1]
    queries = (data / "queries.jsonl").read_text()
    (data / "queries.jsonl").write_text(queries + json.dumps({"_id": "d5", "text": text}) + "\n")
    with (data / "qrels" / "test.tsv").open("a") as qrels:
        qrels.write("d5\td3\t1\n")
    rows = parse_rows("hybrid:none")
    dropped = run_eval("beir", data, ks=[1, 10], rows=rows, settings=settings)
    left = run_eval("beir", data, ks=[1, 10], rows=rows, settings=settings, leave_own_out=True)
    assert any("is dropped" in n for n in dropped.notes)
    assert any("as if the corpus lacked" in n for n in left.notes)
    for result in (dropped, left):
        assert result.rows[0].scores["recall@10"] == pytest.approx(1.0)


def test_a_query_that_is_a_corpus_document_is_searched_without_it(
    examples_index: BuiltIndex,
) -> None:
    # ArguAna's queries are corpus documents: each is searched as if the corpus lacked its own
    # (a negated filter), so its own document neither takes a place nor sways the fusion.
    with SearchService(examples_index.settings) as service:
        doc_id = "examples/docs/backup-restore.md"
        text = service.document(doc_id)["chunks"][0]["text"]  # type: ignore[index]
        seen: dict[str, list[Hit]] = {}

        def record(qid: str, hits: list[Hit]) -> dict[str, int]:
            seen[qid] = hits
            return document_ranks(hits)

        pairs = [("own", text), ("plain", text)]
        qrels = {"own": {"examples/docs/faq.md": 1}, "plain": {"examples/docs/faq.md": 1}}
        search_and_score(
            service, pairs, record, qrels, (1, 10), depth=10, mode="hybrid", candidates=50,
            fusion=None, left_out={"own": frozenset({doc_id})},
        )  # fmt: skip
        assert seen["plain"][0].doc_id == doc_id  # found first when it is not left out
        assert seen["own"] and doc_id not in {h.doc_id for h in seen["own"]}
