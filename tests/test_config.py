import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ctxr.config import (
    GROUP_OF,
    GROUPS,
    SearchSettings,
    Settings,
    SplitSettings,
    load_settings,
    setting_fields,
)
from ctxr.errors import ConfigError
from tests.fixtures.paths import ROOT


def test_env_example_lists_every_setting() -> None:
    listed = set(re.findall(r"^#?\s*CTXR_([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    fields = {name.upper() for name in setting_fields()}
    assert fields == listed


def test_environment_then_flags_take_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXR_CHUNK_TOKENS", "300")
    assert load_settings().split.chunk_tokens == 300
    assert load_settings(chunk_tokens=120).split.chunk_tokens == 120
    assert load_settings(chunk_tokens=None).split.chunk_tokens == 300  # None = flag not given


def test_invalid_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXR_RRF_K", "zero")
    with pytest.raises(ConfigError, match="CTXR_RRF_K"):
        load_settings()


def test_invalid_setting_names_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"--max-tokens 12: .*; fix the flag$") as flag:
        load_settings(flags={"chunk_tokens": "--max-tokens"}, chunk_tokens=12)
    assert "CTXR_CHUNK_TOKENS" not in str(flag.value)
    with pytest.raises(ConfigError, match=r"chunk_tokens=12 \(CTXR_CHUNK_TOKENS\): .*argument$"):
        load_settings(chunk_tokens=12)  # the Python API's keyword
    monkeypatch.setenv("CTXR_CHUNK_TOKENS", "12")
    with pytest.raises(ConfigError, match=r"CTXR_CHUNK_TOKENS: .*variable or \.env$"):
        load_settings(flags={"chunk_tokens": "--max-tokens"})  # the flag was not given


def test_dotenv_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("CTXR_CANDIDATES=77\n")
    monkeypatch.chdir(tmp_path)
    assert load_settings().search.candidates == 77


def test_structured_settings_are_parsed_once_into_typed_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXR_CHUNK_TOKENS_BY_KIND", "code=300, markdown=400")
    monkeypatch.setenv("CTXR_FUSION_WEIGHTS", "dense=0.5,bm25=0.5")
    settings = load_settings()
    assert settings.split.chunk_tokens_by_kind == {"code": 300, "markdown": 400}
    assert settings.search.fusion_weights == {"dense": 0.5, "bm25": 0.5}
    assert (
        settings.split.chunk_tokens_for("code") == 300
        and settings.split.chunk_tokens_for("text") == 200
    )
    # From Python a mapping works too, and is checked as strictly as the text form.
    assert load_settings(chunk_tokens_by_kind={"pdf": 64}).split.chunk_tokens_by_kind == {"pdf": 64}
    with pytest.raises(ConfigError, match="CTXR_CHUNK_TOKENS_BY_KIND"):
        load_settings(chunk_tokens_by_kind={"pdf": 8})
    with pytest.raises(ConfigError, match="CTXR_FUSION_WEIGHTS"):
        load_settings(fusion_weights={"sparse": 1.0})
    monkeypatch.delenv("CTXR_FUSION_WEIGHTS")
    assert load_settings().search.fusion_weights == {"dense": 0.8, "bm25": 0.2}


def test_one_list_of_choices_for_cli_api_and_service() -> None:
    from ctxr.config import FUSIONS, RERANKERS, SEARCH_MODES
    from ctxr.retrieve.fusion import FUSERS

    assert set(FUSERS) == set(FUSIONS) == {"dbsf", "rrf", "weighted"}
    assert SEARCH_MODES == ("hybrid", "dense", "bm25")
    assert RERANKERS == ("llm", "http", "cross-encoder")


@pytest.mark.parametrize(
    ("overrides", "outline", "llm"),
    [
        ({}, "b54c15ea0a475413", "5fdd5823bc297e10"),
        ({"chunk_tokens_by_kind": "code=300,markdown=400"}, "dd0846b604a207fd", "0926b54f11ecfe76"),
        ({"chunking": "parent"}, "d2304f41f3cdad57", "a722b9cb419fbeae"),
    ],
)
def test_recipes_are_pinned_so_existing_indexes_stay_current(
    overrides: dict[str, Any], outline: str, llm: str
) -> None:
    # Every indexed document records its recipe; a change here re-indexes every user's corpus.
    # These values were computed before the layout changed and must never move with the code.
    # The outline ones moved twice, on purpose, and outline indexes re-embedded once each time:
    # outline/2 stopped naming a code file's language (better on the code set), outline/3
    # stopped saying a title the chunk opens with (better on the prose sets).
    from ctxr.enrich.situate.contexts import ContextPlan
    from ctxr.pipeline.recipe import document_recipe

    settings = load_settings(**overrides)
    assert document_recipe(settings, ContextPlan("outline"), "split") == outline
    plan = ContextPlan("llm", "anthropic", "claude-haiku-4-5")
    assert document_recipe(settings, plan, "split") == llm


def test_settings_come_in_typed_groups_under_their_flat_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXR_CHUNK_OVERLAP", "7")
    settings = Settings(chunk_tokens=300, fusion="rrf")
    assert isinstance(settings.split, SplitSettings) and isinstance(settings.search, SearchSettings)
    # A flat keyword lands in its group, and the group still reads the rest from the environment.
    assert (settings.split.chunk_tokens, settings.split.chunk_overlap) == (300, 7)
    assert settings.search.fusion == "rrf" and settings.search.rrf_k == 60
    assert set(GROUP_OF.values()) == set(GROUPS) and len(GROUP_OF) + 3 == len(setting_fields())


def test_replace_validates_changes_and_counts_them_as_set() -> None:
    settings = load_settings()
    changed = settings.replace(llm_concurrency="3", index_dir="elsewhere")
    assert changed.llm.llm_concurrency == 3 and changed.index_dir == Path("elsewhere")
    assert "llm_concurrency" in changed.llm.model_fields_set  # as a flag's value would be
    assert "llm_concurrency" not in settings.llm.model_fields_set  # the original is untouched
    assert changed.split is settings.split  # untouched groups are shared, not re-read
    with pytest.raises(ValidationError):
        settings.replace(chunk_tokens=3)
    with pytest.raises(ValueError, match="unknown setting chunk_size"):
        settings.replace(chunk_size=300)
