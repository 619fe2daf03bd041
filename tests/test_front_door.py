"""What a newcomer meets first: the README's promised commands, `ctxr --version`, and the
result and summary tables read at 80 columns through the real `ctxr` entry point (a
subprocess, so that the terminal width is the one a person's shell would give)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ctxr
from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

CTXR = Path(sys.executable).parent / "ctxr"
QUICKSTART = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/ctxr index examples/ "
    '&& .venv/bin/ctxr search "how do I restore a backup?"'
)
TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/ruff check . "
    "&& .venv/bin/mypy && .venv/bin/lint-imports && .venv/bin/python -m pytest"
)
RATIO_ROW = "embedded per document word piece"


def _run(args: list[str], cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "CTXR_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    return subprocess.run(
        [str(CTXR), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_readme_is_short_and_keeps_the_two_promised_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert QUICKSTART in readme
    assert TESTS in readme
    # CI runs the same test command, one step a line.
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for step in TESTS.split(" && ")[2:]:
        assert step in ci.splitlines(), step


def test_version_has_one_source() -> None:
    result = subprocess.run([str(CTXR), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert ctxr.__version__ in result.stdout
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{ctxr.__version__}] - " in changelog


def test_search_table_at_80_columns_keeps_paths_whole(examples_index: BuiltIndex) -> None:
    result = _run(
        ["search", "how do I restore a backup?", "--index", str(examples_index.index_dir)],
        ROOT,
        examples_index.cache_dir,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    # A path is folded after a separator, never inside a name: each line of the source
    # column ends a directory or holds the whole file name.
    assert re.search(r"│ (examples/)?(docs/)?backup-restore\.md\s+│", result.stdout), result.stdout
    assert "backup-r " not in result.stdout and "backup-r│" not in result.stdout


@pytest.mark.slow
def test_index_summary_at_80_columns(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "lighthouse.md").write_text(
        "# Lighthouse\n\n## Lamp\n\nThe keeper trims the wick at dusk.\n", encoding="utf-8"
    )
    index_dir = tmp_path / "a-rather-long-directory-name" / "another-long-folder" / "index-dir"
    cache = tmp_path / "cache"
    plain = _run(["index", "corpus", "--index", str(index_dir)], tmp_path, cache)
    assert plain.returncode == 0, plain.stderr
    table = [line for line in plain.stderr.splitlines() if line[:1] in "┌│└"]
    assert table and all(len(line) <= 80 for line in table), plain.stderr
    assert RATIO_ROW not in plain.stderr
    for name in ("a-rather-long-directory-name/", "another-long-folder/", "index-dir"):
        assert name in plain.stderr, plain.stderr  # folded at separators, each name whole

    verbose = _run(["index", "corpus", "--index", str(index_dir), "--rebuild", "-v"], tmp_path,
                   cache)  # fmt: skip
    assert verbose.returncode == 0, verbose.stderr
    assert RATIO_ROW in verbose.stderr

    as_json = _run(["index", "corpus", "--index", str(index_dir), "--rebuild", "--json"],
                   tmp_path, cache)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    assert "markdown" in json.loads(as_json.stdout)["amplification"]
