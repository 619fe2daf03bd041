"""`ctxr trial`: will LLM contexts pay on this corpus? Measured on a sample of it.

A trial draws documents from the user's corpus (seeded), writes a small judged set from them
(one question per sampled chunk, by the configured LLM or `--question-model`; or reads one,
`--questions FILE`), indexes the sample once per configuration (no contexts, outline contexts,
LLM contexts, and any `--variant`) into temporary indexes, asks every question of every row,
and reports Pass@k and MRR with bootstrap intervals, each row against a baseline question by
question (paired bootstrap and a sign-flip permutation test, `ctxr.eval.stats`), what the LLM
contexts cost on the sample (the run's ledger) and what they would cost on the whole corpus
(the estimate: `ctxr.pipeline.estimate`, standard and batch).

It is `ctxr eval` on the user's own documents: indexes are built by `build_for_eval`, rows are
searched and scored by `search_and_score`, and a hit answers a question when it overlaps one of
its answer spans as `ctxr.eval.judging.span_ranks` says, the rule of `ctxr eval --chunks ours`.
So `ctxr trial` given a judged set's own queries reproduces `ctxr eval`'s numbers.

Nothing is paid twice: written questions are saved before anything is indexed and read back by
`--questions`; contexts go to the response cache under the evaluation cache
(`ctxr.eval.runner.eval_cache_dir`), which a re-run reads.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxr.config import Settings, load_settings
from ctxr.enrich.situate.contexts import resolve_context
from ctxr.errors import ConfigError
from ctxr.eval.judging import JudgedSpan, span_ranks
from ctxr.eval.question_writer import QuestionRun, Writer, choose_writer, pick_chunks
from ctxr.eval.question_writer import write_questions as ask_questions
from ctxr.eval.questions import Question, load_questions, save_questions
from ctxr.eval.runner import build_for_eval, eval_cache_dir, index_info, search_and_score
from ctxr.eval.stats import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    bootstrap_interval,
    paired_test,
    questions_needed,
)
from ctxr.eval.trial_result import (
    Comparison,
    ContextCost,
    TrialResult,
    TrialRow,
    shown_metrics,
    verdict,
)
from ctxr.eval.variants import Variant, trial_variants
from ctxr.index import components
from ctxr.index.embed.base import Embedder
from ctxr.pipeline.chunking import default_chunker
from ctxr.pipeline.collect import LoadTally, load_paths
from ctxr.pipeline.estimate import DEFAULT_OUTPUT_TOKENS, estimate_documents
from ctxr.pipeline.report import IndexReport
from ctxr.progress import NullProgress, Progress
from ctxr.retrieve.service import SearchService
from ctxr.types import Document, Hit

DEFAULT_SAMPLE = 50
DEFAULT_QUESTIONS = 50
DEFAULT_KS = (5, 10, 20)
QUESTIONS_FILE = "questions.jsonl"
REPORT_FILE = "trial.json"
PLOT_FILE = "trial.png"
FEW_QUESTIONS = 30

NOTE_SAME_MODEL = (
    "the questions were written by {writer}, the model that wrote the '{rows}' contexts: a "
    "model's questions tend to use its own words, which favours its contexts; --question-model "
    "picks another model to write them"
)
NOTE_SMALL_INDEX = (
    "scores are on a sample of {sample} of {corpus} documents: with fewer documents to confuse "
    "the right one with, they run higher than on the whole corpus, and differences shrink"
)
NOTE_FEW = (
    "{n} questions: intervals are wide; --num-questions (and --sample for more documents to "
    "write them from) narrows them"
)


@dataclass(frozen=True)
class TrialOptions:
    """What a trial measures; every field is a `ctxr trial` flag."""

    sample: int | None = DEFAULT_SAMPLE  # documents drawn from the corpus; None: all
    num_questions: int = DEFAULT_QUESTIONS
    seed: int = 0  # draws the documents, the chunks asked about, and the bootstrap
    questions_file: Path | None = None  # re-use these questions; none is written
    out_dir: Path = Path("ctxr-trial")  # where written questions go (and the CLI's report)
    question_model: str | None = None
    variants: tuple[str, ...] = ()  # `NAME:KEY=VALUE,...` rows besides none, outline, llm
    without: tuple[str, ...] = ()  # default rows left out
    baseline: str = "outline"
    metric: str | None = None  # the headline; default pass@10 (or the middle k)
    ks: tuple[int, ...] = DEFAULT_KS
    resamples: int = DEFAULT_RESAMPLES
    level: float = DEFAULT_LEVEL
    output_tokens: int | None = None  # the estimate's assumption per context


def headline_metric(ks: Sequence[int], metric: str | None) -> str:
    names = shown_metrics(ks)
    if metric is None:
        return "pass@10" if 10 in ks else f"pass@{sorted(ks)[len(ks) // 2]}"
    if metric not in names:
        raise ConfigError(f"--metric {metric!r}: use one of {', '.join(names)}")
    return metric


def sample_documents(corpus: Sequence[Document], size: int | None, seed: int) -> list[Document]:
    """`size` documents drawn without replacement (seeded), in the corpus's order; all for
    None. The draw is from the documents sorted by source, so it does not depend on the order
    they came in; indexing keeps that order, as `ctxr index` would."""
    if size is None or size >= len(corpus):
        return list(corpus)
    ordered = sorted(corpus, key=lambda d: d.source)
    chosen = {d.source for d in random.Random(seed).sample(ordered, size)}
    return [d for d in corpus if d.source in chosen]


def trial_paths(
    paths: Sequence[str | Path],
    options: TrialOptions,
    *,
    settings: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> TrialResult:
    """A trial of the documents under `paths`, loaded as `ctxr index` loads them."""
    base = load_settings(**(settings or {}))
    tally = LoadTally()
    corpus = list(
        load_paths(
            paths, base.corpus.max_file_bytes, tally, progress,
            include=base.corpus.include, follow_links=base.corpus.follow_links,
        )
    )  # fmt: skip
    info = {
        "paths": [str(p) for p in paths],
        "files_seen": tally.files_seen,
        "skipped": len(tally.skipped),
        "failed": [{"path": path, "reason": reason} for path, reason in tally.failed],
    }
    return run_trial(corpus, options, settings=settings, progress=progress, corpus_info=info)


def run_trial(
    corpus: Sequence[Document],
    options: TrialOptions,
    *,
    settings: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    corpus_info: Mapping[str, Any] | None = None,
) -> TrialResult:
    """A trial of documents already loaded; see the module docstring. `settings` are flat
    setting names over the environment, as `load_settings` takes them; each row adds its own."""
    progress = progress or NullProgress()
    overrides = dict(settings or {})
    base = load_settings(**overrides)
    ks = sorted(set(options.ks))
    if not ks or ks[0] < 1:
        raise ConfigError("--k: k values must be whole numbers of at least 1, e.g. 5,10,20")
    metric = headline_metric(ks, options.metric)
    variants = trial_variants(options.variants, options.without)
    names = [v.name for v in variants]
    if options.baseline not in names:
        raise ConfigError(f"--baseline {options.baseline!r}: use one of {', '.join(names)}")
    if not corpus:
        raise ConfigError("no documents to try: the paths hold no file ctxr can index")
    if options.sample is not None and options.sample < 1:
        raise ConfigError("--sample must be at least 1 (or 'all')")

    sample = sample_documents(corpus, options.sample, options.seed)
    written: QuestionRun | None = None
    moved = 0
    if options.questions_file is not None:
        loaded = load_questions(options.questions_file, corpus)
        questions, moved, file = loaded.questions, loaded.moved, options.questions_file
        named = {a.source for q in questions for a in q.answers} | {d.source for d in sample}
        sample = [d for d in corpus if d.source in named]  # what the answers need, too
    else:
        file = options.out_dir / QUESTIONS_FILE
        if file.exists():
            raise ConfigError(
                f"{file} exists: re-use its questions with --questions {file} (nothing is asked "
                "again), or remove it (or choose another --out) to write new ones"
            )
        writer = choose_writer(base.llm, options.question_model)
        written = _write(sample, base, writer, options, progress)
        questions = written.questions
        save_questions(file, questions)  # before anything else can fail: they are paid for
    result = TrialResult(
        corpus={"documents": len(corpus), **(corpus_info or {})},
        sample={
            "documents": len(sample),
            "requested": options.sample,
            "seed": options.seed,
            "sources": [d.source for d in sample],
        },
        questions=_questions_info(questions, file, written),
        ks=ks,
        metrics=shown_metrics(ks),
        metric=metric,
        baseline=options.baseline,
        bootstrap={"resamples": options.resamples, "seed": options.seed, "level": options.level},
    )
    if written is not None and len(questions) < options.num_questions:
        result.notes.append(_shortfall(written, options.num_questions))
    if moved:
        result.notes.append(
            f"{moved} answers were no longer at their offsets (the documents changed) and were "
            "found by their text elsewhere in the same document"
        )
    _measure(result, variants, sample, corpus, questions, overrides, options, progress)
    _compare(result, options)
    _notes(result, questions, len(sample), len(corpus))
    result.verdict = verdict(result)
    return result


def _write(
    sample: Sequence[Document],
    base: Settings,
    writer: Writer,
    options: TrialOptions,
    progress: Progress,
) -> QuestionRun:
    """Questions about chunks of the sample, split as the trial's indexes split them."""
    embedder = components.make_embedder(base)  # the local one reads its tokenizer only
    try:
        split = default_chunker(base, embedder)
        pairs = [(d, split(d)) for d in sample]
    finally:
        getattr(embedder, "close", lambda: None)()
    picked = pick_chunks(pairs, options.num_questions, options.seed)
    if not picked:
        raise ConfigError(
            "the sample has no chunk long enough to ask about; draw more documents (--sample) "
            "or give questions of your own (--questions)"
        )
    progress.note(f"writing {len(picked)} questions with {writer.label}")
    run = ask_questions(picked, writer, base.llm, base.split.encoding, progress)
    if not run.questions:
        why = (run.failures or run.rejected or ["no answer"])[0]
        raise ConfigError(
            f"no question could be written by {writer.label} (first: {why}); check the "
            "provider's key and base URL, or --question-model"
        )
    return run


