"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

index_option = click.option(
    "--index", "index_dir", type=click.Path(path_type=Path), help="index directory [./.ctxr]"
)
