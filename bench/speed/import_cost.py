"""What the optional faces cost to load: cold import time of each, side by side in one run.

Each import runs in a fresh interpreter, rounds interleaved so machine load hits all alike;
the median of `--rounds` is reported, with each as a multiple of a bare interpreter's start
and of `import ctxr.retrieve.service` (what a search already loads). The load average is
printed with the figures. Install sizes come from `pip` (see docs/explanation/dependencies.md).

    python -m bench.speed.import_cost --rounds 5
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.common.measure import cold_start, load_line, ratio_table, say, turns
from bench.common.measure import parser as cli

TARGETS = {
    "python (nothing)": "pass",
    "ctxr.retrieve.service": "import ctxr.retrieve.service",
    "ctxr.api.mcp (mcp SDK)": "import ctxr.api.mcp",
    "ctxr.api.app (FastAPI)": "import ctxr.api.app",
    "ctxr.integrations.langchain": "import ctxr.integrations.langchain",
    "ctxr.integrations.llama_index": "import ctxr.integrations.llama_index",
}


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    say(load_line(f"at start; {args.rounds} rounds"))
    times: dict[str, list[float]] = {name: [] for name in TARGETS}
    for _, name in turns(list(TARGETS), args.rounds):
        took = cold_start(TARGETS[name])
        if took is not None:  # not installed: the row says "not measured"
            times[name].append(took)
    for line in ratio_table(times, "python (nothing)", "ctxr.retrieve.service"):
        say(line)
    say(load_line("at end"))


if __name__ == "__main__":
    main()