def _shortfall(run: QuestionRun, wanted: int) -> str:
    """Why fewer questions were written than asked for."""
    why = []
    asked = run.requests + len(run.failures)
    if asked < wanted:
        why.append(f"the sample has {asked} chunks long enough to ask about (--sample draws more)")
    if run.rejected:
        why.append(f"{len(run.rejected)} answers were no question")
    if run.failures:
        why.append(f"{len(run.failures)} requests failed (first: {run.failures[0]})")
    return f"{len(run.questions)} of the {wanted} questions asked for: {'; '.join(why)}"


def _questions_info(
    questions: Sequence[Question], file: Path, written: QuestionRun | None
) -> dict[str, Any]:
    writers = sorted({q.writer or "a person" for q in questions})
    return {
        "count": len(questions),
        "file": str(file),
        "written_now": written is not None,
        "writers": writers,
        "run": None if written is None else written.to_json(),
    }


@dataclass
class _Index:
    settings: Settings
    report: IndexReport
    embedder: Embedder
    service: SearchService
    llm: str | None


def _measure(
    result: TrialResult,
    variants: Sequence[Variant],
    sample: Sequence[Document],
    corpus: Sequence[Document],
    questions: Sequence[Question],
    overrides: Mapping[str, Any],
    options: TrialOptions,
    progress: Progress,
) -> None:
    """Build each distinct index, search and score every row, and price the LLM ones."""
    base = load_settings(**overrides)
    cache = eval_cache_dir(base)
    doc_ids = {d.source: d.doc_id for d in sample}
    wanted: dict[str, list[JudgedSpan]] = {
        q.id: [(f"{q.id}#{i}", doc_ids[a.source], a.start, a.end) for i, a in enumerate(q.answers)]
        for q in questions
    }
    qrels = {qid: {key: 1 for key, *_ in spans} for qid, spans in wanted.items()}
    pairs = [(q.id, q.text) for q in questions]

    def mapper(qid: str, hits: list[Hit]) -> dict[str, int]:
        return span_ranks(wanted[qid], hits)

    root = Path(tempfile.mkdtemp(prefix="ctxr-trial-"))
    indexes: dict[tuple[tuple[str, str], ...], _Index | str] = {}
    try:
        for variant in variants:
            row = TrialRow(variant.name, variant)
            result.rows.append(row)
            key = variant.index_key
            if key not in indexes:
                indexes[key] = _open_index(variant, sample, overrides, root, cache, progress,
                                           len(indexes))  # fmt: skip
            index = indexes[key]
            if isinstance(index, str):
                row.available, row.note = False, index
                continue
            row.index, row.llm = index_info(index.settings, index.report), index.llm
            progress.note(f"asking {len(pairs)} questions of {variant.name}")
            pool = variant.candidates or index.settings.search.candidates
            report, row.curve = search_and_score(
                index.service, pairs, mapper, qrels, result.ks, depth=max(result.ks),
                mode=variant.mode, candidates=pool, fusion=variant.fusion,
            )  # fmt: skip
            row.per_question = report.per_query
            for name in result.metrics:
                values = [report.per_query[qid][name] for qid, _ in pairs]
                row.scores[name] = bootstrap_interval(
                    values, resamples=options.resamples, seed=options.seed, level=options.level
                )
        _price(result, variants, indexes, sample, corpus, overrides, root, options)
    finally:
        for index in indexes.values():
            if not isinstance(index, str):
                index.service.close()
                getattr(index.embedder, "close", lambda: None)()
        shutil.rmtree(root, ignore_errors=True)


