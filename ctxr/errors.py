"""Every error ctxr raises on purpose; each message names the thing and says the fix.

CtxrError
├── ConfigError            a setting is missing or malformed
├── LoadError              one input file cannot be used (the corpus run goes on)
│   ├── SkipFileError      passed over on purpose, counted among the skips, not the failures
│   │   └── BinaryFileError
│   └── UndecodableFileError
├── IndexError_            the index directory is missing, corrupt or incompatible
│   ├── IndexNotFoundError
│   ├── IndexMismatchError
│   ├── IndexInUseError    another process holds the shard (a `ctxr serve` it names, or a run)
│   └── IndexCorruptError  the store cannot be read, or reads back what was never written
├── StorageError           a disk cannot take a write (full, read-only): nothing is damaged
├── EmbedderError          the embedding model cannot be loaded or run
├── DatasetError           an evaluation data set is missing or malformed
├── ProviderError          an LLM or embedding provider call failed; says if a retry can help
│   └── ContextLengthError the request is longer than the server's context window
└── RerankError            a reranker gave no order; the search returns the fused one, flagged
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


class SkipFileError(LoadError):
    """A file the loader passes over on purpose (a binary, not a regular file, an archive that
    would unpack past the limit): the run counts it among its skips, not its failures."""


class BinaryFileError(SkipFileError):
    pass


class UndecodableFileError(LoadError):
    pass


class IndexError_(CtxrError):
    pass


class IndexNotFoundError(IndexError_):
    pass


class IndexMismatchError(IndexError_):
    pass


class IndexInUseError(IndexError_):
    pass


class IndexCorruptError(IndexError_):
    """`what` is the damage found, without the advice around it."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


class StorageError(CtxrError):
    """A write was refused by the disk (no space, read-only, no permission), not damage:
    `path` is where, `free` the bytes free there when it was noticed (None if unknown)."""

    def __init__(self, message: str, path: str = "", free: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.free = free


class EmbedderError(CtxrError):
    pass


class DatasetError(CtxrError):
    pass


class ProviderError(CtxrError):
    """A provider call failed. `retryable` says whether the same request may succeed later
    (429, 529/overloaded, 5xx, timeouts, dropped connections); `retry_after` is the server's
    requested wait in seconds, when it sent one."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        status: int | None = None,
        timed_out: bool = False,
        connection: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.timed_out = timed_out  # no answer within the client's timeout
        self.connection = connection  # the connection failed or timed out (no HTTP status)


class ContextLengthError(ProviderError):
    """The server refused a request longer than its context window (llama.cpp's
    `exceed_context_size_error`, vLLM's and OpenAI's "maximum context length"). The same
    request fails again; a smaller one may not, so the situating queue splits it. `window` and
    `prompt_tokens` are the server's figures, when it said them."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 400,
        window: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message, retryable=False, status=status)
        self.window = window
        self.prompt_tokens = prompt_tokens


class RerankError(CtxrError):
    """A reranker could not produce an order; `flag` is what the hits are marked with."""

    def __init__(self, flag: str) -> None:
        super().__init__(flag)
        self.flag = flag
