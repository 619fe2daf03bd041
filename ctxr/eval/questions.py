"""A trial's judged questions as JSONL: one question a line, each with the spans that answer it.

The file is meant to be read, edited and re-used::

    {"id": "q01", "question": "How is a backup restored?",
     "answers": [{"source": "docs/ops.md", "start": 1830, "end": 2710, "text": "## Restore..."}],
     "writer": "anthropic/claude-haiku-4-5", "prompt": "question/1a2b3c4d5e6f"}

An answer is a span of a document: its `source` as the corpus walk names it (the path given to
`ctxr trial`, as `ctxr index` shows it), and `start`/`end`, character offsets into the loaded
text. A hit answers it when it comes from that document and overlaps the span by at least half
of the shorter of the two (`ctxr.eval.judging.spans_match`), so rows that chunk differently are
judged alike. `text` is the span's text: kept so a person can read the file, and checked on
load, so a question whose document changed is found again or named. A question written by hand
may give the `text` alone (found in the document) or the span alone. `id` defaults to `q` and
the line number; `writer` ("provider/model" of the LLM that wrote it; absent for a person's)
and `prompt` (the question prompt's version) say where it came from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxr.atomic_write import write_atomically
from ctxr.errors import ConfigError
from ctxr.types import Document

_FIX = "fix or remove that line (docs/how-to/trial.md describes the file)"


@dataclass(frozen=True, slots=True)
class Answer:
    """A span that answers a question: ``document.text[start:end] == text``."""

    source: str
    start: int
    end: int
    text: str

    def to_json(self) -> dict[str, object]:
        return {"source": self.source, "start": self.start, "end": self.end, "text": self.text}


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    answers: tuple[Answer, ...]
    writer: str | None = None  # "provider/model" of the LLM that wrote it; None: a person
    prompt: str | None = None  # the question prompt's version, when an LLM wrote it

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "id": self.id,
            "question": self.text,
            "answers": [a.to_json() for a in self.answers],
        }
        if self.writer is not None:
            body["writer"] = self.writer
        if self.prompt is not None:
            body["prompt"] = self.prompt
        return body


@dataclass(frozen=True, slots=True)
class LoadedQuestions:
    questions: list[Question]
    moved: int  # answers whose text was found elsewhere in its (changed) document


def save_questions(path: Path, questions: Iterable[Question]) -> None:
    """Write the JSONL file whole, or not at all (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(question.to_json(), ensure_ascii=False) + "\n" for question in questions]
    write_atomically(path, "".join(lines))


def _where(path: Path, lineno: int) -> str:
    return f"{path}:{lineno}"


def _text(obj: Mapping[str, Any], key: str, where: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key!r} must be a non-empty string; {_FIX}")
    return value


def _offset(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where}: {key!r} must be a whole number >= 0; {_FIX}")
    return value


def _answer(raw: Any, documents: Mapping[str, Document], where: str) -> tuple[Answer, bool]:
    """The answer, and whether its text had moved in a changed document."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each answer must be a JSON object; {_FIX}")
    source = _text(raw, "source", where)
    assert source is not None
    document = documents.get(source)
    if document is None:
        raise ConfigError(
            f"{where}: source {source!r} is not a document of the corpus given; run from the "
            f"folder the questions were written in, with the same paths, or {_FIX}"
        )
    start, end = _offset(raw, "start", where), _offset(raw, "end", where)
    text = _text(raw, "text", where, required=False)
    if (start is None) != (end is None):
        raise ConfigError(f"{where}: give both 'start' and 'end', or neither; {_FIX}")
    if start is not None and end is not None:
        if not start < end <= len(document.text):
            raise ConfigError(
                f"{where}: span {start}-{end} is not within {source} ({len(document.text)} "
                f"characters); {_FIX}"
            )
        if text is None or document.text[start:end] == text:
            return Answer(source, start, end, document.text[start:end]), False
    if text is None:
        raise ConfigError(f"{where}: an answer needs 'start' and 'end', or 'text'; {_FIX}")
    found = document.text.find(text)
    if found < 0:
        raise ConfigError(
            f"{where}: the answer's text is not in {source} (the file changed?); {_FIX}"
        )
    if start is None and document.text.find(text, found + 1) >= 0:
        raise ConfigError(
            f"{where}: the answer's text occurs more than once in {source}; give 'start' and "
            f"'end' to say which"
        )
    return Answer(source, found, found + len(text), text), start is not None


def load_questions(path: Path, documents: Sequence[Document]) -> LoadedQuestions:
    """Read and check a questions file against the corpus; every problem is a `ConfigError`
    naming the line and what to do."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{path}: questions file not found; check --questions") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read as UTF-8 text ({exc})") from exc
    by_source = {d.source: d for d in documents}
    questions: list[Question] = []
    seen: set[str] = set()
    moved = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = _where(path, lineno)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON ({exc.msg}); {_FIX}") from exc
        if not isinstance(obj, dict):
            raise ConfigError(f"{where}: expected a JSON object per line; {_FIX}")
        qid = obj.get("id", f"q{lineno}")
        if not isinstance(qid, str) or not qid:
            raise ConfigError(f"{where}: 'id' must be a non-empty string; {_FIX}")
        if qid in seen:
            raise ConfigError(f"{where}: id {qid!r} is used by an earlier line; ids must differ")
        seen.add(qid)
        text = _text(obj, "question", where)
        raw_answers = obj.get("answers")
        if not isinstance(raw_answers, list) or not raw_answers:
            raise ConfigError(f"{where}: 'answers' must be a non-empty list; {_FIX}")
        answers = []
        for raw in raw_answers:
            answer, was_moved = _answer(raw, by_source, where)
            answers.append(answer)
            moved += was_moved
        writer = _text(obj, "writer", where, required=False)
        prompt = _text(obj, "prompt", where, required=False)
        assert text is not None
        questions.append(Question(qid, text.strip(), tuple(answers), writer, prompt))
    if not questions:
        raise ConfigError(f"{path}: no questions in the file; write one JSON object a line")
    return LoadedQuestions(questions, moved)
