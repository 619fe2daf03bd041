"""`ctxr trial` given a judged set's own queries computes `ctxr eval`'s numbers.

The anthropic-codebase set's queries become a trial's questions, each golden chunk an answer
(its document's source and character span), and the trial runs on the set's documents as
`ctxr eval --chunks ours` indexes them: Pass@k must agree within rounding for the same
configurations, and MRR within the spread that ties between identical chunks leave between two
builds of an index. Skipped when the data is absent (see shared/data/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxr.errors import DatasetError
from ctxr.eval.datasets import default_data_dir, load_anthropic_codebase
from ctxr.eval.rows import parse_rows
from ctxr.eval.runner import run_eval, to_documents
from ctxr.eval.trial import TrialOptions, run_trial

# Eval row -> the trial's row for the same configuration (the "none" row is hybrid:none).
ROWS = {"hybrid:none": "none", "dense:none": "dense", "bm25:none": "bm25"}
VARIANTS = ("dense:context=none,mode=dense", "bm25:context=none,mode=bm25")


def _data() -> Path:
    try:
        path = default_data_dir() / "anthropic-codebase"
    except DatasetError:
        pytest.skip("no evaluation data directory (shared/data)")
    if not (path / "codebase_chunks.json").is_file():
        pytest.skip(f"{path} holds no anthropic-codebase set")
    return path


@pytest.mark.slow
def test_trial_with_the_code_sets_queries_reproduces_eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data()
    # One embedding cache for both: the trial re-embeds nothing eval embedded.
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    evaluated = run_eval("anthropic-codebase", data, chunks="ours", rows=parse_rows(list(ROWS)))

    dataset = load_anthropic_codebase(data)
    documents = to_documents(dataset, "anthropic-codebase")
    source = {d.doc_id: d.source for d in documents}
    spans = {c.chunk_key: c for d in dataset.documents for c in d.chunks}
    questions = tmp_path / "questions.jsonl"
    with questions.open("w") as fh:
        for query in dataset.queries:
            answers = [
                {"source": source[spans[key].doc_id], "start": spans[key].start,
                 "end": spans[key].end, "text": spans[key].text}
                for key in query.qrels
            ]  # fmt: skip
            line = {"id": query.query_id, "question": query.text, "answers": answers}
            fh.write(json.dumps(line) + "\n")
    tried = run_trial(
        documents,
        TrialOptions(
            sample=None, questions_file=questions, variants=VARIANTS, without=("outline",),
            baseline="none", resamples=200, out_dir=tmp_path / "out",
        ),
    )  # fmt: skip

    assert tried.questions["count"] == evaluated.queries == 248
    rows = {r.name: r for r in tried.rows}
    assert rows["llm"].available is False  # no provider here: only the none rows are compared
    for eval_row in evaluated.rows:
        trial_row = rows[ROWS[eval_row.name]]
        for metric in tried.metrics:  # pass@5, pass@10, pass@20, mrr@10
            # Exactly: chunks of identical text score alike, and the stores answer such ties
            # in point-id order (`best_first`), so two builds of one corpus rank alike.
            assert trial_row.scores[metric].mean == pytest.approx(
                eval_row.scores[metric], abs=1e-9
            ), (eval_row.name, metric)
    # The same index for the three rows, as eval builds one per context.
    assert len({r.index["index_dir"] for r in tried.rows if r.available}) == 1

    # The statistics on real judgments: intervals of a plausible width around their means,
    # each comparison's difference that of the rows' means; dense search alone clearly behind
    # hybrid search (about 81 against 90 Pass@10 here), BM25 alone level with it at Pass@5.
    for row in (rows["none"], rows["dense"], rows["bm25"]):
        for metric, score in row.scores.items():
            assert score.low <= score.mean <= score.high, (row.name, metric)
        width = row.scores["pass@10"].high - row.scores["pass@10"].low
        assert 0.03 < width < 0.15, (row.name, width)  # about 4 standard errors at n = 248
    for comparison in tried.comparisons:
        expected = rows[comparison.row].scores[comparison.metric].mean
        expected -= rows["none"].scores[comparison.metric].mean
        assert comparison.test.difference == pytest.approx(expected, abs=1e-9)
        assert comparison.test.low <= comparison.test.difference <= comparison.test.high
    (dense,) = [c for c in tried.headline() if c.row == "dense"]
    assert dense.test.significant and dense.test.difference < 0, dense.sentence()
    (bm25,) = [c for c in tried.comparisons if c.row == "bm25" and c.metric == "pass@5"]
    assert not bm25.test.significant, bm25.sentence()
