"""The `Embedder` protocol: everything the indexer and the retriever ask of a dense embedder.

Implementations: `OnnxEmbedder` (the local MiniLM, `ctxr.index.embed.onnx`), `OpenAIEmbedder`
(`ctxr.index.embed.openai`), `CachedEmbedder` (`ctxr.index.embed.cache`) around either, and
test fakes, which plug in without inheriting anything."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    pass


FloatMatrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and the retriever need from any dense embedder (local or HTTP)."""

    @property
    def name(self) -> str:
        """Recorded in the index manifest: vectors from two different models never mix."""
        ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int:
        """The input limit in the model's own word pieces, special tokens included."""
        ...

    def count_tokens(self, text: str) -> int:
        """Word pieces `text` takes, special tokens included, before any truncation: the
        indexer splits chunks and trims contexts so that what it embeds fits `max_tokens`."""
        ...

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """float32 rows of unit length, one per text, in input order; ``[]`` gives (0, dim)."""
        ...
