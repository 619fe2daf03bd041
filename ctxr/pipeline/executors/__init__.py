"""Executors: where a run's CPU-heavy stages (splitting and embedding) take place.

The same stages run in either; only their placement differs, so an index built by one is the
index the other builds (`tests/pipeline/test_ray_executor.py` checks it point by point):

- `local`: in this process, as `ctxr index` always has;
- `ray`: on Ray actors (`ctxr index --ray`, `CTXR_EXECUTOR=ray`), on a local Ray started for
  the run or the cluster named by `RAY_ADDRESS`.

What stays in the driver, and why: reading the files (they are on the machine that runs
`ctxr index`), the LLM contexts (one async queue is one rate budget and one place that submits
batches, however many workers there are), and the manifest (it records a batch once its points
are flushed, which is what makes a killed run resume without paying twice). The points are
written by the driver too, except where the workers can reach the store themselves (Ray
actors and a Qdrant server: `Executor.point_writer`).
"""

from __future__ import annotations

from ctxr.config import RunSettings
from ctxr.pipeline.executors.base import Executor
from ctxr.pipeline.executors.local import LocalExecutor


def make_executor(run: RunSettings) -> Executor:
    """The executor `run.executor` names; Ray's is imported only when asked for."""
    if run.executor == "ray":
        from ctxr.pipeline.executors.ray import RayExecutor

        return RayExecutor(run)
    return LocalExecutor()


__all__ = ["Executor", "LocalExecutor", "make_executor"]
