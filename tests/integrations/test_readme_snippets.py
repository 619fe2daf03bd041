"""The README's framework snippets, run exactly as written against the examples index.

Each ```python block of the README's "Agents and frameworks" section is executed in a folder
whose `.ctxr` is the examples index, so what a newcomer copies is what CI ran."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT


def _snippets() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Agents and frameworks", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_shows_one_snippet_per_framework() -> None:
    snippets = _snippets()
    assert len(snippets) == 2
    assert "ctxr.integrations.langchain" in snippets[0]
    assert "ctxr.integrations.llama_index" in snippets[1]


@pytest.mark.parametrize(
    ("position", "framework"), [(0, "langchain_core"), (1, "llama_index.core")]
)
def test_a_readme_snippet_runs_as_written(
    position: int, framework: str, examples_index: BuiltIndex, tmp_path: Path
) -> None:
    pytest.importorskip(framework, reason=f"{framework} is not installed (a framework extra)")
    shutil.copytree(examples_index.index_dir, tmp_path / ".ctxr")
    printed = io.StringIO()
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(printed):
            namespace: dict[str, object] = {}
            exec(compile(_snippets()[position], "README.md", "exec"), namespace)
        retriever = namespace["retriever"]
        close = getattr(retriever, "close", None)
        if callable(close):
            close()
    finally:
        os.chdir(before)
    # Every snippet prints the source of its best hit: the backup guide, as the quickstart says.
    assert "backup-restore.md" in printed.getvalue()
    if position == 0:
        assert len(namespace["docs"]) == 5 and len(namespace["top"]) == 1  # type: ignore[arg-type]
