"""What the optional faces cost to load: cold import time of each, side by side in one run.

Each import runs in a fresh interpreter, rounds interleaved so machine load hits all alike;
the median of `--rounds` is reported, with each as a multiple of a bare interpreter's start
and of `import ctxr.retrieve.service` (what a search already loads). The load average is
printed with the figures. Install sizes come from `pip` (see docs/explanation/dependencies.md).

    python -m bench.speed.import_cost --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

TARGETS = {
    "python (nothing)": "pass",
    "ctxr.retrieve.service": "import ctxr.retrieve.service",
    "ctxr.api.mcp (mcp SDK)": "import ctxr.api.mcp",
    "ctxr.api.app (FastAPI)": "import ctxr.api.app",
    "ctxr.integrations.langchain": "import ctxr.integrations.langchain",
    "ctxr.integrations.llama_index": "import ctxr.integrations.llama_index",
}


def _once(code: str) -> float | None:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True)
    return time.perf_counter() - started if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in TARGETS}
    for _ in range(args.rounds):
        for name, code in TARGETS.items():
            took = _once(code)
            if took is not None:
                times[name].append(took)
    base = statistics.median(times["python (nothing)"])
    search = statistics.median(times["ctxr.retrieve.service"])
    print(f"load average {os.getloadavg()[0]:.2f}, {args.rounds} rounds, median seconds")
    for name, took in times.items():
        if not took:
            print(f"{name:34} not installed")
            continue
        med = statistics.median(took)
        print(f"{name:34} {med:6.2f} s  {med / base:5.1f}x python  {med / search:4.2f}x search")


if __name__ == "__main__":
    main()
