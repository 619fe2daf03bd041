"""`CrossEncoderReranker`: an ONNX cross-encoder run locally with onnxruntime and tokenizers.

The model is a directory (`CTXR_RERANK_MODEL_PATH`) holding ``model.onnx`` and
``tokenizer.json``, e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2`` exported with
``optimum-cli export onnx --model cross-encoder/ms-marco-MiniLM-L-6-v2 DIR``. Nothing is
downloaded at run time and no package ships such weights, so without the directory this
reranker refuses to start, saying what to provide. Each (query, passage) pair is encoded as
one sequence pair; the model's single logit (or the last, for a two-class head) is the score.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from ctxr.config import SearchSettings
from ctxr.errors import ConfigError
from ctxr.retrieve.rerank.base import RerankResult, rerank_with
from ctxr.types import Hit

MODEL_FILE: Final = "model.onnx"
TOKENIZER_FILE: Final = "tokenizer.json"
MAX_TOKENS: Final = 512
BATCH: Final = 16
EXAMPLE_MODEL: Final = "cross-encoder/ms-marco-MiniLM-L-6-v2"


def model_files(path: Path | None) -> tuple[Path, Path]:
    """The model and tokenizer files under `path`; a `ConfigError` naming what is missing."""
    how = (
        f"export an ONNX cross-encoder (e.g. `optimum-cli export onnx --model {EXAMPLE_MODEL} "
        f"DIR`) and set CTXR_RERANK_MODEL_PATH=DIR; ctxr downloads no models and no installed "
        "package ships cross-encoder weights"
    )
    if path is None:
        raise ConfigError(
            f"the cross-encoder reranker needs a local model ({MODEL_FILE} and "
            f"{TOKENIZER_FILE}), and CTXR_RERANK_MODEL_PATH is not set: {how}"
        )
    missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (path / name).is_file()]
    if missing:
        raise ConfigError(
            f"the cross-encoder model at {path} is missing {' and '.join(missing)}: {how}"
        )
    return path / MODEL_FILE, path / TOKENIZER_FILE


class CrossEncoderReranker:
    """Satisfies `ctxr.retrieve.rerank.base.Reranker` structurally."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        model, tokenizer_file = model_files(path)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or max(1, len(os.sched_getaffinity(0)))
        try:
            self._session = ort.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
        except Exception as exc:
            raise ConfigError(f"cannot load the cross-encoder at {path}: {exc}") from exc
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()  # a configured tokenizer's padding state is shared
        self._inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise ConfigError(
                f"{model} does not look like a cross-encoder: it takes {sorted(self._inputs)}, "
                "not input_ids and attention_mask"
            )
        self.path = path

    @classmethod
    def from_settings(cls, search: SearchSettings, threads: int | None) -> CrossEncoderReranker:
        return cls(model_files(search.rerank_model_path)[0].parent, threads)

    @property
    def name(self) -> str:
        return "cross-encoder"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> RerankResult:
        return rerank_with(self.score, query, hits, top_n)

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(passages), BATCH):
            batch = [(query, p) for p in passages[start : start + BATCH]]
            with self._lock:
                encoded = self._tokenizer.encode_batch(batch)
            feed: dict[str, Any] = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            }
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
            logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float64)
            if logits.ndim == 1:
                logits = logits[:, None]
            if logits.ndim != 2 or logits.shape[0] != len(batch):
                raise ValueError(
                    f"the cross-encoder returned shape {logits.shape}, not one score per pair"
                )
            scores.extend(float(x) for x in logits[:, -1])
        return scores

    def close(self) -> None:
        pass
