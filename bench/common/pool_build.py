"""A ctxr build over a kept synthetic corpus, in a child process, with the pool embedder.

`bench.speed.scale` builds and updates its index this way, and `bench.speed.update_series`
updates kept copies of it: ``build_index(["corpus"], ...)`` from a work directory, as
``ctxr index corpus --index index`` would run there, with the embedding cache around a
`bench.common.pool_embedder.PoolEmbedder` (vectors from real MiniLM embeddings, chosen by each
text's hash: the embedder is not what is measured). The child's report comes back as JSON,
with its peak RSS and wall seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.measure import run_child
from bench.common.pool_embedder import PoolEmbedder
from ctxr.config import load_settings
from ctxr.index import components
from ctxr.pipeline.build import build_index

CORPUS = "corpus"  # the path indexed, relative to the work directory: sources read corpus/...
INDEX = "index"
POOL = "pool.npy"
STATE = "state.json"  # a kept run's corpus, seed, build report and update rounds
_BUILD = "import sys; from bench.common.pool_build import build_child; build_child(*sys.argv[1:])"


def build_child(work: str, pool: str, seed: str, quantization: str, stamps: str = "1") -> None:
    """In a child process: ``build_index(["corpus"], ...)`` from `work`, as ``ctxr index
    corpus --index index`` would run there, with the pool embedder behind the embedding
    cache and the dense vectors held as `quantization` says (`stamps` "0": every file read and
    hashed, ``CTXR_TRUST_FILE_STAMPS=false``); prints the run's report as JSON."""
    os.chdir(work)
    settings = load_settings(
        index_dir=Path(INDEX), quantization=quantization, trust_file_stamps=stamps == "1"
    )
    model = components.make_embedder(settings)  # the default: its tokenizer sizes chunks
    embedder = components.with_cache(PoolEmbedder(np.load(pool), model, int(seed)), settings)
    try:
        report = build_index([CORPUS], settings, embedder=embedder)
    finally:
        close = getattr(embedder, "close", None)
        if callable(close):
            close()
    print(json.dumps(report.to_json()))


def run_build(
    work: Path,
    seed: int,
    quantization: str,
    stamps: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`build_child` run in a fresh interpreter (with `env` added to its environment): the
    build's report, its peak RSS (MiB) and wall seconds."""
    run = run_child(_BUILD, str(work), str(work / POOL), str(seed), quantization,
                    "1" if stamps else "0", env=env)  # fmt: skip
    report: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    report["peak_mib"] = run.peak_mib
    report["wall_seconds"] = run.seconds
    return report
