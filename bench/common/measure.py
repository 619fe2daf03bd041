"""Time, peak memory, the machine's load and side-by-side ratios, measured one way for every
benchmark.

Time
    `Span` is one ``time.perf_counter`` interval. `time_each` calls a function once per item
    after untimed warm-up calls and returns the `Timing` of the calls with their results.
    `Timing` summarises spans in milliseconds: the median, nearest-rank percentiles (the
    sorted sample at rank ``round(q * (n - 1))``, a value that was measured, never an
    interpolation between two) and the mean.

Peak memory
    `peak_mib` is the high-water mark of the process's resident memory, ``VmHWM`` in
    ``/proc/self/status``, read by the process that is measured. A child process reports its
    own at exit (`report_peak_at_exit`, which `run_child` installs) and the parent reads that
    line, so in-process and subprocess figures are the same quantity.

    Why not ``getrusage().ru_maxrss``: Linux carries ``ru_maxrss`` across ``exec``, so a
    child's figure starts from its spawner's. Python's ``subprocess`` starts a child with
    ``vfork`` and ``exec``, and the figure it inherits is the parent's own peak: a parent that
    had touched 600 MB saw ``python -c pass`` peak at 611 MB by ``ru_maxrss`` (the child's
    own, ``os.wait4``'s and ``RUSAGE_CHILDREN`` alike) and at 10 MB by ``VmHWM``. ``VmHWM``
    belongs to the address space, which ``exec`` replaces, so it counts only what the measured
    program touched. Why not sample ``VmRSS`` from outside: a sampler misses a peak that falls
    between two samples. Why not ``tracemalloc``: it sees Python's allocator only, not
    onnxruntime's, numpy's or Qdrant's. Without ``/proc`` (not Linux) the figures are NaN.

    A process that is not this one (a server started as a child and still running) is read
    from outside by `peak_mib_of`: the same kernel figure, ``VmHWM`` in ``/proc/PID/status``,
    not a sample.

Disk
    `disk_bytes` is what a directory takes on disk, as ``du`` counts it: allocated blocks, not
    apparent sizes (Qdrant preallocates sparse memory-mapped files).

Load
    `load_line` is the line every benchmark prints before and after it measures: the 1, 5 and
    15 minute load averages (``os.getloadavg``) beside the cores this process may use, since
    most figures here come from cores shared with other work. `machine` names the rest.

Side by side
    `turns` interleaves the runs of several things (one of each per turn, so a slow spell of
    a shared machine hits all alike); `ratio_table` prints each thing's samples, median and
    median over a base's median.

Command line
    `parser` is every benchmark's argument parser: the module's docstring is its help.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bench.common.checkout import child_env

T = TypeVar("T")
R = TypeVar("R")

#: The line a child writes to stderr at exit: ``bench-peak-mib 512.3``.
PEAK_MARK = "bench-peak-mib"
MIB = 1024  # /proc/self/status counts kB (KiB)


# --- time -------------------------------------------------------------------------------------


class Span:
    """One ``perf_counter`` interval: ``with Span() as span: ...``, then ``span.seconds``.

    Read while open (or without ``with``, from its creation), ``seconds`` is the time so far:
    the clock of a loop that runs until a deadline."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ended: float | None = None

    def __enter__(self) -> Span:
        self.started, self.ended = time.perf_counter(), None
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = time.perf_counter()

    @property
    def seconds(self) -> float:
        end = time.perf_counter() if self.ended is None else self.ended
        return end - self.started


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile (0 <= q <= 1) of `values`: a sample, not an interpolation;
    NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Timing:
    """Spans summarised in milliseconds."""

    count: int
    p50: float  # the median
    p90: float
    p95: float
    p99: float
    mean: float
    max: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Timing:
        ms = [s * 1000.0 for s in seconds]
        if not ms:
            return cls(0, *(math.nan,) * 6)
        return cls(
            count=len(ms),
            p50=statistics.median(ms),
            p90=percentile(ms, 0.90),
            p95=percentile(ms, 0.95),
            p99=percentile(ms, 0.99),
            mean=statistics.fmean(ms),
            max=max(ms),
        )


def time_each(
    call: Callable[[T], R], items: Iterable[T], warm: Iterable[T] = ()
) -> tuple[Timing, list[R]]:
    """`call` once per item of `warm`, untimed (caches, page faults, lazy loads), then once per
    item of `items`, each call timed alone; their `Timing` and results, in order."""
    for item in warm:
        call(item)
    seconds: list[float] = []
    results: list[R] = []
    for item in items:
        started = time.perf_counter()
        results.append(call(item))
        seconds.append(time.perf_counter() - started)
    return Timing.of(seconds), results


# --- peak memory ------------------------------------------------------------------------------


def status_mib(field: str, pid: int | str = "self") -> float:
    """A figure of ``/proc/PID/status`` (kB there) in MiB, `field` with its colon
    (``"RssAnon:"``); NaN when the process is gone (or without ``/proc``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) / MIB
    except OSError:
        pass
    return math.nan


def peak_mib() -> float:
    """This process's peak resident memory (``VmHWM``) in MiB, since it started; see the
    module's docstring for why this and not ``ru_maxrss``."""
    return status_mib("VmHWM:")