def _open_index(
    variant: Variant,
    sample: Sequence[Document],
    overrides: Mapping[str, Any],
    root: Path,
    cache: Path,
    progress: Progress,
    number: int,
) -> _Index | str:
    """The row's index, built; or why it cannot be (an LLM row with no provider)."""
    settings = load_settings(
        **{**overrides, **variant.settings(), "index_dir": root / f"index-{number}",
           "cache_dir": cache}
    )  # fmt: skip
    llm = None
    if variant.context == "llm":
        try:
            plan = resolve_context(settings.llm)
        except ConfigError as exc:
            return f"not run: {exc}"
        llm = f"{plan.provider}/{plan.model}"
    progress.note(f"indexing the sample for {variant.name} (context {variant.context})")
    report = build_for_eval(sample, settings, None, "split", progress)
    embedder = components.make_embedder(settings, cached=True)
    return _Index(settings, report, embedder, SearchService(settings, embedder=embedder), llm)


def _price(
    result: TrialResult,
    variants: Sequence[Variant],
    indexes: Mapping[tuple[tuple[str, str], ...], _Index | str],
    sample: Sequence[Document],
    corpus: Sequence[Document],
    overrides: Mapping[str, Any],
    root: Path,
    options: TrialOptions,
) -> None:
    """Each LLM index: its ledger, and the estimate for the sample and the whole corpus."""
    nowhere = root / "estimate"  # no manifest and no response cache: every chunk is priced
    for key, index in indexes.items():
        if isinstance(index, str) or index.llm is None:
            continue
        rows = [v.name for v in variants if v.index_key == key]
        variant = next(v for v in variants if v.index_key == key)
        settings = load_settings(
            **{**overrides, **variant.settings(), "index_dir": nowhere, "cache_dir": nowhere}
        )
        sample_cost = corpus_cost = None
        try:
            sample_cost = _estimate(sample, settings, options)
            corpus_cost = _estimate(corpus, settings, options)
        except ConfigError as exc:  # a model with no price: say so, keep the measurements
            result.notes.append(f"{', '.join(rows)}: the cost is not estimated: {exc}")
        ledger = index.report.contexts
        measured = None
        if ledger is not None and ledger.contexts:
            measured = round(ledger.output_tokens / ledger.contexts, 1)
        provider, _, model = index.llm.partition("/")
        result.costs.append(
            ContextCost(
                rows, provider, model,
                None if ledger is None else ledger.to_json(),
                sample_cost, corpus_cost,
                DEFAULT_OUTPUT_TOKENS if options.output_tokens is None else options.output_tokens,
                measured,
            )
        )  # fmt: skip
        if ledger is not None and (ledger.failures or ledger.flagged):
            result.notes.append(
                f"{', '.join(rows)}: {ledger.failures} context requests failed and "
                f"{ledger.flagged} answers were no context; those chunks have outline contexts "
                "(a re-run asks again for them only)"
            )
        for notice in index.report.notices:
            result.notes.append(f"{', '.join(rows)}: {notice}")


