"""Every error ctxr raises on purpose; each message names the thing and says the fix.

CtxrError
├── ConfigError            a setting is missing or malformed
├── LoadError              one input file cannot be used (the corpus run goes on)
│   ├── BinaryFileError
│   └── UndecodableFileError
├── IndexError_            the index directory is missing, corrupt or incompatible
│   ├── IndexNotFoundError
│   └── IndexMismatchError
├── EmbedderError          the embedding model cannot be loaded or run
└── DatasetError           an evaluation data set is missing or malformed
"""

from __future__ import annotations


class CtxrError(Exception):
    """Base of every deliberate ctxr error."""


class ConfigError(CtxrError):
    pass


class LoadError(CtxrError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class BinaryFileError(LoadError):
    pass


class UndecodableFileError(LoadError):
    pass


class IndexError_(CtxrError):
    pass


class IndexNotFoundError(IndexError_):
    pass


class IndexMismatchError(IndexError_):
    pass


class EmbedderError(CtxrError):
    pass


class DatasetError(CtxrError):
    pass
