"""The trial's question file: written, read back, checked against the corpus line by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxr.errors import ConfigError
from ctxr.eval.questions import Answer, Question, load_questions, save_questions
from ctxr.types import Document, text_hash

_TEXT = "Backups run nightly. Restores need a stopped writer. Backups run nightly."


def _doc(source: str, text: str = _TEXT) -> Document:
    return Document(source, source, text, "text", source, text_hash(text))


def _write(path: Path, *rows: Any) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_saved_questions_read_back_as_written(tmp_path: Path) -> None:
    answer = Answer("a.txt", 21, 52, _TEXT[21:52])
    written = [
        Question("q1", "how is a restore done?", (answer,), "anthropic/claude-haiku-4-5", "p/1"),
        Question("q2", "two answers", (answer, Answer("a.txt", 0, 20, _TEXT[:20]))),
    ]
    path = tmp_path / "sub" / "q.jsonl"
    save_questions(path, written)
    loaded = load_questions(path, [_doc("a.txt")])
    assert loaded.questions == written and loaded.moved == 0
    first = json.loads(path.read_text().splitlines()[0])
    assert first["answers"][0] == {"source": "a.txt", "start": 21, "end": 52,
                                   "text": "Restores need a stopped writer."}  # fmt: skip
    assert "writer" not in json.loads(path.read_text().splitlines()[1])


def test_a_persons_question_may_give_the_span_or_the_text(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "q.jsonl",
        {"question": "restore?", "answers": [{"source": "a.txt", "text": "stopped writer"}]},
        "",
        {"id": "span", "question": "first?", "answers": [{"source": "a.txt", "start": 0,
                                                          "end": 7}]},
    )  # fmt: skip
    first, second = load_questions(path, [_doc("a.txt")]).questions
    assert first.id == "q1" and first.writer is None
    assert first.answers[0] == Answer("a.txt", 37, 51, "stopped writer")
    assert second.id == "span" and second.answers[0].text == "Backups"


def test_an_answer_whose_document_changed_is_found_again_by_its_text(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "q.jsonl",
        {
            "question": "restore?",
            "answers": [
                {
                    "source": "a.txt",
                    "start": 21,
                    "end": 52,
                    "text": "Restores need a stopped writer.",
                }
            ],
        },
    )
    changed = _doc("a.txt", "New intro. " + _TEXT)
    loaded = load_questions(path, [changed])
    assert loaded.moved == 1
    assert loaded.questions[0].answers[0].start == 32


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", r"q.jsonl:1: not valid JSON"),
        ("[1]", r"q.jsonl:1: expected a JSON object"),
        ({"answers": [{"source": "a.txt", "text": "x"}]}, r"'question' must be a non-empty"),
        ({"question": "q", "answers": []}, r"'answers' must be a non-empty list"),
        ({"question": "q", "answers": [{"source": "b.txt", "text": "x"}]},
         r"source 'b.txt' is not a document of the corpus"),
        ({"question": "q", "answers": [{"source": "a.txt", "start": 5, "end": 500}]},
         r"span 5-500 is not within a.txt"),
        ({"question": "q", "answers": [{"source": "a.txt", "start": 5}]},
         r"give both 'start' and 'end'"),
        ({"question": "q", "answers": [{"source": "a.txt", "text": "Backups run"}]},
         r"occurs more than once"),
        ({"question": "q", "answers": [{"source": "a.txt", "text": "gone"}]},
         r"is not in a.txt"),
        ({"question": "q", "answers": [{"source": "a.txt", "start": -1, "end": 3}]},
         r"'start' must be a whole number"),
    ],
)  # fmt: skip
def test_bad_lines_are_named_with_the_fix(tmp_path: Path, row: Any, message: str) -> None:
    path = _write(tmp_path / "q.jsonl", row)
    with pytest.raises(ConfigError, match=message):
        load_questions(path, [_doc("a.txt")])


def test_ids_must_differ_and_the_file_must_hold_a_question(tmp_path: Path) -> None:
    row = {"id": "x", "question": "q", "answers": [{"source": "a.txt", "start": 0, "end": 3}]}
    with pytest.raises(ConfigError, match=r"q\.jsonl:2: id 'x' is used by an earlier line"):
        load_questions(_write(tmp_path / "q.jsonl", row, row), [_doc("a.txt")])
    with pytest.raises(ConfigError, match="no questions in the file"):
        load_questions(_write(tmp_path / "e.jsonl", ""), [_doc("a.txt")])
    with pytest.raises(ConfigError, match="questions file not found"):
        load_questions(tmp_path / "missing.jsonl", [_doc("a.txt")])
