"""Conversation logs: detection (suffix, sniffing, JSON exports) and turn-boundary splitting."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from ctxr.enrich.load.chat import TURN, looks_like_conversation, render_chat_json
from ctxr.enrich.load.documents import load_document
from ctxr.enrich.split import split_document
from ctxr.types import Document
from tests.fixtures.chunks import split_checked
from tests.fixtures.documents import make_document

SPEAKERS = ("Alice", "Bob", "Dr. Carol Smith")


def transcript(turns: int, stamps: bool = False) -> str:
    lines = []
    for i in range(turns):
        stamp = f"[12:{i % 60:02d}] " if stamps else ""
        who = SPEAKERS[i % 3]
        lines.append(f"{stamp}{who}: turn {i + 1} says something about item {i * 7} and more.")
        if i % 4 == 0:
            lines.append("  a continuation line of the same turn, e.g. a quote: not a speaker")
    return "\n".join(lines) + "\n"


def turn_numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"turn (\d+) says", text)]


@pytest.mark.parametrize("stamps", [False, True])
def test_turns_are_never_cut_and_labelled(stamps: bool) -> None:
    doc = make_document(transcript(40, stamps), "conversation")
    chunks = split_checked(doc, 80)
    assert len(chunks) > 3
    seen: list[int] = []
    for chunk in chunks:
        first_line = chunk.text.splitlines()[0]
        assert TURN.match(first_line), first_line  # every chunk starts on a turn
        numbers = turn_numbers(chunk.text)
        label = f"turns {numbers[0]}-{numbers[-1]}" if len(numbers) > 1 else f"turn {numbers[0]}"
        assert chunk.heading_path[0] == label
        speakers = chunk.heading_path[1].split(", ")
        assert set(speakers) <= set(SPEAKERS)
        seen.extend(numbers)
        assert chunk.prefix == ""
    assert seen == list(range(1, 41))  # no overlap by default, nothing lost


def test_over_long_turn_is_split_as_prose_with_speaker_prefix() -> None:
    long_turn = " ".join(f"Sentence {i} of a very long monologue." for i in range(120))
    text = f"Alice: hi there.\nBob: {long_turn}\nAlice: thanks, bye.\n"
    doc = make_document(text, "conversation")
    chunks = split_checked(doc, 64)
    bob = [c for c in chunks if c.heading_path == ("turn 2", "Bob")]
    assert len(bob) > 2
    assert bob[0].prefix == "" and all(c.prefix == "Bob:" for c in bob[1:])
    assert chunks[0].heading_path[0] in ("turn 1", "turns 1-2")


def test_preamble_before_first_turn() -> None:
    text = "Meeting notes, 1 May\n\nAlice: hello\nBob: hi\nAlice: agenda?\nBob: none\n"
    doc = make_document(text, "conversation")
    chunks = split_checked(doc, 8)
    assert chunks[0].heading_path == ("preamble",)


def test_sniffing_is_conservative() -> None:
    assert looks_like_conversation(transcript(10))
    assert looks_like_conversation(transcript(10, stamps=True))
    yaml_like = "name: ctxr\nversion: 1\nauthor: someone\nlicense: MIT\nurl: https://x.org\n"
    assert not looks_like_conversation(yaml_like)
    prose = "A note: this is prose.\nIt has lines.\nSome more lines here.\nAnd a final one.\n"
    assert not looks_like_conversation(prose)
    email = "From: a@b.c\nTo: d@e.f\nSubject: hi\nDate: today\n\nBody text here.\n"
    assert not looks_like_conversation(email)
    assert not TURN.match("see http://example.org: it works")
    assert not TURN.match("10:30 meeting")


def test_loader_routes_conversations(tmp_path: Path) -> None:
    log = tmp_path / "standup.txt"
    log.write_text(transcript(12, stamps=True), encoding="utf-8")
    assert load_document(log).kind == "conversation"
    odd = tmp_path / "one.transcript"
    odd.write_text("just one line without speakers\n", encoding="utf-8")
    assert load_document(odd).kind == "conversation"  # the suffix is taken at its word
    notes = tmp_path / "notes.txt"
    notes.write_text("Title: Notes\n\nPlain prose here.\n", encoding="utf-8")
    assert load_document(notes).kind == "text"
    other = tmp_path / "data.json"
    other.write_text(json.dumps([{"id": 1, "value": "x"}]), encoding="utf-8")
    assert load_document(other).kind == "text"


def test_json_export_is_rendered_as_turns(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is BM25?\nIn one line."},
        {"role": "assistant", "content": [{"type": "text", "text": "A ranking function."}]},
        {"author": {"role": "user"}, "content": {"parts": ["Thanks!"]}},
        {"author": "bot", "text": ""},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    doc = load_document(path)
    assert doc.kind == "conversation"
    assert doc.text == (
        "system: Be brief.\n\nuser: What is BM25?\nIn one line.\n\n"
        "assistant: A ranking function.\n\nuser: Thanks!"
    )
    chunks = split_checked(doc, 16)
    assert chunks[0].heading_path[0].startswith("turn")
    assert render_chat_json("[1, 2]") is None
    assert render_chat_json("not json") is None


def test_whitespace_only_conversation_has_no_chunks() -> None:
    doc: Document = make_document("  \n\n ", "conversation")
    assert split_document(doc, max_tokens=16) == []


def test_explicit_overlap_is_honoured() -> None:
    doc = make_document(transcript(30), "conversation")
    chunks = split_checked(doc, 80, 8)
    assert any(b.start < a.end for a, b in itertools.pairwise(chunks))