def peak_mib_of(pid: int) -> float:
    """Process `pid`'s peak resident memory (``VmHWM``) in MiB, read while it runs; NaN when
    it is gone (or without ``/proc``)."""
    return status_mib("VmHWM:", pid)


def rss_mib() -> float:
    """This process's resident memory now (``VmRSS``) in MiB."""
    return status_mib("VmRSS:")


def report_peak_at_exit() -> None:
    """At exit (a normal one or ``sys.exit``), write ``PEAK_MARK <MiB>`` to stderr: how a child
    tells its parent its own peak."""
    atexit.register(lambda: print(PEAK_MARK, f"{peak_mib():.1f}", file=sys.stderr, flush=True))


@dataclass(frozen=True)
class ChildRun:
    """A finished child process: its output, wall seconds, own peak RSS and exit code."""

    stdout: str
    stderr: str
    seconds: float
    peak_mib: float
    returncode: int


_PREAMBLE = "from bench.common.measure import report_peak_at_exit; report_peak_at_exit()\n"


def run_child(
    code: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    ok: Container[int] = (0,),
) -> ChildRun:
    """Run `code` in a fresh interpreter (``python -c code args...``) that imports this
    checkout (`checkout.child_env`, plus `env`) and reports its own peak RSS at exit.

    An exit code outside `ok` stops the benchmark with the code's first line and the end of
    its stderr."""
    with Span() as span:
        done = subprocess.run(
            [sys.executable, "-c", _PREAMBLE + code, *args],
            capture_output=True,
            text=True,
            env=child_env(env),
        )
    if done.returncode not in ok:
        first = code.strip().splitlines()[0]
        raise SystemExit(
            f"child `{first}` {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}"
        )
    marks = [line.split()[1] for line in done.stderr.splitlines() if line.startswith(PEAK_MARK)]
    peak = float(marks[-1]) if marks else math.nan  # none: killed before its exit handlers ran
    return ChildRun(done.stdout, done.stderr, span.seconds, peak, done.returncode)


def cold_start(code: str) -> float | None:
    """Wall seconds of a fresh interpreter running `code` (``python -c``, this checkout first
    on its path, nothing of bench's imported: what a user's first import costs); None when it
    fails, as an import of a package that is not installed does."""
    with Span() as span:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=child_env())
    return span.seconds if done.returncode == 0 else None


# --- disk -------------------------------------------------------------------------------------


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under `path` (like ``du``): Qdrant preallocates sparse mmap
    files, whose apparent size overstates what they take."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


# --- load and machine -------------------------------------------------------------------------


def cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def machine() -> str:
    """``2 cores, x86_64, Python 3.11.7``."""
    return f"{cores()} cores, {platform.machine()}, Python {platform.python_version()}"


def load_line(when: str) -> str:
    """``# load average 1.52 1.31 1.20 (1, 5, 15 min; 2 cores) at start``."""
    averages = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"# load average {averages} (1, 5, 15 min; {cores()} cores) {when}"


def say(line: str = "") -> None:
    """Print a line at once (a benchmark's output is often read while it runs)."""
    print(line, flush=True)


# --- side by side -----------------------------------------------------------------------------


def turns(names: Sequence[str], count: int, *, rotate: bool = False) -> Iterator[tuple[int, str]]:
    """``(turn, name)`` for `count` turns of one run of each name, in order; with `rotate`, turn
    t starts at name t (mod the number of names), so each goes first in turn."""
    for turn in range(count):
        start = turn % len(names) if rotate else 0
        for name in [*names[start:], *names[:start]]:
            yield turn, name


def ratio_table(
    samples: Mapping[str, Sequence[float]], *bases: str, unit: str = "s", digits: int = 2
) -> list[str]:
    """Markdown rows: each thing's samples, their median, and that median over each base's
    median (``x`` ratios); a thing with no samples shows dashes."""
    medians = {name: statistics.median(v) if v else math.nan for name, v in samples.items()}
    head = f"| | samples ({unit}) | median ({unit}) |" + "".join(f" / {b} |" for b in bases)
    lines = [head, "|---|---|---:|" + "---:|" * len(bases)]
    for name, values in samples.items():
        if not values:
            lines.append(f"| {name} | not measured | - |" + " - |" * len(bases))
            continue
        cells = ", ".join(f"{v:.{digits}f}" for v in values)
        ratios = "".join(f" {medians[name] / medians[b]:.3f}x |" for b in bases)
        lines.append(f"| {name} | {cells} | {medians[name]:.{digits}f} |{ratios}")
    return lines


# --- command line -----------------------------------------------------------------------------


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's argument parser: the first paragraph of its docstring (`doc`) describes it,
    the rest is printed as written after the options, and the program is named as it is run
    (``python -m bench.speed.search_latency``)."""
    head, _, rest = (doc or "").strip().partition("\n\n")
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return argparse.ArgumentParser(
        prog=f"python -m {spec.name}" if spec is not None else None,
        description=head,
        epilog=rest or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def drop_cached_pages(index_dir: Path) -> None:
    """Ask the kernel to drop the clean cached pages of every file under `index_dir`."""
    for path in index_dir.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
