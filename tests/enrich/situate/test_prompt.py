"""The situating prompt: rendering, the heading-trail line, and the content-hash version."""

from __future__ import annotations

import hashlib

import pytest

from ctxr.enrich.situate.prompt import (
    PROMPT_VERSION,
    SituatePrompt,
    chunk_part,
    document_part,
    heading_trail,
)
from ctxr.errors import ConfigError
from ctxr.prompts import prompt_version, read_prompt_bytes

INSTRUCTION = (
    "Please give a short succinct context to situate this chunk within the overall document "
    "for the purposes of improving search retrieval of the chunk. Answer only with the "
    "succinct context and nothing else."
)


def test_document_part_wraps_the_document_in_tags() -> None:
    assert document_part("line one\nline two") == "<document>\nline one\nline two\n</document>"


def test_chunk_part_without_a_trail_is_anthropics_wording() -> None:
    assert chunk_part("the chunk") == (
        "Here is the chunk we want to situate within the whole document\n"
        f"<chunk>\nthe chunk\n</chunk>\n{INSTRUCTION}"
    )


def test_chunk_part_names_the_heading_trail_before_the_instruction() -> None:
    rendered = chunk_part("def load(): ...", ("lumen", "Loader", "load"))
    assert rendered.endswith(
        "</chunk>\nThe chunk sits under: lumen > Loader > load\n" + INSTRUCTION
    )


def test_blank_headings_give_no_trail_line() -> None:
    assert chunk_part("x", ("", "  ")) == chunk_part("x")
    assert heading_trail(("A\nB", " C ", "")) == "A B > C"


def test_placeholders_inside_content_are_not_substituted() -> None:
    assert "{{CHUNK_CONTENT}}" in document_part("see {{CHUNK_CONTENT}}")
    rendered = chunk_part("literal {{HEADING_TRAIL}} and {{WHOLE_DOCUMENT}}", ("A",))
    assert "literal {{HEADING_TRAIL}} and {{WHOLE_DOCUMENT}}" in rendered
    assert rendered.count("The chunk sits under") == 1


def test_version_is_the_hash_of_the_packaged_file() -> None:
    data = read_prompt_bytes("situate")
    assert "situate/" + hashlib.sha256(data).hexdigest()[:12] == PROMPT_VERSION
    assert prompt_version(data, "situate") == PROMPT_VERSION  # stable across calls


def test_version_changes_when_the_text_changes() -> None:
    one = prompt_version(b"=== document ===\n{{WHOLE_DOCUMENT}}\n", "situate")
    other = prompt_version(b"=== document ===\n{{WHOLE_DOCUMENT}} \n", "situate")
    assert one != other
    assert one.startswith("situate/") and len(one) == len("situate/") + 12
    assert prompt_version(b"x", "rerank").startswith("rerank/")


def test_a_custom_template_parses_and_renders() -> None:
    prompt = SituatePrompt.parse(
        b"# a comment\n=== document ===\nDOC: {{WHOLE_DOCUMENT}}\n"
        b"=== chunk ===\n{{HEADING_TRAIL}}\nCHUNK: {{CHUNK_CONTENT}}\n"
    )
    assert prompt.document_part("d") == "DOC: d"
    assert prompt.chunk_part("c", ("A",)) == "The chunk sits under: A\nCHUNK: c"
    assert prompt.chunk_part("c") == "CHUNK: c"


@pytest.mark.parametrize(
    "data",
    [
        b"no markers at all",
        b"=== chunk ===\n{{CHUNK_CONTENT}}\n=== document ===\n{{WHOLE_DOCUMENT}}\n",
        b"stray text\n=== document ===\n{{WHOLE_DOCUMENT}}\n=== chunk ===\n{{CHUNK_CONTENT}}\n",
        b"=== document ===\nno slot\n=== chunk ===\n{{CHUNK_CONTENT}}\n",
    ],
)
def test_a_broken_template_is_a_config_error(data: bytes) -> None:
    with pytest.raises(ConfigError):
        SituatePrompt.parse(data)


def test_version_is_pinned_so_cached_contexts_stay_valid() -> None:
    # The response cache keys on this version: a change here re-pays every context of every
    # user's index. Moving the code that loads the prompt must never change it.
    assert PROMPT_VERSION == "situate/a75d0bb61e20"