def _estimate(
    documents: Sequence[Document], settings: Settings, options: TrialOptions
) -> dict[str, Any]:
    """`ctxr estimate` of `documents` with the row's model, from scratch: what they cost."""
    found = estimate_documents(
        documents, settings, output_tokens=options.output_tokens, ignore_manifest=True
    )
    estimate = found.models[0]
    return {
        "documents": estimate.documents_to_send,
        "chunks": estimate.chunks,
        "requests": estimate.requests,
        "document_tokens": estimate.document_tokens,
        "standard": round(estimate.dollars(batch=False), 6),
        "batch": None if (b := estimate.batch()) is None else round(b, 6),
        "per_million_document_tokens": estimate.per_million_document_tokens(),
    }


def _compare(result: TrialResult, options: TrialOptions) -> None:
    """Every available row against the baseline, on every metric, question by question."""
    rows = {r.name: r for r in result.rows}
    baseline = rows[result.baseline]
    if not baseline.available:
        raise ConfigError(f"--baseline {result.baseline}: {baseline.note}")
    order = list(baseline.per_question)
    for row in result.rows:
        if row is baseline or not row.available:
            continue
        for name in result.metrics:
            a = [row.per_question[q][name] for q in order]
            b = [baseline.per_question[q][name] for q in order]
            test = paired_test(
                a, b, resamples=options.resamples, seed=options.seed, level=options.level
            )
            needed = questions_needed([x - y for x, y in zip(a, b, strict=True)],
                                      level=options.level)  # fmt: skip
            result.comparisons.append(Comparison(row.name, baseline.name, name, test, needed))


def _notes(result: TrialResult, questions: Sequence[Question], sample: int, corpus: int) -> None:
    writers = {q.writer for q in questions if q.writer}
    for writer in sorted(writers):
        rows = [r.name for r in result.rows if r.llm is not None and r.llm == writer]
        if rows:
            result.notes.append(NOTE_SAME_MODEL.format(writer=writer, rows="', '".join(rows)))
    if sample < corpus:
        result.notes.append(NOTE_SMALL_INDEX.format(sample=sample, corpus=corpus))
    if len(questions) < FEW_QUESTIONS:
        result.notes.append(NOTE_FEW.format(n=len(questions)))
    if any(r.available for r in result.rows) and len(result.comparisons) > len(result.metrics):
        result.notes.append(
            "each comparison is tested on its own: among many rows and metrics, one in twenty "
            "differences that are not real still looks larger than the noise"
        )
