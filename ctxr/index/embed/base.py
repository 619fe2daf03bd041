"""The `Embedder` protocol: everything the indexer and the retriever ask of a dense embedder.

Implementations: `OnnxEmbedder` (the local MiniLM, `ctxr.index.embed.onnx`), `OpenAIEmbedder`
(`ctxr.index.embed.openai`), and test fakes, which plug in without inheriting anything.
`EmbedderWrapper` is the base of those that wrap another (`CachedEmbedder` around either, the
Ray executor's embedder): they answer for the model as the inner one does and change only how
it embeds."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

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


class EmbedderWrapper(ABC):
    """An `Embedder` around another, `inner`: the name, sizes and token counts are the inner
    model's (what the manifest records and what the splitter sizes by must not change because
    vectors come from a cache, a pool of workers or a recording), and a subclass says only how
    it embeds."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_tokens(self) -> int:
        return self.inner.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    @property
    def texts_per_call(self) -> int:
        """How many texts one `embed` call needs to keep every worker busy (0: any number;
        a pool of workers says how many, see `ctxr.pipeline.executors.ray`)."""
        return int(getattr(self.inner, "texts_per_call", 0))

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> FloatMatrix: ...

    def close_inner(self) -> None:
        """Closes `inner` where it has anything to close (an HTTP embedder holds connections)."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
