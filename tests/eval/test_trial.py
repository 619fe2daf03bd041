"""`ctxr trial` end to end against the loopback fake LLM server: questions written, saved and
re-used, contexts paid once, the report printed, written as JSON and drawn."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxr.cli import main
from ctxr.config import load_settings
from ctxr.errors import ConfigError
from ctxr.eval.question_writer import Writer, choose_writer, parse_question, write_questions
from ctxr.eval.trial import TrialOptions, run_trial, sample_documents
from ctxr.progress import NullProgress
from ctxr.types import Chunk, Document, text_hash
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest
from tests.fakes.llm_wire import default_respond, prompt_parts

_CORPUS = {
    "billing.md": (
        "# Billing\n\n## Invoices\n\nInvoices are issued on the first day of each month and "
        "list every metered resource with its unit price, the quantity used and the tax "
        "applied in the customer's region.\n\n## Refunds\n\nA refund is granted within thirty "
        "days when the service was unavailable for more than four hours in a billing period; "
        "support files the claim and finance approves it.\n"
    ),
    "backup.md": (
        "# Backups\n\n## Schedule\n\nSnapshots of every volume are taken nightly at two in the "
        "morning and kept for fourteen days, after which the oldest snapshot is pruned by the "
        "retention job.\n\n## Restore\n\nTo restore a volume, stop the writer, pick a snapshot "
        "by its timestamp and run the restore command; the volume is rebuilt from the snapshot "
        "and its checksum verified.\n"
    ),
    "network.md": (
        "# Network\n\n## Firewall\n\nInbound traffic is denied by default; each service opens "
        "only the ports listed in its manifest, and changes to the rules are reviewed by the "
        "platform team before they apply.\n\n## Latency\n\nCross-region calls add about forty "
        "milliseconds of latency, so chatty services are placed in the same region as the "
        "database they query most.\n"
    ),
}
_WORD = re.compile(r"[A-Za-z]{4,}")


def _is_question(body: Mapping[str, Any]) -> bool:
    return "Write one question" in json.dumps(body)


def _chunk_of(body: Mapping[str, Any]) -> str:
    text = "\n".join(p.text for p in prompt_parts(body, "anthropic"))
    chunk = re.search(r"<chunk>\s*(.*?)\s*</chunk>", text, re.S)
    assert chunk is not None
    return chunk.group(1)


def _respond(body: Mapping[str, Any]) -> str:
    """A question made of the chunk's own words for question prompts; a context otherwise."""
    if not _is_question(body):
        return default_respond(body)
    words = _WORD.findall(_chunk_of(body))[2:9]
    return f"Question: What happens with {' '.join(words)}?"


