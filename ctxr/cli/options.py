"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

index_option = click.option(
    "--index", "index_dir", type=click.Path(path_type=Path), help="index directory [./.ctxr]"
)

# None when not given: CTXR_FOLLOW_LINKS (default false) decides.
follow_links_option = click.option(
    "--follow-links",
    is_flag=True,
    default=None,
    help="follow links that lead outside the indexed folders (skipped otherwise) "
    "[CTXR_FOLLOW_LINKS]",
)

# The flag that sets each setting, where its name is not the setting's own (`--rrf-k` for
# rrf_k is found by rule): a bad value is then reported under the flag the user typed.
FLAGS = {"index_dir": "--index", "llm_batch": "--batch"}


def flags_for(*settings: str, **renamed: str) -> dict[str, str]:
    """Setting -> flag for the settings a command takes from flags; `renamed` for a command
    whose flag has another name (`ctxr split --max-tokens` sets chunk_tokens)."""
    names = {name: FLAGS.get(name, "--" + name.replace("_", "-")) for name in settings}
    return names | renamed


# `ctxr serve` and `ctxr mcp --http`: repeatable, each flag names one; given, they replace
# CTXR_API_ALLOWED_HOSTS.
allowed_host_option = click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="a Host name to answer besides localhost and IP addresses (repeatable; * = any); "
    "default CTXR_API_ALLOWED_HOSTS",
)
