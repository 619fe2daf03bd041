"""Loaders for the evaluation sets, each into one ``EvalDataset`` shape.

Two kinds of set are supported, because they test different things:

- anthropic-codebase (Anthropic's contextual-retrieval guide) ships its own chunks and judges
  them, so the harness must index *those* chunks, not re-split the files; each chunk carries
  its character offsets, derived here by checking that the chunks join back to the document.
  Golden chunks are matched by (document original_uuid, chunk original_index), encoded as
  the ``chunk_key`` "uuid#index", never by text: 737 chunks hold only 723 distinct texts.
- BEIR sets (SciFact, NFCorpus, ArguAna, CoSQA) judge whole documents, so the indexer chunks
  them itself; ``chunks`` is empty and the title is kept apart from the text for the indexer
  to combine. Two quirks of the official releases are handled as BEIR handles them: a query
  that is itself a corpus document (ArguAna: same id, same text) must not find itself
  (``EvalQuery.ignore``, BEIR's ``ignore_identical_ids``), and a few judged documents absent
  from the corpus stay in the judgments, unfindable, as pytrec_eval counts them.

Data is read where it lies (``default_data_dir``), never copied into the project. Every
problem raises ``DatasetError`` naming the file (and line) and saying what to do.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ctxr.config import load_settings
from ctxr.enrich.load.documents import CODE_LANGUAGES, kind_of
from ctxr.errors import DatasetError

_FIX_ANTHROPIC = (
    "copy codebase_chunks.json and evaluation_set.jsonl from claude-cookbooks "
    "(skills/contextual-embeddings/data/) into that directory"
)
#: The share of judgments that may name documents absent from the corpus before the files are
#: taken for mismatched releases: ArguAna's official release lacks 5 of its 1,406 (0.4%).
MISSING_JUDGED_LIMIT = 0.01
_FIX_BEIR = (
    "download the BEIR data set and unpack it there (corpus.jsonl[.gz], queries.jsonl[.gz], "
    "qrels/<split>.tsv)"
)


@dataclass(frozen=True)
class EvalQuery:
    """A query and its judgments: relevant id -> grade (> 0 relevant, 0 judged irrelevant)."""

    query_id: str
    text: str
    qrels: Mapping[str, int]
    # Document ids that must not count as hits: the query's own document, when the corpus
    # holds the query itself (BEIR's ignore_identical_ids; ArguAna).
    ignore: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GivenChunk:
    """A chunk fixed by the data set; ``document.text[start:end] == text``."""

    chunk_key: str
    doc_id: str
    index: int
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class EvalDocument:
    """A document to index; ``chunks`` is empty when the indexer must split it itself."""

    doc_id: str
    title: str
    text: str
    chunks: tuple[GivenChunk, ...] = ()
    language: str | None = None  # a code file's language, when the set says which


@dataclass(frozen=True)
class EvalDataset:
    name: str
    documents: tuple[EvalDocument, ...]
    queries: tuple[EvalQuery, ...]
    # Judged document ids that the corpus lacks (kept in the qrels: they count as missed).
    missing_judged: tuple[str, ...] = ()

    def qrels(self) -> dict[str, Mapping[str, int]]:
        """Query id -> judgments, the shape ``metrics.evaluate_run`` takes."""
        return {q.query_id: q.qrels for q in self.queries}


def chunk_key(original_uuid: str, original_index: int) -> str:
    """The id golden chunks are judged by in the anthropic-codebase set."""
    return f"{original_uuid}#{original_index}"


def default_data_dir() -> Path:
    """Where the evaluation data lies: ``CTXR_DATA_DIR`` (environment or ``.env``), else the
    nearest ``shared/data``.

    The search walks up from the working directory and then from this package, because the
    data sits beside the checkout (``/work/shared/data`` for ``/work/main``) and must not be
    copied into it. Raises ``DatasetError`` when neither finds it.
    """
    configured = load_settings().data_dir
    if configured is not None:
        return configured.expanduser()
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            candidate = folder / "shared" / "data"
            if candidate.is_dir():
                return candidate
    raise DatasetError(
        "no evaluation data directory found: set CTXR_DATA_DIR to the folder holding "
        "anthropic-codebase/ and scifact/, or place it at ../shared/data beside the checkout"
    )


def _require(path: Path, fix: str) -> Path:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found; {fix}")
    return path


def _find(folder: Path, stem: str, fix: str) -> Path:
    """``stem`` or ``stem.gz`` in folder: BEIR mirrors ship either."""
    for name in (stem, f"{stem}.gz"):
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(f"{folder / stem}: file not found (nor {stem}.gz); {fix}")


def _open_text(path: Path) -> Iterator[str]:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                yield from fh
        else:
            with path.open(encoding="utf-8") as fh:
                yield from fh
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DatasetError(f"{path}: cannot be read ({exc}); download it again") from exc


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line."""
    for lineno, line in enumerate(_open_text(path), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object per line")
        yield lineno, obj


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise DatasetError(f"{where}: field {key!r} missing or not a {kind.__name__}")
    return value


def _codebase_document(raw: Any, where: str) -> EvalDocument:
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    uuid = _field(raw, "original_uuid", str, where)
    content = _field(raw, "content", str, where)
    raw_chunks = _field(raw, "chunks", list, where)
    chunks: list[GivenChunk] = []
    offset = 0
    for i, rc in enumerate(raw_chunks):
        cwhere = f"{where}, chunk {i}"
        if not isinstance(rc, dict):
            raise DatasetError(f"{cwhere}: expected a JSON object")
        index = _field(rc, "original_index", int, cwhere)
        text = _field(rc, "content", str, cwhere)
        # Offsets are only meaningful if the chunks tile the document in order.
        if content[offset : offset + len(text)] != text:
            raise DatasetError(
                f"{cwhere}: chunk text does not continue the document at offset {offset}; "
                "the file is not the published one, download it again"
            )
        chunks.append(
            GivenChunk(chunk_key(uuid, index), uuid, index, text, offset, offset + len(text))
        )
        offset += len(text)
    if offset != len(content):
        raise DatasetError(f"{where}: chunks cover {offset} of {len(content)} characters")
    title = raw.get("doc_id") if isinstance(raw.get("doc_id"), str) else uuid
    return EvalDocument(doc_id=uuid, title=str(title), text=content, chunks=tuple(chunks))


def load_anthropic_codebase(path: Path) -> EvalDataset:
    """Load ``codebase_chunks.json`` and ``evaluation_set.jsonl`` from ``path``.

    Query ids are ``q<line number>`` since the file has none. The title is the set's own
    ``doc_id`` ("doc_1"): file paths exist only in the queries' metadata, so using them would
    name exactly the documents that some query asks about.
    """
    chunks_path = _require(path / "codebase_chunks.json", _FIX_ANTHROPIC)
    queries_path = _require(path / "evaluation_set.jsonl", _FIX_ANTHROPIC)
    try:
        raw_docs = json.loads("".join(_open_text(chunks_path)))
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{chunks_path}:{exc.lineno}: not valid JSON ({exc.msg}); download it again"
        ) from exc
    if not isinstance(raw_docs, list):
        raise DatasetError(f"{chunks_path}: expected a JSON list of documents")
    documents = tuple(
        _codebase_document(raw, f"{chunks_path}, document {i}") for i, raw in enumerate(raw_docs)
    )
    known = {c.chunk_key for d in documents for c in d.chunks}
    queries: list[EvalQuery] = []
    languages: dict[str, str] = {}
    for lineno, obj in _jsonl(queries_path):
        where = f"{queries_path}:{lineno}"
        text = _field(obj, "query", str, where)
        languages.update(_languages(obj))
        qrels: dict[str, int] = {}
        for pair in _field(obj, "golden_chunk_uuids", list, where):
            ok = isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)
            if not ok or not isinstance(pair[1], int):
                raise DatasetError(f"{where}: golden_chunk_uuids entries must be [uuid, index]")
            key = chunk_key(pair[0], pair[1])
            if key not in known:
                raise DatasetError(f"{where}: golden chunk {key} is not in {chunks_path.name}")
            qrels[key] = 1
        queries.append(EvalQuery(query_id=f"q{lineno}", text=text, qrels=qrels))
    documents = tuple(replace(d, language=languages.get(d.doc_id)) for d in documents)
    return EvalDataset(name="anthropic-codebase", documents=documents, queries=tuple(queries))


