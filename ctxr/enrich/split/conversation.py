"""Conversation logs: chat exports and transcripts, split on turn boundaries.

A turn starts at a line that looks like ``Speaker: text``, optionally after a timestamp
(``[12:01] Alice: hi``, ``12:01:33 - Bob: hello``, ``[2024-05-01 09:00] Carol: ok``). A speaker
is one to four words that start with a letter; the colon must be followed by whitespace or the
line's end, so URLs and clock times are never speakers. Lines that do not start a turn belong
to the turn above them; text before the first turn is a turn of its own without a speaker.

JSON chat exports (a list of messages, or an object with a ``messages`` list, each message
with ``role`` or ``author`` and ``content`` or ``text``) are rendered by the loader as
``role: content`` turns separated by blank lines (``render_chat_json``); chunk offsets refer to
that rendering, which is the document's text.

Splitting packs whole turns greedily into chunks of at most the budget; a turn that alone is
over the budget is split by the prose splitter, and its continuation chunks carry the speaker
label (``Alice:``) as their ``prefix``. No overlap by default: turns are natural units.

``heading_path`` is ``("turns 5-9", "Alice, Bob")``: the 1-based turn numbers the chunk holds
(``"turn 7"`` for one turn or a part of one; ``"preamble"`` for text before the first turn) and
the speakers in order of first appearance, when any.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxr.enrich.load.chat import TURN
from ctxr.enrich.split.recursive import PROSE_LEVELS, add_overlap, split_span
from ctxr.enrich.split.sizing import Piece, Sized, Sizer, pack, trim


def split_conversation(sizer: Sizer, max_tokens: int, overlap: int) -> list[Piece]:
    """Chunks of whole turns (see the module docstring)."""
    turns = _turns(sizer)
    budget = max_tokens - overlap  # room for the overlap each chunk takes from the one before
    spans: list[Sized] = []
    owner: list[int] = []  # index into ``turns`` of the turn each span starts in
    group: list[Sized] = []
    group_first = 0
    for i, (span, _speaker, _number) in enumerate(turns):
        if span.tokens <= budget:
            if not group:
                group_first = i
            group.append(span)
            continue
        _flush(sizer, group, group_first, budget, spans, owner, turns)
        group = []
        for part in split_span(sizer, span, PROSE_LEVELS, budget):
            spans.append(part)
            owner.append(i)
    _flush(sizer, group, group_first, budget, spans, owner, turns)
    final = add_overlap(sizer, spans, overlap, max_tokens)
    pieces: list[Piece] = []
    for k, chunk in enumerate(final):
        first = owner[k]
        last = first
        while last + 1 < len(turns) and turns[last + 1][0].start < spans[k].end:
            last += 1
        continuation = spans[k].start > turns[first][0].start
        speaker = turns[first][1]
        prefix = f"{speaker}:" if continuation and speaker else ""
        pieces.append(Piece(chunk, _heading(turns[first : last + 1]), prefix))
    return pieces


_Turn = tuple[Sized, str, int]  # span, speaker ("" before the first turn), 1-based number (0)


def _turns(sizer: Sizer) -> list[_Turn]:
    text = sizer.text
    bounds: list[tuple[int, str]] = [(m.start(), m.group("speaker")) for m in TURN.finditer(text)]
    if not bounds or bounds[0][0] != 0:
        bounds.insert(0, (0, ""))
    turns: list[_Turn] = []
    number = 0
    for k, (start, speaker) in enumerate(bounds):
        span = trim(text, start, bounds[k + 1][0] if k + 1 < len(bounds) else len(text))
        if span is None:
            continue
        if speaker:
            number += 1
        turns.append((sizer.sized(*span), speaker, number if speaker else 0))
    return turns


def _flush(
    sizer: Sizer,
    group: list[Sized],
    group_first: int,
    budget: int,
    spans: list[Sized],
    owner: list[int],
    turns: Sequence[_Turn],
) -> None:
    i = group_first
    for chunk in pack(sizer, group, budget):
        while turns[i][0].start < chunk.start:
            i += 1
        spans.append(chunk)
        owner.append(i)


def _heading(turns: Sequence[_Turn]) -> tuple[str, ...]:
    numbers = [n for _, _, n in turns if n]
    if not numbers:
        label = "preamble"
    elif numbers[0] == numbers[-1]:
        label = f"turn {numbers[0]}"
    else:
        label = f"turns {numbers[0]}-{numbers[-1]}"
    speakers = list(dict.fromkeys(s for _, s, _ in turns if s))
    return (label, ", ".join(speakers)) if speakers else (label,)
