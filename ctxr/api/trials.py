"""`GET /trials`: the `ctxr trial` reports a server was started with, for the page to show.

`ctxr trial` writes `trial.json` into its output folder; `ctxr serve --trial PATH` (or
`CTXR_API_TRIALS`) names those files or folders. Each is read when asked for, so a trial run
again is shown as it now stands. A report that is missing or unreadable is listed with the
reason, never an error of the whole answer: the page says which file to fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from ctxr.eval.trial import REPORT_FILE

PATH = "/trials"


class Interval(BaseModel):
    mean: float
    low: float
    high: float


class TrialRowView(BaseModel):
    name: str
    available: bool
    note: str = ""
    llm: str | None = Field(None, description="provider/model that wrote this row's contexts")
    scores: dict[str, Interval] = Field(description="metric -> mean and bootstrap interval")


class ComparisonView(BaseModel):
    row: str
    baseline: str
    metric: str
    difference: float
    low: float
    high: float
    p_value: float
    significant: bool
    sentence: str = Field(description="the comparison in one plain sentence")


class TrialView(BaseModel):
    path: str = Field(description="the trial.json this was read from")
    error: str | None = Field(None, description="why the report could not be read")
    verdict: str = ""
    metric: str = ""
    baseline: str = ""
    metrics: list[str] = Field(default_factory=list)
    questions: dict[str, Any] = Field(default_factory=dict)
    sample: dict[str, Any] = Field(default_factory=dict)
    rows: list[TrialRowView] = Field(default_factory=list)
    comparisons: list[ComparisonView] = Field(default_factory=list)
    costs: list[dict[str, Any]] = Field(
        default_factory=list, description="what LLM contexts cost on the sample, and projected"
    )
    notes: list[str] = Field(default_factory=list)


class TrialsResponse(BaseModel):
    trials: list[TrialView]


def trial_files(named: tuple[str, ...]) -> list[Path]:
    """Each named path as its report file: a folder means its `trial.json`."""
    paths = [Path(name).expanduser() for name in named]
    return [p / REPORT_FILE if p.is_dir() else p for p in paths]


def read_trial(path: Path) -> TrialView:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        return TrialView.model_validate({**body, "path": str(path)})
    except FileNotFoundError:
        why = "no such file; run `ctxr trial ... --out FOLDER`, then name FOLDER"
    except OSError as exc:
        why = f"cannot be read ({exc.strerror or exc})"
    except ValueError as exc:  # JSON or the report's shape (pydantic's errors are ValueErrors)
        why = f"not a ctxr trial report ({str(exc).splitlines()[0]})"
    return TrialView(path=str(path), error=why)


def add_trials_route(app: FastAPI, named: tuple[str, ...]) -> None:
    files = trial_files(named)

    @app.get(PATH)
    async def trials() -> TrialsResponse:
        """The `ctxr trial` reports this server was started with (`--trial`,
        CTXR_API_TRIALS): each row's scores with intervals, the comparisons, the cost."""
        return TrialsResponse(
            trials=await run_in_threadpool(lambda: [read_trial(p) for p in files])
        )
