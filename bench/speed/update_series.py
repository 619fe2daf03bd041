"""A series of updates to kept indexes, side by side: what each update costs, and what the
segments it leaves behind are.

`bench.speed.scale` measures one update of 1% of the files against the build. A user's index
is updated again and again, and what one update leaves (a small segment of its own) is what
the next one merges with. This takes one or more work directories that `bench.speed.scale
--keep DIR` built (copies of one build, ``cp -a``, so each starts from the same index) and runs
``--updates`` rounds; in each round every directory in turn has the same 1% of its files
edited (`bench.common.markdown_corpus.edit`, the directory's next round) and is updated by
ctxr's own pipeline in a child process (`bench.common.pool_build.run_build`, as scale's
update is), so the directories are measured interleaved under the same load.

``--env DIR:NAME=VALUE`` gives one directory's updates a setting (``CTXR_*``). To set two
versions of ctxr side by side, run ``--updates 1`` round by round, each directory from its own
checkout (docs/explanation/benchmarks.md, "Updates to an index of 100,000 chunks").

Printed per update: seconds, of them ``optimize`` (the HNSW builds and merges Qdrant runs at
the end of the run), the share of the build's seconds (the goal: 2% or less), and the shard's
segments afterwards (how many, and their sizes on disk, largest first). Searches over the
copies afterwards: `bench.speed.search_stages --keep A --against B`.

Usage::

    python -m bench.speed.scale --chunks 100000 --keep /tmp/u100k --no-update
    cp -a /tmp/u100k /tmp/u100k-b
    python -m bench.speed.update_series --work /tmp/u100k --work /tmp/u100k-b \\
        [--env /tmp/u100k-b:CTXR_SEGMENT_POINTS=50000] [--updates 8] [--update-share 0.01]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import markdown_corpus
from bench.common.checkout import forget_settings
from bench.common.measure import disk_bytes, load_line, machine, say
from bench.common.measure import parser as cli
from bench.common.pool_build import CORPUS, INDEX, STATE, run_build
from ctxr.index.store.edge import SHARD_DIR


def segments_mib(work: Path) -> list[float]:
    """The shard's segments' sizes on disk, MiB, largest first."""
    root = work / INDEX / SHARD_DIR / "segments"
    sizes = [disk_bytes(path) / 2**20 for path in root.iterdir() if path.is_dir()]
    return sorted(sizes, reverse=True)


def update_once(work: Path, share: float, env: dict[str, str]) -> dict[str, Any]:
    """Edit the directory's next round of files and update its index; the run's report."""
    state: dict[str, Any] = json.loads((work / STATE).read_text())
    corpus = markdown_corpus.corpus(work / CORPUS, state["chunks"], state["seed"])
    state["rounds"] += 1
    edited = markdown_corpus.edit(corpus, share, state["rounds"])
    (work / STATE).write_text(json.dumps(state))
    quantization = state["build"].get("quantization", "int8")
    report = run_build(work, state["seed"], quantization, env=env)
    report["round"], report["edited"] = state["rounds"], len(edited)
    report["share"] = report["seconds"] / state["build"]["seconds"]
    return report


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--work", type=Path, action="append", required=True,
                        help="a work dir `bench.speed.scale --keep` built; repeatable")  # fmt: skip
    parser.add_argument("--env", action="append", default=[], help="DIR:NAME=VALUE, repeatable")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--update-share", type=float, default=0.01, help="files edited")
    args = parser.parse_args(argv)
    envs: dict[Path, dict[str, str]] = {work: {} for work in args.work}
    for item in args.env:
        where, _, pair = item.partition(":")
        name, _, value = pair.partition("=")
        if Path(where) not in envs or not name.startswith("CTXR_"):
            parser.error(f"--env {item}: say DIR:CTXR_NAME=VALUE for one of the --work dirs")
        envs[Path(where)][name] = value
    forget_settings()
    for work in args.work:
        if not (work / STATE).exists():
            parser.error(f"{work} holds no kept run; build one with bench.speed.scale --keep")
    say(f"a series of updates; {machine()}")
    say(load_line("at start"))
    for work in args.work:
        build = json.loads((work / STATE).read_text())["build"]
        settings = envs[work] or "the defaults"
        say(f"{work}: built in {build['seconds']:.1f} s, {build['points_total']:,} points, "
            f"segments (MiB) {_sizes(segments_mib(work))}; updated with {settings}")  # fmt: skip
    for _ in range(args.updates):
        for work in args.work:
            report = update_once(work, args.update_share, envs[work])
            say(
                f"{work} update {report['round']}: {report['edited']:,} files, "
                f"{report['seconds']:.1f} s = {100 * report['share']:.2f}% of the build, "
                f"optimize {report['optimize_seconds']:.1f} s; "
                f"segments (MiB) {_sizes(segments_mib(work))}"
            )
    say(load_line("at end"))


def _sizes(sizes: list[float]) -> str:
    return f"{len(sizes)}: " + ", ".join(f"{size:,.0f}" for size in sizes)


if __name__ == "__main__":
    main()
