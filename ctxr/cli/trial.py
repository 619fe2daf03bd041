"""`ctxr trial`: the click command; parsing and printing only, the work is in `ctxr.eval.trial`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ctxr.cli.eval import parse_ks


def _sample(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        raise click.BadParameter(f"expected a number of documents or 'all', got {text!r}") from None
    if value < 1:
        raise click.BadParameter("draw at least 1 document, or 'all'")
    return value


@click.command("trial")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--questions",
    "questions_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="re-use these questions (JSONL, as a trial writes them); none is written",
)
@click.option(
    "--sample",
    default="50",
    metavar="N|all",
    show_default=True,
    help="documents drawn from PATHS to index and ask about, or 'all'",
)
@click.option(
    "--num-questions",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="questions to write, one per chunk drawn from the sample",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="draws the documents, the chunks and the bootstrap",
)
@click.option(
    "--question-model",
    default=None,
    help="the model that writes questions [the context model]; another model's "
    "questions do not favour its own contexts",
)
@click.option(
    "--variant",
    "variants",
    multiple=True,
    metavar="NAME:KEY=VALUE,...",
    help="a row besides none, outline and llm (repeatable); KEY context, chunk_tokens, "
    "chunking, model, provider, mode, fusion, candidates",
)
@click.option(
    "--without",
    multiple=True,
    type=click.Choice(["none", "outline", "llm"]),
    help="leave out a default row (repeatable)",
)
@click.option(
    "--baseline",
    default="outline",
    show_default=True,
    help="the row every other row is compared with",
)
@click.option("--metric", default=None, metavar="NAME", help="the headline metric [pass@10]")
@click.option("--k", "ks", default="5,10,20", show_default=True, help="k values of Pass@k")
@click.option(
    "--bootstrap",
    "resamples",
    type=click.IntRange(min=100),
    default=2000,
    show_default=True,
    help="bootstrap resamples (and permutations)",
)
@click.option(
    "--output-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="output tokens a context, as the cost estimates assume [100]",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ctxr-trial"),
    show_default=True,
    help="where questions.jsonl, trial.json and trial.png go",
)
@click.option("--no-plot", is_flag=True, help="do not draw trial.png")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def trial_command(
    paths: tuple[Path, ...],
    questions_file: Path | None,
    sample: str,
    num_questions: int,
    seed: int,
    question_model: str | None,
    variants: tuple[str, ...],
    without: tuple[str, ...],
    baseline: str,
    metric: str | None,
    ks: str,
    resamples: int,
    output_tokens: int | None,
    out_dir: Path,
    no_plot: bool,
    as_json: bool,
) -> None:
    """Measure whether LLM contexts pay on a sample of PATHS, and what they would cost.

    Writes questions about sampled chunks (or reads --questions), indexes the sample with no,
    outline and LLM contexts (and each --variant), and reports Pass@k and MRR with intervals,
    each row against the baseline, and the cost on the sample and the whole corpus."""
    from rich.console import Console

    from ctxr.cli.progress import RichProgress
    from ctxr.eval.trial import PLOT_FILE, REPORT_FILE, TrialOptions, trial_paths
    from ctxr.eval.trial_report import NO_PLOT, plot_available, plot_trial, print_report
    from ctxr.progress import NullProgress

    err = Console(stderr=True)
    options = TrialOptions(
        sample=_sample(sample), num_questions=num_questions, seed=seed,
        questions_file=questions_file, out_dir=out_dir, question_model=question_model,
        variants=variants, without=without, baseline=baseline, metric=metric,
        ks=tuple(parse_ks(ks)), resamples=resamples, output_tokens=output_tokens,
    )  # fmt: skip
    if as_json:
        result = trial_paths(paths, options, progress=NullProgress())
    else:
        with RichProgress(err) as bar:
            result = trial_paths(paths, options, progress=bar)
    out_dir.mkdir(parents=True, exist_ok=True)
    body = result.to_json()
    (out_dir / REPORT_FILE).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    written = [out_dir / REPORT_FILE]
    if no_plot:
        pass
    elif plot_available():
        written.append(plot_trial(result, out_dir / PLOT_FILE))
    else:
        err.print(f"note: {NO_PLOT}", highlight=False)
    if as_json:
        click.echo(json.dumps(body, indent=2))
    else:
        # A pipe gets rich's 80 columns by default: too narrow for the intervals.
        print_report(result, Console(width=None if sys.stdout.isatty() else 200))
    err.print(f"written: {', '.join(map(str, written))}", highlight=False)
