"""`ctxr --help` and a command's `--help` load none of the heavy parts of the library."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from ctxr.cli import COMMANDS, main

HEAVY = ("numpy", "onnxruntime", "qdrant_edge", "tiktoken", "anthropic", "openai")

_PROBE = """
import json, sys
from ctxr.cli import main
try:
    main(sys.argv[1:], prog_name="ctxr")
except SystemExit:
    pass
heavy = {heavy!r}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


@pytest.mark.parametrize(
    "argv", [["--help"], ["search", "--help"], ["index", "--help"], ["trial", "--help"]]
)
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    # A fresh interpreter: the test process itself has long imported everything.
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    *help_lines, loaded = done.stdout.strip().splitlines()
    assert json.loads(loaded) == []
    assert "Usage: ctxr" in "\n".join(help_lines)


def test_every_registered_command_loads() -> None:
    ctx = click.Context(main)
    assert main.list_commands(ctx) == list(COMMANDS)
    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
    assert main.get_command(ctx, "nope") is None
