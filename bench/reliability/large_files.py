"""Large and pathological files: time and peak RSS per MB against plain prose of the same size.

An attack on `ctxr index` found a 50k-row Markdown table (2.3 MB) running 22 minutes and
1.6 GB with nothing saved along the way, 100k nested `<div>`s taking 97 s to split, and a 200 MB
text file not finishing in 300 s. This measures the shapes side by side, each in its own process
(peak RSS is that process's `ru_maxrss`), in two parts:

1. prepare: load, split with the run's chunker (capped to MiniLM's tokenizer, as `ctxr index`
   does) and BM25-analyse every chunk; no embedding. Each shape at two sizes, so the ratio of
   the two times says whether the work grows linearly (ratio ~2 for twice the size).
2. index: the whole `ctxr index` (real MiniLM embedder, outline contexts) on a smaller file
   of each shape, for seconds and MB of RSS per MB and per chunk. Embedding is the cost here
   (97% of index time, FIELD-NOTES), so this part is scaled down to stay under a few minutes.

Shapes: `table` (a Markdown table of 4 columns, ~46 bytes a row: 50k rows is the issue's 2.3
MB), `prose` (Markdown sections of generated English-like prose), `text` (the same prose as a
`.txt` file, no headings), `divs` (N nested `<div>`s around one sentence, then prose).

Usage:  python -m bench.reliability.large_files [--scale 1.0] [--index-kb 100]
`--scale 1` prepares the issue's sizes (table 25k and 50k rows, divs 50k and 100k, prose and
text 1.15 and 2.3 MB); the index part writes `--index-kb` KB of table, prose and text.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common.checkout import CTXR, child_env

WORDS = " ".join(
    [
        "the of and a to in is that for it as was with be by on not this are or from at which but",
        "have an they were there one all we their lantern tide harbour ledger archive backup",
        "restore thumbnail queue migration lock schema server client request answer index search",
    ]
).split()


def prose(n_bytes: int, headings: bool, seed: int = 1) -> str:
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        para = " ".join(rng.choice(WORDS) for _ in range(80)).capitalize() + "."
        if headings and len(parts) % 8 == 0:
            para = f"## Section {len(parts) // 8 + 1}\n\n{para}"
        parts.append(para)
        size += len(para) + 2
    return ("# Notes\n\n" if headings else "") + "\n\n".join(parts) + "\n"


def table(rows: int) -> str:
    rng = random.Random(2)
    body = "".join(f"| {i} | item{i} | {i * 3} | {rng.choice(WORDS)} {rng.choice(WORDS)} |\n"
                   for i in range(rows))  # fmt: skip
    return "# Stock\n\n| id | name | value | note |\n|---|---|---|---|\n" + body


def divs(depth: int) -> str:
    tail = "".join(f"<p>{p}</p>" for p in prose(20_000, False).split("\n\n"))
    deep = f"{'<div>' * depth}One sentence deep inside.{'</div>' * depth}"
    return f"<html><body>{deep}{tail}</body></html>"


def make(shape: str, size: float, folder: Path) -> Path:
    """`size`: rows for table, depth for divs, bytes for prose and text."""
    if shape == "table":
        path, text = folder / f"table-{int(size)}.md", table(int(size))
    elif shape == "divs":
        path, text = folder / f"divs-{int(size)}.html", divs(int(size))
    elif shape == "prose":
        path, text = folder / f"prose-{int(size)}.md", prose(int(size), True)
    else:
        path, text = folder / f"text-{int(size)}.txt", prose(int(size), False)
    path.write_text(text, encoding="utf-8")
    return path


PREPARE = """
import json, sys, time, resource
from pathlib import Path
from ctxr.config import load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.index import components
from ctxr.pipeline.chunking import default_chunker
settings = load_settings(index_dir=sys.argv[2], max_file_bytes=10**9)
embedder = components.make_embedder(settings)
chunker = default_chunker(settings, embedder)
analyzer = components.make_analyzer(settings)
embedder.count_tokens("warm up")  # loads the tokenizer outside the timing
started = time.perf_counter()
doc = load_document(Path(sys.argv[1]))
chunks = chunker(doc)
terms = sum(len(analyzer.terms(c.text)) for c in chunks)
seconds = time.perf_counter() - started
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "chunks": len(chunks), "rss_mb": rss, "terms": terms}))
"""


def child(args: list[str]) -> tuple[str, float, float]:
    """Run a child process; its stdout, wall seconds and peak RSS in MB (its own rusage)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env()
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{args} exited {proc.returncode}")
    return out, time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--index-kb", type=int, default=100)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; scale {args.scale}; "
          f"index part {args.index_kb} KB a file")  # fmt: skip
    sizes = {"table": 25_000, "divs": 50_000, "prose": 1_150_000, "text": 1_150_000}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print("\nprepare (load + split + BM25 terms), one process per file:")
        print(f"{'shape':6} {'MB':>6} {'chunks':>7} {'s':>7} {'s/MB':>7} {'RSS MB':>7}  x2 ratio")
        rows: list[dict[str, object]] = []
        for shape, base in sizes.items():
            times = []
            for factor in (1, 2):
                path = make(shape, base * args.scale * factor, folder)
                mb = path.stat().st_size / 1e6
                out, _, _ = child([sys.executable, "-c", PREPARE, str(path), str(folder / "i")])
                got = json.loads(out)
                times.append(got["seconds"])
                ratio = f"{times[1] / times[0]:.2f}" if factor == 2 else ""
                print(f"{shape:6} {mb:6.2f} {got['chunks']:7d} {got['seconds']:7.2f} "
                      f"{got['seconds'] / mb:7.2f} {got['rss_mb']:7.0f}  {ratio}")  # fmt: skip
                rows.append({"part": "prepare", "shape": shape, "mb": mb, **got})
        print("\nctxr index (MiniLM, outline contexts), one process per file:")
        print(f"{'shape':6} {'MB':>6} {'chunks':>7} {'s':>7} {'s/MB':>7} {'ms/chunk':>8} "
              f"{'RSS MB':>7}")  # fmt: skip
        index_sizes = {"table": args.index_kb * 1000 / 46, "prose": args.index_kb * 1000,
                       "text": args.index_kb * 1000, "divs": 100_000}  # fmt: skip
        for shape, size in index_sizes.items():
            path = make(shape, size, folder)
            mb = path.stat().st_size / 1e6
            ctxr = [*CTXR, "index", str(path), "--json",
                    "--index", str(folder / f"idx-{shape}")]  # fmt: skip
            out, seconds, rss = child(ctxr)
            chunks = json.loads(out)["chunks_written"]
            print(f"{shape:6} {mb:6.2f} {chunks:7d} {seconds:7.1f} {seconds / mb:7.1f} "
                  f"{1000 * seconds / max(chunks, 1):8.1f} {rss:7.0f}")  # fmt: skip
    load = os.getloadavg()
    print(f"\nload average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
