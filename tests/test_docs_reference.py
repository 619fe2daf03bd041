"""The generated reference pages name every command option and every setting: they are made
from the click commands and from `Settings` (docs/hooks/reference.py), so a new option or
`CTXR_*` variable is documented the moment it exists. Needs no MkDocs: the generator is
called directly."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import click
import pytest

from ctxr.cli import main
from ctxr.config import Settings, setting_fields
from tests.fixtures.paths import ROOT


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", ROOT / "docs/hooks/reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _every_command() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main, info_name="ctxr")
    found = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        assert command is not None
        found.append((name, command))
    return found


def test_every_option_of_every_command_is_in_the_cli_reference(reference: ModuleType) -> None:
    text = reference.cli_reference()
    for name, command in _every_command():
        assert f"## `ctxr {name}`" in text, name
        section = text.split(f"## `ctxr {name}`", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option):
                for flag in (*param.opts, *param.secondary_opts):
                    assert f"`{flag}`" in section, (name, flag)
            else:
                assert f"`{param.human_readable_name}`" in section, (name, param.name)


def _env_names() -> set[str]:
    prefix = str(Settings.model_config.get("env_prefix", "CTXR_"))
    names = {f"{prefix}{field}".upper() for field in setting_fields()}
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    return names | set(re.findall(r"^#?\s*(CTXR_[A-Z0-9_]+)=", example, flags=re.MULTILINE))


def test_every_setting_is_in_the_settings_reference(reference: ModuleType) -> None:
    text = reference.settings_reference()
    rows = [line for line in text.splitlines() if line.startswith("| `CTXR_")]
    documented = {re.match(r"\| `(CTXR_[A-Z0-9_]+)`", row).group(1) for row in rows}  # type: ignore[union-attr]
    assert _env_names() <= documented
    for row in rows:
        cells = [cell.strip() for cell in row.split(" | ")]
        assert len(cells) == 5 and all(cells), row  # type, default, what, impact: all said


def test_settings_reference_says_what_a_change_re_indexes(reference: ModuleType) -> None:
    text = reference.settings_reference()

    def impact(env: str) -> str:
        return next(line for line in text.splitlines() if line.startswith(f"| `{env}`"))

    assert "recipe" in impact("CTXR_CHUNK_TOKENS")  # read by the document recipe
    assert "--rebuild" in impact("CTXR_BM25_K1")  # recorded in the manifest
    assert "--rebuild" in impact("CTXR_EMBEDDER")
    assert "nothing" in impact("CTXR_FUSION")  # a search setting
    assert "`200`" in impact("CTXR_CHUNK_TOKENS")  # the default, from the class


def test_env_example_comments_are_read_per_variable(reference: ModuleType) -> None:
    comments = reference.env_comments()
    assert comments["CTXR_RRF_K"].startswith("Reciprocal rank fusion constant")
    # A run of variables shares the comment above it.
    assert comments["CTXR_LLM_INPUT_TOKENS_PER_MINUTE"] == comments["CTXR_LLM_REQUESTS_PER_MINUTE"]


def test_the_hook_fills_the_markers(reference: ModuleType) -> None:
    page = "# CLI\n\n<!-- ctxr:cli -->\n\n# Settings\n\n<!-- ctxr:settings -->\n"
    filled = reference.on_page_markdown(page)
    assert "<!-- ctxr:" not in filled
    assert "## `ctxr search`" in filled and "`CTXR_INDEX_DIR`" in filled
