"""The manifest: what an index holds and the settings it was built with.

It lives beside the Qdrant shard as ``manifest.json`` and is rewritten atomically after each
batch of documents, so a run killed half-way leaves a manifest that matches the points
already written: the next run skips those documents and completes the rest.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from ctxr.atomic_write import write_atomically
from ctxr.disk import refusal, storage_error
from ctxr.errors import IndexError_, IndexMismatchError, IndexNotFoundError

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


@functools.cache
def _ctxr_version() -> str:
    """The installed ctxr's version (`ctxr.__version__`, read from the package's metadata:
    this layer may not import the package's root, which imports the pipeline)."""
    try:
        return metadata.version("ctxr")
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


@dataclass(frozen=True, slots=True)
class IndexSettings:
    """Settings that decide what the stored vectors mean; a mismatch makes the index unusable."""

    embedder: str
    dim: int
    analyzer: str
    bm25_k1: float
    bm25_b: float
    # What the embedder read before each query and each chunk (`CTXR_EMBEDDING_QUERY_PREFIX`,
    # `CTXR_EMBEDDING_DOCUMENT_PREFIX`); empty in manifests written before them.
    query_prefix: str = ""
    document_prefix: str = ""

    def mismatches(self, other: IndexSettings) -> list[str]:
        mine, theirs = asdict(self), asdict(other)
        return [f"{k}: index has {mine[k]!r}, asked for {theirs[k]!r}" for k in mine
                if mine[k] != theirs[k]]  # fmt: skip


@dataclass(slots=True)
class DocumentEntry:
    source: str
    sha256: str
    # Hash of the settings that shaped this document's chunks and contexts (chunk size,
    # context mode, prompt version): a change re-indexes the document.
    recipe: str
    chunks: int
    terms: int
    context_kind: str
    indexed_at: str
    # Embedded with its identifiers split (`ctxr.index.embed.identifiers`): queries of an
    # index holding such a document are split too. Absent in manifests written before it.
    split_identifiers: bool = False
    # BM25 terms of the whole document when its first chunk carries a document vector
    # (`ctxr.index.bm25.documents`); 0 when it carries none, and in older manifests.
    document_terms: int = 0
    # The file's size, times and inode when its text was read (`ctxr.file_stamp`): a
    # run passes over the file unread while they hold. None when not trusted (read within a
    # moment of a change, or not from a file), and in older manifests: such a file is read.
    stamp: tuple[int, int, int, int] | None = None


