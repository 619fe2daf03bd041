"""ctxr: a contextual-retrieval indexer.

The Python API, a thin layer over the same code the CLI runs::

    import ctxr
    report = ctxr.build(["docs/"], index_dir=".ctxr")
    for hit in ctxr.search("how do I restore a backup?", index_dir=".ctxr", k=5):
        print(hit.rank, hit.source, hit.heading_path, hit.score)

    with ctxr.Client(index_dir=".ctxr") as client:  # open once, query many times
        hits = client.search("THUMB_CACHE_MAX", ctxr.SearchOptions(k=5, mode="bm25"))
    with ctxr.Client(base_url="http://127.0.0.1:8000") as client:  # a running `ctxr serve`
        hits = client.search("THUMB_CACHE_MAX", k=5, mode="bm25")

    cost = ctxr.estimate(["docs/"], models=["claude-haiku-4-5", "gpt-4o-mini"])  # no model called
    found = ctxr.trial(["docs/"], sample=30, num_questions=40)  # do LLM contexts pay here?

Every function is safe to call any number of times. (Up to 0.1 the indexing function was
`ctxr.index`; that name is the `ctxr.index` subpackage, which shadowed the function after its
first call, so it is now `ctxr.build`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the heavy parts load on first use, so `import ctxr` stays cheap
    from ctxr.client import Client
    from ctxr.eval.trial_result import TrialResult
    from ctxr.pipeline.estimate_report import Estimate
    from ctxr.pipeline.report import IndexReport
    from ctxr.retrieve.searcher import Searcher, SearchOptions
    from ctxr.retrieve.service import SearchService
    from ctxr.types import Hit

__all__ = [
    "Client",
    "Hit",
    "SearchOptions",
    "Searcher",
    "build",
    "estimate",
    "open_index",
    "search",
    "trial",
]
_LAZY = {
    "Client": "ctxr.client",
    "Hit": "ctxr.types",
    "SearchOptions": "ctxr.retrieve.searcher",
    "Searcher": "ctxr.retrieve.searcher",
}


def __getattr__(name: str) -> Any:
    """`ctxr.Client`, `ctxr.SearchOptions` and the rest, imported when first named."""
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ctxr' has no attribute {name!r}")


__version__ = "0.1.0"


def build(
    paths: Sequence[str | Path],
    index_dir: str | Path | None = None,
    *,
    rebuild: bool = False,
    **settings: Any,
) -> IndexReport:
    """Index files and directories; returns the run's report. Settings as in `ctxr.config`."""
    from ctxr.config import load_settings
    from ctxr.pipeline.build import build_index

    return build_index(paths, load_settings(index_dir=index_dir, **settings), rebuild=rebuild)


def open_index(index_dir: str | Path | None = None, **settings: Any) -> SearchService:
    """Open an index for searching; use it as a context manager or call `close()`. Services
    of one process on one index share its open shard (`ctxr.Client` is the same, and also
    reaches a served index)."""
    from ctxr.config import load_settings
    from ctxr.retrieve.service import SearchService

    return SearchService(load_settings(index_dir=index_dir, **settings))


def search(
    query: str,
    index_dir: str | Path | None = None,
    *,
    k: int = 10,
    mode: str = "hybrid",
    fusion: str | None = None,
    filters: Mapping[str, Any] | None = None,
    merge: bool = False,
    expand: bool = False,
    **settings: Any,
) -> list[Hit]:
    """One search against an index (opens and closes it; use `Client` for many).

    `filters` restricts both retrievers to matching chunks, e.g. `{"source": "docs/",
    "kind": ["markdown", "text"]}` (see `ctxr.index.filters`); `merge` joins adjacent hits
    of one document into one passage; `expand` returns each hit's parent section (an index
    built with `chunking="parent"`). The options are `SearchOptions`' fields."""
    from ctxr.client import Client
    from ctxr.config import load_settings
    from ctxr.retrieve.searcher import SearchOptions

    options = SearchOptions.given(
        k=k, mode=mode, fusion=fusion, filters=filters, merge=merge, expand=expand
    )
    with Client(settings=load_settings(index_dir=index_dir, **settings)) as client:
        return client.search(query, options)


def estimate(
    paths: Sequence[str | Path],
    index_dir: str | Path | None = None,
    *,
    models: Sequence[str] | None = None,
    output_tokens: int | None = None,
    exact: bool = False,
    **settings: Any,
) -> Estimate:
    """What indexing `paths` with LLM contexts would cost, per model; calls no model and
    writes nothing. `.to_json()` gives the same report as `ctxr estimate --json`."""
    from ctxr.config import load_settings
    from ctxr.pipeline.estimate import estimate_paths

    return estimate_paths(
        paths,
        load_settings(index_dir=index_dir, **settings),
        models=models,
        output_tokens=output_tokens,
        exact=exact,
    )


def trial(
    paths: Sequence[str | Path],
    *,
    questions: str | Path | None = None,
    sample: int | None = 50,
    num_questions: int = 50,
    seed: int = 0,
    question_model: str | None = None,
    variants: Sequence[str] = (),
    without: Sequence[str] = (),
    baseline: str = "outline",
    metric: str | None = None,
    ks: Sequence[int] = (5, 10, 20),
    resamples: int = 2000,
    output_tokens: int | None = None,
    out_dir: str | Path = "ctxr-trial",
    **settings: Any,
) -> TrialResult:
    """Whether LLM contexts pay on a sample of `paths`: `ctxr trial` (see its reference for
    each argument). Writes questions to `out_dir/questions.jsonl` unless `questions` names a
    file to re-use; indexes go to temporary folders. `.to_json()` gives what `ctxr trial
    --json` prints; `ctxr.eval.trial_report.plot_trial` draws it."""
    from ctxr.eval.trial import TrialOptions, trial_paths

    options = TrialOptions(
        sample=sample,
        num_questions=num_questions,
        seed=seed,
        questions_file=None if questions is None else Path(questions),
        out_dir=Path(out_dir),
        question_model=question_model,
        variants=tuple(variants),
        without=tuple(without),
        baseline=baseline,
        metric=metric,
        ks=tuple(ks),
        resamples=resamples,
        output_tokens=output_tokens,
    )
    return trial_paths(paths, options, settings=settings)
