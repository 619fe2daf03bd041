"""`ctxr doctor`: check an index's store against its manifest; `--repair` keeps what is sound."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ctxr.cli.options import index_option
from ctxr.config import load_settings

DAMAGED = 1  # exit status when damage was found and left as it is


@click.command("doctor")
@index_option
@click.option("--repair", is_flag=True, help="delete damaged points; set aside an unreadable shard")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def doctor_command(index_dir: Path | None, repair: bool, as_json: bool) -> None:
    """Read every point of the index back and compare it with the manifest.

    Exit status: 0 sound (or repaired); 1 damaged, not repaired; 2 an error (no index, in use,
    a disk that is full or read-only: that is not damage, and nothing is set aside).
    After a repair, `ctxr index` the same paths again: only what was dropped is redone, with
    contexts and embeddings from the caches."""
    from rich.console import Console

    from ctxr.pipeline.doctor import run_doctor

    console = Console()

    settings = load_settings(index_dir=index_dir)
    report = run_doctor(settings, repair=repair)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console.print(
            f"{report.index_dir}: {report.points_read:,} of {report.points_stored:,} points read, "
            f"manifest {report.manifest_chunks:,} chunks in {report.manifest_documents:,} "
            "documents", highlight=False, soft_wrap=True,
        )  # fmt: skip
        if report.leftover_points:
            console.print(f"  {report.leftover_points} points of documents the manifest does not "
                          "hold (a killed run's; the next `ctxr index` or --repair removes them)",
                          highlight=False, soft_wrap=True)  # fmt: skip
        for problem in report.problems:
            console.print(f"  damaged: {problem}", highlight=False, soft_wrap=True)
        for done in report.repaired:
            console.print(f"  repaired: {done}", highlight=False, soft_wrap=True)
        if report.dropped_sources:
            dropped = report.dropped_sources
            shown = " ".join(dropped[:5])
            more = f" (+{len(dropped) - 5} more)" if len(dropped) > 5 else ""
            console.print(
                f"  {len(report.dropped_sources)} documents to index again: `ctxr index` the "
                f"paths you indexed, e.g. {shown}{more}", highlight=False, soft_wrap=True,
            )  # fmt: skip
        if report.sound and not report.problems:
            console.print("  sound", highlight=False)
        elif not report.sound:
            console.print("  run `ctxr doctor --repair` to repair, or `ctxr index --rebuild`",
                          highlight=False)  # fmt: skip
    if not report.sound:
        sys.exit(DAMAGED)
