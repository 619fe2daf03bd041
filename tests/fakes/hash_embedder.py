"""`HashEmbedder`: a deterministic, model-free embedder for tests that need another identity.

Each word is hashed into one of `dim` buckets with a sign (the hashing trick), counts are summed
and the vector is L2-normalised, so texts that share words are close and identical texts give
identical vectors. It satisfies `ctxr.index.embed.base.Embedder` structurally, without inheriting.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")


class HashEmbedder:
    def __init__(self, dim: int = 64) -> None:
        self._dim = dim
        self.calls = 0
        self.texts_embedded = 0

    @property
    def name(self) -> str:
        return f"fake:hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        return 10_000

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts_embedded += len(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dim] += 1.0 if (value >> 32) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0  # no words: any fixed unit vector keeps rows unit length
            else:
                out[row] /= norm
        return out
