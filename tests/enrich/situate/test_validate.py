"""What the validator takes for a context, and what it rejects: both sides of every rule."""

from __future__ import annotations

import pytest

from ctxr.enrich.situate.validate import EMPTY, NOT_A_CONTEXT, TOO_LONG, check_context

CHUNK = "def load(path):\n    return json.loads(Path(path).read_text())\n"
DOCUMENT = "# config.py\n\n" + CHUNK


def verdict(text: str) -> str | None:
    found = check_context(
        text, chunk=CHUNK, document=DOCUMENT, count_tokens=lambda s: len(s.split())
    )
    return None if found is None else found.reason


@pytest.mark.parametrize(
    "answer",
    [
        "c9",
        "C10",
        '"c9"',
        "c9, c10",
        "[c1] [c2]",
        "load",
        "load_config",
        "ctxr.config.load",
        "`Path.read_text`",
        "Overview.",
        "Überblick",  # one word in any spaced script
        "设置",  # two characters: too short in any script
    ],
)
def test_chunk_ids_and_bare_words_are_no_context(answer: str) -> None:
    assert verdict(answer) == NOT_A_CONTEXT


@pytest.mark.parametrize(
    "answer",
    [
        "Config loader.",
        "Loads the JSON config file.",
        "The c9 loader reads the config file.",  # an id inside a sentence is fine
        "Part of config.py: the function that reads settings from disk.",
        "この関数は設定ファイルを読み込む。",  # no spaces, but a sentence
        "Définit load(): lit le fichier de configuration.",
    ],
)
def test_short_real_contexts_are_kept(answer: str) -> None:
    assert verdict(answer) is None


def test_empty_and_oversized_answers_are_rejected() -> None:
    assert verdict("   ") == EMPTY
    assert verdict("word " * 2_000) == TOO_LONG