def _languages(query: Mapping[str, Any]) -> dict[str, str]:
    """Document uuid -> language, from the suffix of the file paths in a query's metadata.

    Only the language is taken, never the path: a path would name the very documents that
    the query asks about, while a suffix says only how to parse the file, as on disk."""
    found: dict[str, str] = {}
    for golden in query.get("golden_documents") or ():
        meta = golden.get("meta") if isinstance(golden, dict) else None
        path = meta.get("relative_path") if isinstance(meta, dict) else None
        if isinstance(path, str) and isinstance(golden.get("uuid"), str):
            kind, language = kind_of(Path(path))
            if kind == "code" and language is not None:
                found[golden["uuid"]] = language
    return found


def _load_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(_open_text(path), start=1):
        row = line.rstrip("\r\n").split("\t")
        if not line.strip() or (lineno == 1 and row[0] == "query-id"):
            continue
        try:
            query_id, doc_id, grade = row[0], row[1], int(row[2])
        except (IndexError, ValueError) as exc:
            raise DatasetError(
                f"{path}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score'"
            ) from exc
        qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def load_beir(path: Path, split: str = "test", language: str | None = None) -> EvalDataset:
    """Load a BEIR set: every corpus document, and the queries judged in ``qrels/<split>.tsv``.

    A judged query absent from the files raises ``DatasetError``, and so do judged documents
    absent from the corpus beyond ``MISSING_JUDGED_LIMIT`` of the judgments (the files come
    from different releases). Fewer stay in the judgments, unfindable, as pytrec_eval counts
    them (ArguAna), and are listed in ``missing_judged``: dropping them would inflate every
    metric. A query whose id and text are a corpus document's ignores that document.

    `language`: the corpus holds source code of that language (CoSQA: Python functions), to
    be indexed as ctxr indexes such files; BEIR's files do not say so themselves.
    """
    known = sorted(set(CODE_LANGUAGES.values()))
    if language is not None and language not in known:
        raise DatasetError(f"unknown code language {language!r}; choose one of {', '.join(known)}")
    if not path.is_dir():
        raise DatasetError(f"{path}: directory not found; {_FIX_BEIR}")
    corpus_path = _find(path, "corpus.jsonl", _FIX_BEIR)
    queries_path = _find(path, "queries.jsonl", _FIX_BEIR)
    qrels_path = _require(path / "qrels" / f"{split}.tsv", f"{_FIX_BEIR}, or choose another split")
    qrels = _load_qrels(qrels_path)

    documents: list[EvalDocument] = []
    for lineno, obj in _jsonl(corpus_path):
        where = f"{corpus_path}:{lineno}"
        doc_id = _field(obj, "_id", str, where)
        title = obj.get("title") or ""
        text = _field(obj, "text", str, where)
        documents.append(EvalDocument(doc_id, str(title), text, language=language))
    texts = {d.doc_id: d.text for d in documents}

    queries: list[EvalQuery] = []
    for lineno, obj in _jsonl(queries_path):
        query_id = _field(obj, "_id", str, f"{queries_path}:{lineno}")
        if query_id in qrels:
            text = _field(obj, "text", str, f"{queries_path}:{lineno}")
            # Same id and same text: the query is that document (ArguAna), not a number that
            # happens to be both a query id and a document id (SciFact).
            own = texts.get(query_id)
            ignore = (
                frozenset({query_id})
                if own is not None and own.strip() == text.strip()
                else frozenset()
            )
            queries.append(EvalQuery(query_id, text, qrels[query_id], ignore))

    missing_q = qrels.keys() - {q.query_id for q in queries}
    if missing_q:
        raise DatasetError(
            f"{qrels_path}: {len(missing_q)} judged queries (e.g. {min(missing_q)!r}) are not in "
            f"{queries_path.name}; the files come from different releases, download them again"
        )
    pairs = [d for judged in qrels.values() for d in judged]
    missing_d = {d for d in pairs if d not in texts}
    absent = sum(d in missing_d for d in pairs)
    if missing_d and absent > MISSING_JUDGED_LIMIT * len(pairs):
        raise DatasetError(
            f"{qrels_path}: {len(missing_d)} judged documents (e.g. {min(missing_d)!r}) are not "
            f"in {corpus_path.name}; the files come from different releases, download them again"
        )
    return EvalDataset(
        name=path.name,
        documents=tuple(documents),
        queries=tuple(queries),
        missing_judged=tuple(sorted(missing_d)),
    )
