"""What a trial found: its rows with their intervals, the paired comparisons, the cost of
LLM contexts, and the one plain sentence that answers the trial's question (`verdict`).

The model of `ctxr.eval.trial`'s result, apart from the running: `ctxr.eval.trial_report` shows
it, `to_json` is what `ctxr trial --json` prints and `trial.json` holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxr.eval.stats import Interval, PairedTest
from ctxr.eval.variants import Variant


def p_text(p_value: float) -> str:
    """The p-value for a sentence: "= 0.042", or "< 0.001" where three decimals read as 0."""
    return "< 0.001" if p_value < 0.001 else f"= {p_value:.3f}"


def shown_metrics(ks: Sequence[int]) -> list[str]:
    """The metrics a trial reports: Pass@k for each k, and MRR@10."""
    return [f"pass@{k}" for k in ks] + ["mrr@10"]


@dataclass
class TrialRow:
    name: str
    variant: Variant
    available: bool = True
    note: str = ""
    scores: dict[str, Interval] = field(default_factory=dict)
    per_question: dict[str, dict[str, float]] = field(default_factory=dict)
    curve: list[float] = field(default_factory=list)
    index: dict[str, Any] = field(default_factory=dict)
    llm: str | None = None  # "provider/model" that wrote this row's contexts

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "variant": self.variant.to_json(),
            "available": self.available,
            "note": self.note,
            "llm": self.llm,
            "scores": {k: v.to_json() for k, v in self.scores.items()},
            "curve": self.curve,
            "index": self.index,
            "per_question": self.per_question,
        }


@dataclass(frozen=True)
class Comparison:
    """One row against the baseline on one metric, over the same questions."""

    row: str
    baseline: str
    metric: str
    test: PairedTest
    needed: int | None  # questions that would show a difference this size (rough)

    def sentence(self) -> str:
        t = self.test

        def points(x: float) -> str:
            return f"{100 * x:+.1f}"

        size = (
            f"{points(t.difference)} points of {self.metric} ({t.level:.0%} interval "
            f"{points(t.low)} to {points(t.high)}; paired permutation p {p_text(t.p_value)}; "
            f"{t.questions} questions, {t.differing} scored differently)"
        )
        if t.significant:
            side = "better" if t.difference > 0 else "worse"
            return f"{self.row} vs {self.baseline}: {size}: larger than the noise, {side}."
        more = ""
        if self.needed is not None and self.needed > t.questions:
            more = f"; about {self.needed:,} questions could show a difference of this size"
        return f"{self.row} vs {self.baseline}: {size}: within the noise{more}."

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "baseline": self.baseline,
            "metric": self.metric,
            **self.test.to_json(),
            "questions_needed": self.needed,
            "sentence": self.sentence(),
        }


@dataclass
class ContextCost:
    """What one LLM-context index cost on the sample, and would cost on the whole corpus."""

    rows: list[str]
    provider: str
    model: str
    paid: dict[str, Any] | None  # the run's ledger summary (None: no LLM request was needed)
    sample: dict[str, Any] | None  # the estimate for the sample, as if nothing were cached
    corpus: dict[str, Any] | None  # the estimate for every document (None: no price)
    output_tokens: int  # per context, as the estimates assume
    measured_output_tokens: float | None  # per context, from the ledger (this run's answers)

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "provider": self.provider,
            "model": self.model,
            "paid_on_sample": self.paid,
            "estimate_sample": self.sample,
            "estimate_corpus": self.corpus,
            "output_tokens_assumed": self.output_tokens,
            "output_tokens_measured": self.measured_output_tokens,
        }


@dataclass
class TrialResult:
    corpus: dict[str, Any]
    sample: dict[str, Any]
    questions: dict[str, Any]
    ks: list[int]
    metrics: list[str]
    metric: str
    baseline: str
    bootstrap: dict[str, Any]
    rows: list[TrialRow] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    costs: list[ContextCost] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: str = ""

    def headline(self) -> list[Comparison]:
        """The comparisons on the headline metric, one per row."""
        return [c for c in self.comparisons if c.metric == self.metric]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "corpus": self.corpus,
            "sample": self.sample,
            "questions": self.questions,
            "ks": self.ks,
            "metrics": self.metrics,
            "metric": self.metric,
            "baseline": self.baseline,
            "bootstrap": self.bootstrap,
            "rows": [r.to_json() for r in self.rows],
            "comparisons": [c.to_json() for c in self.comparisons],
            "costs": [c.to_json() for c in self.costs],
            "notes": self.notes,
        }


def verdict(result: TrialResult) -> str:
    """One plain sentence on the question the trial asks, on the headline metric."""
    rows = {r.name: r for r in result.rows}
    llm_rows = [r for r in result.rows if r.variant.context == "llm"]
    if rows[result.baseline].variant.context == "llm":
        found = [c.sentence() for c in result.headline()]
        return " ".join(found) or "Only the baseline row was measured."
    if not any(r.available for r in llm_rows):
        why = llm_rows[0].note if llm_rows else "no row has context=llm"
        return f"LLM contexts were not tried ({why})."
    headline = {c.row: c for c in result.headline()}
    tested = [headline[r.name] for r in llm_rows if r.name in headline]
    better = [c for c in tested if c.test.significant and c.test.difference > 0]
    worse = [c for c in tested if c.test.significant and c.test.difference < 0]
    cost = _cost_phrase(result)
    if better:
        best = max(better, key=lambda c: c.test.difference)
        return (
            f"LLM contexts pay on this sample: {best.row} beats {best.baseline} by "
            f"{100 * best.test.difference:.1f} points of {best.metric}, more than the noise"
            f"{cost}."
        )
    if worse:
        return (
            f"LLM contexts do worse than {result.baseline} here ({worse[0].row}: "
            f"{100 * worse[0].test.difference:.1f} points of {worse[0].metric}), more than "
            f"the noise{cost}."
        )
    return (
        f"No difference larger than the noise between LLM contexts and {result.baseline} on "
        f"{result.questions['count']} questions ({result.metric}){cost}: on this evidence they "
        "do not pay; more questions may still show a smaller gain."
    )


def money(value: object) -> str:
    """Dollars as the estimate shows them: four decimals below $10."""
    if not isinstance(value, int | float):
        return "n/a"
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def _cost_phrase(result: TrialResult) -> str:
    priced = [c for c in result.costs if c.corpus is not None]
    if not priced:
        return ""
    cost = priced[0]
    assert cost.corpus is not None
    batch = cost.corpus.get("batch")
    batched = "" if batch is None else f", {money(batch)} batch"
    return (
        f"; contexts for the whole corpus would cost about {money(cost.corpus['standard'])} "
        f"with {cost.model}{batched}"
    )
