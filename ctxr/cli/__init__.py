"""The `ctxr` command line: parsing and printing only; the work lives in the library.

One module per command, registered lazily: `ctxr --help` and `ctxr search --help` import only
click, the settings and the command modules themselves (which import the library inside their
functions), never numpy, onnxruntime, Qdrant, tiktoken or an LLM SDK. Errors that ctxr raises
on purpose print one line (what, and the fix) and exit with status 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import click
from dotenv import load_dotenv

from ctxr.errors import CtxrError

# command name -> "module:attribute" of its click command, in the order `--help` lists them.
COMMANDS: dict[str, str] = {
    "index": "ctxr.cli.index:index_command",
    "estimate": "ctxr.cli.estimate:estimate_command",
    "search": "ctxr.cli.search:search_command",
    "serve": "ctxr.cli.serve:serve_command",
    "watch": "ctxr.cli.watch:watch_command",
    "doctor": "ctxr.cli.doctor:doctor_command",
    "mcp": "ctxr.cli.mcp:mcp_command",
    "split": "ctxr.cli.split:split_command",
    "eval": "ctxr.cli.eval:eval_command",
    "trial": "ctxr.cli.trial:trial_command",
}


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ctxr: %(message)s"))
    logger = logging.getLogger("ctxr")
    if not logger.handlers:
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)


class _Group(click.Group):
    """Loads each command on first use, and turns deliberate ctxr errors into one readable line
    instead of a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CtxrError as exc:
            from ctxr.cli.render import err_console

            # soft_wrap: the message is one line a user can copy, whatever the terminal width.
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            sys.exit(2)
        except KeyboardInterrupt:
            # Ctrl-C where a command has nothing of its own to say (`ctxr index` says what it
            # kept): one line and 128 + SIGINT, not click's "Aborted!" and status 1.
            from ctxr.cli.render import err_console

            err_console.print("interrupted (Ctrl-C)", highlight=False)
            sys.exit(130)


@click.group(cls=_Group)
@click.version_option(package_name="ctxr")
def main() -> None:
    """ctxr: contextual-retrieval indexing and hybrid (dense + BM25) search."""
    _setup_logging()
    # Provider keys and base URLs in ./.env reach the SDKs as if exported; real environment
    # variables win over the file.
    load_dotenv(dotenv_path=Path.cwd() / ".env", override=False)


if __name__ == "__main__":
    main()
