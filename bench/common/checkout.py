"""The checkout the benchmarks run from: its paths, its evaluation data, and child processes
that run this checkout's ctxr.

Benchmarks run as modules from the repository root (``python -m bench.speed.api_load``), so
the interpreter imports this checkout's ``ctxr``, not whichever copy the environment installed.
A child process must do the same: `child_env` puts the repository root first on
``PYTHONPATH``, and `CTXR` runs the CLI through ``python -c`` rather than the ``ctxr`` script
beside the interpreter (that script imports the installed copy).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
EXAMPLES = REPO / "examples"

#: The CLI as ``python -c`` code: its arguments follow the code.
CTXR_CODE = "import sys; from ctxr.cli import main; sys.argv[0] = 'ctxr'; main()"
#: `ctxr` in a fresh interpreter: ``[*CTXR, "index", "docs"]`` runs ``ctxr index docs``.
CTXR: tuple[str, ...] = (sys.executable, "-c", CTXR_CODE)


#: Settings and keys a benchmark of the defaults must not inherit from the shell.
NOT_INHERITED = ("CTXR_", "ANTHROPIC_", "OPENAI_")


def forget_settings() -> None:
    """Drop `NOT_INHERITED` variables from this process and so its children: the defaults are
    measured, and no key turns outline contexts into paid calls."""
    for name in [n for n in os.environ if n.startswith(NOT_INHERITED)]:
        del os.environ[name]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment with `extra`, and the repository root first on ``PYTHONPATH``."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def data_dir(name: str) -> Path:
    """A set of the evaluation data (``anthropic-codebase``, ``scifact``), found as ``ctxr eval``
    finds it: ``CTXR_DATA_DIR``, else the nearest ``shared/data`` above the checkout."""
    from ctxr.eval.datasets import default_data_dir  # ctxr only when a benchmark needs data

    return default_data_dir() / name
