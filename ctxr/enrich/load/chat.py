"""Recognising conversation logs and rendering JSON chat exports as `role: content` turns.

A turn starts at a line that looks like ``Speaker: text``, optionally after a timestamp
(``[12:01] Alice: hi``); `TURN` is that rule, shared with the splitter
(`ctxr.enrich.split.conversation`), which packs whole turns into chunks. JSON chat exports (a
list of messages, or an object with a ``messages`` list, each message with ``role`` or
``author`` and ``content`` or ``text``) are rendered as ``role: content`` turns
separated by blank lines; chunk offsets refer to that rendering, the document's text."""

from __future__ import annotations

import json
import re

_STAMP = (
    r"(?:\[[^\]\n]{1,32}\]|\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?)[ \t]*(?:[-\u2013][ \t]*)?"
)


_WORD = r"[^\W\d_][\w.'\u2019@()\-]*"


TURN = re.compile(
    rf"^[ \t]*(?:{_STAMP})?(?P<speaker>{_WORD}(?:[ \t]{_WORD}){{0,3}})[ \t]*:(?=[ \t]|$)",
    re.MULTILINE,
)


_SNIFF_LINES = 60


_ROLE_KEYS = ("role", "author", "speaker", "name")


_TEXT_KEYS = ("content", "text")


def looks_like_conversation(text: str) -> bool:
    """Whether most of the first non-empty lines are ``Speaker: text`` turns by a few speakers.

    Conservative on purpose: at least four turns, two or more speakers, and speakers that
    repeat (so ``Key: value`` files such as headers or YAML, whose keys differ, stay prose).
    """
    sample = [line for line in text[:16384].splitlines() if line.strip()][:_SNIFF_LINES]
    speakers = [m.group("speaker").lower() for line in sample if (m := TURN.match(line))]
    distinct = len(set(speakers))
    return (
        len(speakers) >= 4
        and len(speakers) * 10 >= len(sample) * 6
        and 2 <= distinct <= len(speakers) // 2
    )


def render_chat_json(text: str) -> str | None:
    """A JSON chat export as ``role: content`` turns, or None if ``text`` is not one."""
    head = text.lstrip()[:1]
    if head not in ("[", "{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list) or not data:
        return None
    turns: list[str] = []
    for message in data:
        if not isinstance(message, dict):
            return None
        role, content = _role(message), _content(message)
        if role is None or content is None:
            return None
        if content.strip():
            turns.append(f"{role}: {content.strip()}")
    return "\n\n".join(turns) if turns else None


def _role(message: dict[str, object]) -> str | None:
    for key in _ROLE_KEYS:
        value = message.get(key)
        if isinstance(value, dict):  # e.g. {"author": {"role": "user", "name": null}}
            value = value.get("name") or value.get("role")
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return None


def _content(message: dict[str, object]) -> str | None:
    for key in _TEXT_KEYS:
        value = message.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list):  # content parts: strings or {"type": "text", "text": ...}
            parts = [
                p if isinstance(p, str) else p.get("text")
                for p in value
                if isinstance(p, (str, dict))
            ]
            return "\n".join(p for p in parts if isinstance(p, str))
        if isinstance(value, dict) and isinstance(value.get("parts"), list):
            return "\n".join(p for p in value["parts"] if isinstance(p, str))
    return None


CONVERSATION_SUFFIXES = frozenset((".chat", ".transcript"))


def as_conversation(text: str, suffix: str) -> str | None:
    """The document text of a conversation log (a JSON export rendered), or None if not one.

    ``suffix`` is the file's lower-cased suffix: ``.chat`` and ``.transcript`` are taken at
    their word, ``.json`` only when it is a chat export, anything else only when it sniffs as
    ``Speaker: text`` lines.
    """
    if suffix in CONVERSATION_SUFFIXES or suffix == ".json":
        rendered = render_chat_json(text)
        if rendered is not None:
            return rendered
        if suffix == ".json":
            return None
        return text
    return text if looks_like_conversation(text) else None
