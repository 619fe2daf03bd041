"""`ctxr index`: files and folders into the hybrid index (or, with --dry-run, its cost)."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path
from typing import get_args

import click
from click.core import ParameterSource

from ctxr.cli.options import flags_for, follow_links_option, index_option
from ctxr.config import CHUNKINGS, CONTEXT_MODES, load_settings
from ctxr.types import NonDocument

# Exit status when some files could not be loaded and everything else was indexed.
PARTIAL = 3
# Exit status after Ctrl-C: 128 + SIGINT, as a shell reports a process that SIGINT stopped.
INTERRUPTED = 130


@click.command("index")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@index_option
@click.option("--rebuild", is_flag=True, help="delete the index and build it anew")
@click.option("--prune/--no-prune", default=True, help="remove documents deleted from a folder")
@click.option("--context", type=click.Choice(CONTEXT_MODES), default=None)
@click.option("--chunk-tokens", type=int, default=None, help="chunk budget in tokens")
@click.option(
    "--chunking",
    type=click.Choice(CHUNKINGS),
    default=None,
    help="structure, semantic (topic breakpoints) or parent (parent-child) [CTXR_CHUNKING]",
)
@click.option(
    "--strict", is_flag=True, help=f"exit 1, not {PARTIAL}, if any file could not be loaded"
)
@click.option(
    "--batch",
    is_flag=True,
    default=None,
    help="LLM contexts through the provider's batch API: half price, within 24 h, resumable "
    "[CTXR_LLM_BATCH]",
)
@click.option(
    "--include",
    "include",
    multiple=True,
    type=click.Choice(get_args(NonDocument)),
    help="also index this kind of non-document text (repeatable) [CTXR_INCLUDE]",
)
@follow_links_option
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="list every skipped path and why; show the embedded word pieces per document one",
)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--dry-run", is_flag=True, help="only estimate the cost; write nothing")
def index_command(
    paths: tuple[Path, ...],
    index_dir: Path | None,
    rebuild: bool,
    prune: bool,
    context: str | None,
    chunk_tokens: int | None,
    chunking: str | None,
    strict: bool,
    batch: bool | None,
    include: tuple[str, ...],
    follow_links: bool | None,
    verbose: bool,
    as_json: bool,
    dry_run: bool,
) -> None:
    """Index files and folders (Markdown, code, text) into a hybrid search index.

    Exit status: 0 all indexed; 3 some files could not be loaded (listed; the rest is indexed);
    1 some LLM contexts failed, or most answers were no context (outline contexts in their
    place, asked again by the next run), or --strict and a file failed;
    2 an error (a bad setting, an index in use) before anything was indexed."""
    from ctxr.cli import render
    from ctxr.cli.progress import RichProgress
    from ctxr.enrich.situate.contexts import resolve_context
    from ctxr.pipeline.build import build_index
    from ctxr.pipeline.report import IndexInterrupted
    from ctxr.progress import NullProgress, Progress

    settings = load_settings(
        flags=flags_for("index_dir", "context", "chunk_tokens", "chunking", "llm_batch", "include"),
        index_dir=index_dir,
        context=context,
        chunk_tokens=chunk_tokens,
        chunking=chunking,
        llm_batch=batch,
        include=list(include) or None,
        follow_links=follow_links,
    )
    plan = resolve_context(settings.llm)
    if plan.kind == "llm" and not dry_run:
        logging.getLogger("ctxr").info(f"contexts written by {plan.provider} {plan.model}")
    elif settings.llm.context == "auto":
        logging.getLogger("ctxr").info(
            "no LLM provider configured (ANTHROPIC_API_KEY, OPENAI_API_KEY or their *_BASE_URL): "
            "chunks get outline contexts (title, path, headings)"
        )
    if dry_run:
        from ctxr.pipeline.estimate import estimate_paths

        models = [plan.model] if plan.kind == "llm" and plan.model else []
        result = estimate_paths(paths, settings, models=models, ignore_manifest=rebuild)
        render.print_estimate(result, as_json, verbose)
        return
    bar: Progress = NullProgress() if as_json else RichProgress(render.err_console)
    try:
        if isinstance(bar, RichProgress):
            with bar:
                report = build_index(paths, settings, rebuild=rebuild, prune=prune, progress=bar)
        else:
            report = build_index(paths, settings, rebuild=rebuild, prune=prune, progress=bar)
    except IndexInterrupted as stopped:
        if as_json:
            click.echo(json.dumps(stopped.report.to_json(), indent=2))
        render.print_interrupted(stopped.report, resume_command(click.get_current_context()))
        sys.exit(INTERRUPTED)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        render.print_index_summary(report, verbose)
    if report.contexts and report.contexts.unusable:
        # A server answering with no contexts (empty, runaway, ids echoed) is a failed run,
        # said on stderr in --json mode too.
        render.err_console.print(
            f"error: {report.contexts.unusable_notice()}", markup=False, highlight=False
        )
    if report.contexts and (report.contexts.failures or report.contexts.unusable):
        sys.exit(1)  # some chunks have outline contexts in place of failed LLM ones
    if report.failed:
        # Everything else is indexed: a distinct status, as rsync's "partial transfer", so a
        # script can tell it from success and from an error; --strict makes it an error.
        sys.exit(1 if strict else PARTIAL)


def resume_command(ctx: click.Context) -> str:
    """The command that carries on after an interrupted `ctxr index`: the same paths and options
    as given, without --rebuild (which would delete what the interrupted run kept)."""
    words = ["ctxr", "index"]
    for param in ctx.command.params:
        name = param.name
        if name is None or name == "rebuild":
            continue
        if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        value = ctx.params[name]
        if isinstance(param, click.Argument):
            words += [str(v) for v in value]
            continue
        assert isinstance(param, click.Option)
        flag = max(param.opts, key=len)
        if param.is_flag and param.secondary_opts and not value:
            words.append(max(param.secondary_opts, key=len))
        elif param.is_flag:
            words += [flag] if value else []
        elif param.multiple:
            for item in value:
                words += [flag, str(item)]
        else:
            words += [flag, str(value)]
    return shlex.join(words)