@dataclass(slots=True)
class Manifest:
    settings: IndexSettings
    documents: dict[str, DocumentEntry] = field(default_factory=dict)
    created_at: str = field(default_factory=lambda: _now())
    updated_at: str = field(default_factory=lambda: _now())
    # The store was made with the whole-document BM25 vector. Indexes made before it lack
    # it: they are read as before (two rankings), and `--rebuild` gives them the third.
    document_vectors: bool = False
    # Stamps refreshed since the last save (`restamp`); never written.
    restamped: bool = field(default=False, compare=False, repr=False)

    @property
    def chunk_count(self) -> int:
        return sum(d.chunks for d in self.documents.values())

    @property
    def average_terms(self) -> float:
        """Mean BM25 length of the indexed chunks, which BM25's length normalisation needs."""
        chunks = self.chunk_count
        return sum(d.terms for d in self.documents.values()) / chunks if chunks else 0.0

    def is_current(self, doc_id: str, sha256: str, recipe: str) -> bool:
        """Whether a document is indexed with this content and this recipe (nothing to do)."""
        entry = self.documents.get(doc_id)
        return entry is not None and entry.sha256 == sha256 and entry.recipe == recipe

    def is_stamped(self, doc_id: str, stamp: tuple[int, int, int, int], recipe: str) -> bool:
        """Whether a document is indexed with this recipe from a file that still has `stamp`:
        nothing to do, without reading the file."""
        entry = self.documents.get(doc_id)
        return entry is not None and entry.stamp == stamp and entry.recipe == recipe

    def restamp(self, doc_id: str, stamp: tuple[int, int, int, int] | None) -> None:
        """Record the stamp of a document found current by its content (touched, copied,
        or indexed before stamps), so that the next run passes over it unread."""
        entry = self.documents.get(doc_id)
        if entry is not None and stamp is not None and entry.stamp != stamp:
            entry.stamp = stamp
            self.restamped = True

    def check_compatible(self, wanted: IndexSettings, index_dir: Path) -> None:
        problems = self.settings.mismatches(wanted)
        if problems:
            raise IndexMismatchError(
                f"the index at {index_dir} was built with other settings ({'; '.join(problems)}). "
                "Re-index with --rebuild to rebuild it with the current settings, "
                "or point --index at another directory."
            )

    def save(self, index_dir: Path) -> None:
        self.updated_at = _now()
        self.restamped = False
        head = {
            "format": FORMAT_VERSION,
            "settings": asdict(self.settings),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "document_vectors": self.document_vectors,
            # The ctxr that recorded the stamps: another (an upgrade, whose loaders may read a
            # file differently) trusts none of them, so every file is read once, and stamped.
            "stamps_by": _ctxr_version(),
        }
        path = index_dir / MANIFEST_NAME
        try:
            # A crash leaves the old manifest or the new one, never half of one.
            write_atomically(path, _manifest_json(head, self.documents))
        except OSError as exc:
            kind = refusal(exc)
            if kind is None:
                raise
            # The old manifest stands, matching the points it records; the points written
            # after it are cleared by the next run, their vectors read from the cache.
            raise storage_error(index_dir, "index manifest", kind, detail=str(exc)) from exc

    @classmethod
    def load(cls, index_dir: Path) -> Manifest:
        path = index_dir / MANIFEST_NAME
        if not path.exists():
            raise IndexNotFoundError(
                f"no ctxr index at {index_dir} (missing {MANIFEST_NAME}); "
                "build one with `ctxr index PATH --index DIR` or pass the right --index"
            )
        try:
            body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(body, dict):
                raise ValueError(f"expected a JSON object, found {type(body).__name__}")
            if body.get("format") != FORMAT_VERSION:
                raise IndexMismatchError(
                    f"{path} has format {body.get('format')!r}, this ctxr reads "
                    f"{FORMAT_VERSION}; re-index with --rebuild"
                )
            trusted = body.get("stamps_by") == _ctxr_version()
            return cls(
                settings=IndexSettings(**_object(body.get("settings"), "settings")),
                documents={
                    k: _entry(_object(v, f"documents[{k!r}]"), trusted)
                    for k, v in _object(body.get("documents"), "documents").items()
                },
                created_at=str(body["created_at"]),
                updated_at=str(body["updated_at"]),
                document_vectors=bool(body.get("document_vectors", False)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # Any JSON that is not the manifest's shape (a list for `documents`, an entry
            # missing a field) is one damage, named with the fix, never a traceback.
            raise IndexError_(
                f"{path} is damaged ({type(exc).__name__}: {exc}); re-index with "
                f"`ctxr index PATH --index {index_dir} --rebuild` to recreate the index "
                "(contexts and embeddings come from the caches, nothing is paid again)"
            ) from exc


_ENTRY_FIELDS = tuple(f.name for f in dataclass_fields(DocumentEntry))


def _manifest_json(head: dict[str, Any], documents: dict[str, DocumentEntry]) -> str:
    """The manifest as JSON: its head, then one document a line.

    Each line is encoded by `json`'s C encoder, which an `indent` turns off: with the whole
    file indented, a save of 20,000 documents took about a second, most of it in the
    pure-Python encoder and `dataclasses.asdict`'s deep copies, and an update saves at least
    once. One document a line keeps the file readable and `grep`-able.
    """
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "documents": {']
    encode = json.JSONEncoder(ensure_ascii=False).encode
    entries = [
        encode(doc_id) + ": " + encode({name: getattr(entry, name) for name in _ENTRY_FIELDS})
        for doc_id, entry in documents.items()
    ]
    lines.append(",\n".join(entries))
    lines.append("}}\n")
    return "\n".join(lines)


def _entry(fields: dict[str, Any], trusted: bool) -> DocumentEntry:
    """A manifest's document; its stamp kept only when `trusted` (recorded by this ctxr)."""
    entry = DocumentEntry(**fields)
    if entry.stamp is not None and not trusted:
        entry.stamp = None
    if entry.stamp is not None:  # JSON gives a list; anything but four integers is no stamp
        stamp: Any = entry.stamp
        valid = isinstance(stamp, list) and len(stamp) == 4 and all(type(n) is int for n in stamp)
        entry.stamp = (stamp[0], stamp[1], stamp[2], stamp[3]) if valid else None
    return entry


def _object(value: Any, name: str) -> dict[str, Any]:
    """`value` when it is a JSON object; else the damage, named."""
    if not isinstance(value, dict):
        raise TypeError(f"{name} is {type(value).__name__}, not an object")
    return value


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