def _question_requests(server: FakeLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.endpoint == "messages" and _is_question(r.body)]


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in _CORPUS.items():
        (folder / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXR_CHUNK_TOKENS", "64")  # two chunks a document, one per section
    return folder


@pytest.fixture
def llm(
    fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> FakeLLMServer:
    server = fake_llm_factory(respond=_respond)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    return server


def _trial(*args: str) -> Result:
    base = ["trial", "corpus", "--sample", "all", "--bootstrap", "200", "--seed", "3"]
    return CliRunner().invoke(main, [*base, *args])


def test_trial_writes_its_questions_and_reruns_from_them_without_asking_again(
    corpus: Path, llm: FakeLLMServer
) -> None:
    first = _trial("--num-questions", "5", "--out", "out", "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    asked = _question_requests(llm)
    assert len(asked) == 5  # one request per question
    paid = [r for r in llm.requests if r.endpoint == "messages" and not _is_question(r.body)]
    assert paid  # the llm row's contexts

    # The question file: each answer is a span of its document, its text as it stands there.
    lines = (Path("out") / "questions.jsonl").read_text().splitlines()
    assert len(lines) == 5
    for line in lines:
        question = json.loads(line)
        assert question["question"].startswith("What happens with")  # the label is dropped
        assert question["writer"] == "anthropic/claude-haiku-4-5"
        assert question["prompt"].startswith("question/")
        (answer,) = question["answers"]
        text = (corpus / Path(answer["source"]).name).read_text()
        assert text[answer["start"] : answer["end"]] == answer["text"]

    assert [r["name"] for r in report["rows"]] == ["none", "outline", "llm"]
    assert all(r["available"] for r in report["rows"])
    assert report["questions"]["written_now"] is True
    assert report["questions"]["run"]["requests"] == 5
    assert report["questions"]["run"]["dollars"] > 0
    (cost,) = report["costs"]
    assert cost["rows"] == ["llm"] and cost["model"] == "claude-haiku-4-5"
    assert cost["paid_on_sample"]["requests"] == len(paid)
    assert cost["paid_on_sample"]["dollars"] > 0
    assert 0 < cost["estimate_corpus"]["batch"] < cost["estimate_corpus"]["standard"]
    assert cost["estimate_corpus"]["documents"] == 3
    assert any("favours its contexts" in note for note in report["notes"])
    assert report["verdict"]
    metrics = {c["metric"] for c in report["comparisons"]}
    assert metrics == {"pass@5", "pass@10", "pass@20", "mrr@10"}
    assert {c["row"] for c in report["comparisons"]} == {"none", "llm"}
    written = json.loads((Path("out") / "trial.json").read_text())
    assert written["rows"] == report["rows"]

    # Again, from the file: no question is asked, no context is paid for.
    before = len(llm.requests)
    again = _trial("--questions", "out/questions.jsonl", "--out", "out2", "--json")
    assert again.exit_code == 0, again.output
    assert len(llm.requests) == before
    rerun = json.loads(again.stdout)
    assert rerun["questions"]["written_now"] is False
    assert rerun["questions"]["run"] is None
    assert rerun["questions"]["writers"] == ["anthropic/claude-haiku-4-5"]
    ledger = rerun["costs"][0]["paid_on_sample"]
    assert ledger["requests"] == 0 and ledger["dollars"] == 0
    assert ledger["response_cache_hits"] == cost["paid_on_sample"]["contexts"]
    assert rerun["costs"][0]["estimate_corpus"] == cost["estimate_corpus"]
    assert [r["per_question"] for r in rerun["rows"]] == [r["per_question"] for r in report["rows"]]
    assert rerun["comparisons"] == report["comparisons"]
    assert not (Path("out2") / "questions.jsonl").exists()


def test_trial_prints_its_table_and_draws_its_picture(corpus: Path, llm: FakeLLMServer) -> None:
    pytest.importorskip("matplotlib")
    result = _trial(
        "--num-questions", "4", "--out", "out",
        "--variant", "llm-rrf:fusion=rrf", "--variant", "bm25:context=none,mode=bm25",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ctxr trial: 4 questions on 3 of 3 documents" in result.stdout
    for row in ("none", "outline", "llm", "llm-rrf", "bm25"):
        assert row in result.stdout
    assert "LLM contexts: what they cost" in result.stdout
    assert "verdict:" in result.stdout
    assert (Path("out") / "trial.png").read_bytes().startswith(b"\x89PNG")
    report = json.loads((Path("out") / "trial.json").read_text())
    # Rows that index alike share one index: llm-rrf searches the llm row's.
    rows = {r["name"]: r for r in report["rows"]}
    assert rows["llm-rrf"]["index"]["index_dir"] == rows["llm"]["index"]["index_dir"]
    assert rows["bm25"]["index"]["index_dir"] == rows["none"]["index"]["index_dir"]
    assert report["costs"][0]["rows"] == ["llm", "llm-rrf"]


def test_trial_without_matplotlib_says_so_and_skips_the_picture(
    corpus: Path, llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    result = _trial("--num-questions", "3", "--out", "out")
    assert result.exit_code == 0, result.output
    assert "no picture: matplotlib is not installed" in result.stderr
    assert not (Path("out") / "trial.png").exists()
    assert (Path("out") / "trial.json").exists()


def test_another_model_writes_the_questions(corpus: Path, llm: FakeLLMServer) -> None:
    # Ten asked for, six chunks to ask about: six written, and the report says why.
    result = _trial("--num-questions", "10", "--out", "out", "--question-model", "gpt-4o-mini",
                    "--json", "--no-plot")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["questions"]["writers"] == ["openai/gpt-4o-mini"]
    assert not _question_requests(llm)  # none went to the context model
    assert sum(r.endpoint == "chat.completions" for r in llm.requests) == 6
    assert report["questions"]["count"] == 6
    assert any("6 of the 10 questions asked for: the sample has 6 chunks" in n
               for n in report["notes"])  # fmt: skip
    assert not any("favours its contexts" in note for note in report["notes"])


def test_an_existing_question_file_is_never_overwritten(corpus: Path, llm: FakeLLMServer) -> None:
    Path("out").mkdir()
    (Path("out") / "questions.jsonl").write_text("{}\n")
    result = _trial("--out", "out")
    assert result.exit_code == 2
    assert "--questions out/questions.jsonl" in result.stderr
    assert not llm.requests


def test_without_a_provider_user_questions_still_compare_none_and_outline(
    corpus: Path, tmp_path: Path
) -> None:
    questions = tmp_path / "mine.jsonl"
    rows = [
        {"question": "how long are snapshots kept", "answers": [
            {"source": "corpus/backup.md", "text": "kept for fourteen days"}]},
        {"question": "when is a refund granted", "answers": [
            {"source": "corpus/billing.md", "text": "A refund is granted within thirty days"}]},
    ]  # fmt: skip
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = _trial("--questions", str(questions), "--out", "out", "--json", "--no-plot")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows_by_name = {r["name"]: r for r in report["rows"]}
    assert rows_by_name["llm"]["available"] is False
    assert "needs a provider" in rows_by_name["llm"]["note"]
    assert rows_by_name["none"]["available"] and rows_by_name["outline"]["available"]
    assert report["costs"] == []
    assert report["verdict"].startswith("LLM contexts were not tried")
    assert report["questions"]["writers"] == ["a person"]


def test_without_a_provider_or_questions_the_trial_says_what_to_set(corpus: Path) -> None:
    result = _trial("--out", "out")
    assert result.exit_code == 2
    assert "writing questions needs an LLM provider" in result.stderr
    assert "--questions FILE" in result.stderr


def test_bad_variants_and_baselines_are_named_before_any_work(
    corpus: Path, llm: FakeLLMServer
) -> None:
    bad = _trial("--variant", "x:colour=red")
    assert bad.exit_code == 2 and "unknown key 'colour'" in bad.stderr
    missing = _trial("--baseline", "nothing")
    assert missing.exit_code == 2 and "--baseline 'nothing'" in missing.stderr
    assert not llm.requests


# --- parts ------------------------------------------------------------------------------------


def _doc(source: str, text: str) -> Document:
    return Document(source, source, text, "markdown", source, text_hash(text))


def _chunk(document: Document, heading: str) -> Chunk:
    """The section under `heading`, to the next blank-line-separated heading or the end."""
    start = document.text.index(heading)
    end = document.text.find("\n\n## ", start + 1)
    end = len(document.text) if end < 0 else end
    text = document.text[start:end]
    return Chunk(f"{document.doc_id}#{start}", document.doc_id, 0, text, start, end, 40)


def test_samples_are_drawn_by_seed_and_keep_the_corpus_order() -> None:
    docs = [_doc(f"d{i:02d}.md", f"text {i}") for i in range(20)]
    first = sample_documents(docs, 5, seed=1)
    backwards = sample_documents(list(reversed(docs)), 5, seed=1)
    assert {d.source for d in backwards} == {d.source for d in first}  # the walk's order aside
    assert [d.source for d in first] == sorted(d.source for d in first)
    assert [d.source for d in backwards] == sorted((d.source for d in first), reverse=True)
    assert first != sample_documents(docs, 5, seed=2)
    assert sample_documents(docs, None, seed=1) == docs


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("What is the refund window?", "What is the refund window?"),
        ('Question: "How are snapshots pruned?"\n\nIt asks...', "How are snapshots pruned?"),
        ("**Q1:** Which ports are open?", "Which ports are open?"),
        ("", None),
        ("<chunk>copied</chunk>", None),
        ("x" * 500, None),
    ],
)
def test_parse_question(answer: str, expected: str | None) -> None:
    assert parse_question(answer) == expected


def test_the_question_model_brings_its_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    settings = load_settings().llm
    assert choose_writer(settings).label == "anthropic/claude-haiku-4-5"
    assert choose_writer(settings, "gpt-4o-mini").label == "openai/gpt-4o-mini"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(ConfigError, match="needs an LLM provider"):
        choose_writer(load_settings().llm)


def test_run_trial_checks_its_options_first(tmp_path: Path) -> None:
    docs = [_doc("a.md", "alpha " * 50)]
    with pytest.raises(ConfigError, match="--metric 'ndcg@10'"):
        run_trial(docs, TrialOptions(metric="ndcg@10", out_dir=tmp_path))
    with pytest.raises(ConfigError, match="--baseline 'outline'"):
        run_trial(docs, TrialOptions(without=("outline",), out_dir=tmp_path))
    with pytest.raises(ConfigError, match="no documents"):
        run_trial([], TrialOptions(out_dir=tmp_path))


def test_question_writing_retries_and_leaves_out_what_is_no_question(
    fake_llm_factory: Callable[..., FakeLLMServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    def respond(body: Mapping[str, Any]) -> str:
        return (
            "<chunk>Refunds</chunk>" if "refund is granted" in _chunk_of(body) else _respond(body)
        )

    server = fake_llm_factory(respond=respond)
    for name, value in server.env().items():
        monkeypatch.setenv(name, value)
    billing = _doc("billing.md", _CORPUS["billing.md"])
    backup = _doc("backup.md", _CORPUS["backup.md"])
    sections = ((billing, "## Invoices"), (billing, "## Refunds"), (backup, "## Restore"))
    picked = [(d, _chunk(d, heading)) for d, heading in sections]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the backoff, without the wait
        waits.append(seconds)

    server.inject("529")  # the first request is refused as overloaded, then answered
    run = write_questions(picked, Writer("anthropic", "claude-haiku-4-5"), load_settings().llm,
                          "cl100k_base", NullProgress(), sleep=sleep)  # fmt: skip
    assert run.retries == 1 and len(waits) == 1
    assert [q.answers[0].start for q in run.questions] == [picked[0][1].start, picked[2][1].start]
    assert [q.id for q in run.questions] == ["q1", "q3"]  # ids follow the picks
    assert len(run.rejected) == 1 and "billing.md" in run.rejected[0]
    assert run.requests == 3 and run.dollars is not None and run.dollars > 0
    assert run.usage.output_tokens > 0


def test_an_unpriced_model_on_a_local_server_costs_nothing_paid_or_estimated(
    corpus: Path, llm: FakeLLMServer
) -> None:
    # The fake listens on loopback: a server of the user's own, which the ledger and the
    # estimate both price at $0 for a model the price table does not know.
    result = _trial("--num-questions", "3", "--out", "out", "--json", "--no-plot",
                    "--without", "outline", "--baseline", "none",
                    "--variant", "llm:model=claude-unheard-of")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (cost,) = report["costs"]
    assert cost["model"] == "claude-unheard-of"
    assert cost["paid_on_sample"]["requests"] > 0 and cost["paid_on_sample"]["dollars"] == 0
    assert cost["estimate_corpus"]["standard"] == 0 and cost["estimate_corpus"]["requests"] > 0
    assert {r["name"] for r in report["rows"] if r["available"]} == {"none", "llm"}
