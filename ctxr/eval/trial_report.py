"""Showing a trial: rich tables, the plain verdict, and a picture of the scores with their
intervals (matplotlib, the `plot` extra; `plot_available` says whether it can be drawn).

Functions here format or draw; the numbers all come from `ctxr.eval.trial`. Scores are shown
in percent (Pass@k as Anthropic's guide shows it; MRR@10 times 100), intervals in brackets.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ctxr.eval.stats import Interval
from ctxr.eval.trial_result import (
    Comparison,
    ContextCost,
    TrialResult,
    TrialRow,
    money,
    p_text,
)

NO_PLOT = "no picture: matplotlib is not installed (pip install 'ctxr[plot]')"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def _interval(score: Interval | None) -> str:
    if score is None:
        return "-"
    return f"{_pct(score.mean)} [{_pct(score.low)}-{_pct(score.high)}]"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _settings(row: TrialRow) -> str:
    v = row.variant
    parts = [f"context {v.context}", v.mode]
    if v.fusion:
        parts.append(f"fusion {v.fusion}")
    if v.candidates:
        parts.append(f"cand {v.candidates}")
    parts += [f"{key} {value}" for key, value in v.index.items()]
    if row.llm:
        parts.append(row.llm)
    return ", ".join(parts)


def _difference(comparison: Comparison | None) -> str:
    if comparison is None:
        return ""
    t = comparison.test
    mark = " *" if t.significant else ""
    return (
        f"{100 * t.difference:+.1f} [{100 * t.low:+.1f} to {100 * t.high:+.1f}] "
        f"p {p_text(t.p_value)}{mark}"
    )


def table(result: TrialResult) -> Table:
    title = (
        f"ctxr trial: {result.questions['count']} questions on {result.sample['documents']} of "
        f"{result.corpus['documents']} documents ({result.bootstrap['level']:.0%} bootstrap "
        "intervals)"
    )
    t = Table(title=title, show_lines=True)
    t.add_column("row", no_wrap=True)
    for name in result.metrics:
        t.add_column(name, justify="right")
    t.add_column(f"{result.metric} vs {result.baseline}", justify="right")
    t.add_column("settings")
    headline = {c.row: c for c in result.headline()}
    for row in result.rows:
        if not row.available:
            t.add_row(row.name, *(["-"] * len(result.metrics)), "", row.note)
            continue
        cells = [_interval(row.scores.get(name)) for name in result.metrics]
        t.add_row(row.name, *cells, _difference(headline.get(row.name)), _settings(row))
    return t


def cost_table(costs: list[ContextCost]) -> Table:
    t = Table(title="LLM contexts: what they cost")
    t.add_column("rows")
    t.add_column("model")
    t.add_column("paid on the sample", justify="right")
    t.add_column("sample, estimated", justify="right")
    t.add_column("whole corpus, estimated", justify="right")
    t.add_column("batch", justify="right")
    for cost in costs:
        paid = "nothing sent"
        if cost.paid is not None:
            p = cost.paid
            paid = f"{money(p['dollars'])} ({_plural(p['requests'], 'request')}"
            if p["response_cache_hits"]:
                paid += f", {p['response_cache_hits']} answers from cache"
            paid += ")"
        corpus, sample = cost.corpus, cost.sample
        whole = batch = sampled = "n/a (no price)"
        if corpus is not None and sample is not None:
            size = f"{corpus['documents']:,} docs, {corpus['chunks']:,} chunks"
            whole, batch = f"{money(corpus['standard'])} ({size})", money(corpus["batch"])
            sampled = money(sample["standard"])
        t.add_row(", ".join(cost.rows), f"{cost.provider}/{cost.model}", paid, sampled, whole,
                  batch)  # fmt: skip
    return t


def print_report(result: TrialResult, console: Console) -> None:
    console.print(table(result))
    for comparison in result.headline():
        console.print(comparison.sentence(), highlight=False)
    if result.costs:
        console.print(cost_table(result.costs))
        assumed = {c.output_tokens for c in result.costs}
        measured = [c for c in result.costs if c.measured_output_tokens is not None]
        line = f"estimates assume {', '.join(map(str, sorted(assumed)))} output tokens a context"
        if measured:
            line += "; this run's answers averaged " + ", ".join(
                f"{c.measured_output_tokens:g} ({c.model})" for c in measured
            )
        console.print(line + " (--output-tokens sets the assumption)", highlight=False)
    q = result.questions
    origin = "written to" if q["written_now"] else "read from"
    line = f"questions: {q['count']} {origin} {q['file']} (by {', '.join(q['writers'])})"
    if q["run"] is not None:
        run = q["run"]
        line += f", {_plural(run['requests'], 'request')}, {money(run['dollars'])}"
        if run["rejected"] or run["failures"]:
            line += (
                f"; {len(run['rejected'])} answers were no question, {len(run['failures'])} failed"
            )
    console.print(line, highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(f"[bold]verdict:[/] {result.verdict}", highlight=False)


def plot_available() -> bool:
    """Whether matplotlib (the `plot` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plot_trial(result: TrialResult, path: Path) -> Path:
    """Scores with their intervals per row (left) and each row's difference from the baseline
    on the headline metric with its interval (right), as PNG (or any type matplotlib writes).
    Check `plot_available` first: this imports matplotlib."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed; must precede pyplot's import
    import matplotlib.pyplot as plt

    rows = [r for r in result.rows if r.available]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    width = 0.8 / max(1, len(rows))
    for i, row in enumerate(rows):
        xs, ys, lows, highs = [], [], [], []
        for m, name in enumerate(result.metrics):
            score = row.scores[name]
            xs.append(m - 0.4 + width * (i + 0.5))
            ys.append(100 * score.mean)
            lows.append(100 * (score.mean - score.low))
            highs.append(100 * (score.high - score.mean))
        left.errorbar(xs, ys, yerr=[lows, highs], fmt="o", capsize=3, label=row.name)
    left.set_xticks(range(len(result.metrics)), result.metrics)
    left.set_ylim(0, 103)  # room for the markers of a perfect score
    left.set_ylabel("score (%)")
    left.grid(True, axis="y", alpha=0.3)
    left.legend(loc="lower right", fontsize="small")
    left.set_title(f"{result.questions['count']} questions, {result.sample['documents']} documents")
    comparisons = result.headline()
    for y, c in enumerate(comparisons):
        t = c.test
        right.errorbar(
            [100 * t.difference], [y],
            xerr=[[100 * (t.difference - t.low)], [100 * (t.high - t.difference)]],
            fmt="o", capsize=3, color="tab:green" if t.significant else "tab:gray",
        )  # fmt: skip
    right.axvline(0, color="black", linewidth=0.8)
    right.set_yticks(range(len(comparisons)), [c.row for c in comparisons])
    right.set_ylim(-0.5, max(0.5, len(comparisons) - 0.5))
    right.set_xlabel(f"{result.metric} minus {result.baseline} (points)")
    right.grid(True, axis="x", alpha=0.3)
    right.set_title("against the baseline (green: beyond the noise)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
