"""Large and pathological files: time and peak RSS per MB against plain prose of the same size.

An attack on `ctxr index` found a 50k-row Markdown table (2.3 MB) running 22 minutes and
1.6 GB with nothing saved along the way, 100k nested `<div>`s taking 97 s to split, and a 200 MB
text file not finishing in 300 s. This measures the shapes side by side, each in its own process
(which reports its own peak RSS: `bench.common.measure.run_child`), in two parts:

1. prepare: load, split with the run's chunker (capped to MiniLM's tokenizer, as `ctxr index`
   does) and BM25-analyse every chunk; no embedding. Each shape at two sizes, so the ratio of
   the two times says whether the work grows linearly (ratio ~2 for twice the size).
2. index: the whole `ctxr index` (real MiniLM embedder, outline contexts) on a smaller file
   of each shape, for seconds and MB of RSS per MB and per chunk. Embedding is the cost here
   (97% of index time, FIELD-NOTES), so this part is scaled down to stay under a few minutes.

Shapes (`bench.common.shapes`): `table` (a Markdown table of 4 columns, ~46 bytes a row: 50k
rows is the attack's 2.3 MB), `prose` (Markdown sections of generated English-like prose),
`text` (the same prose as a `.txt` file, no headings), `divs` (N nested `<div>`s around one
sentence, then prose).

Usage:  python -m bench.reliability.large_files [--scale 1.0] [--index-kb 100]
`--scale 1` prepares the attack's sizes (table 25k and 50k rows, divs 50k and 100k, prose and
text 1.15 and 2.3 MB); the index part writes `--index-kb` KB of table, prose and text.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import CTXR_CODE
from bench.common.measure import load_line, run_child, say
from bench.common.measure import parser as cli
from bench.common.shapes import make

PREPARE = """
import json, sys
from pathlib import Path
from bench.common.measure import Span
from ctxr.config import load_settings
from ctxr.enrich.load.documents import load_document
from ctxr.index import components
from ctxr.pipeline.chunking import default_chunker
settings = load_settings(index_dir=sys.argv[2], max_file_bytes=10**9)
embedder = components.make_embedder(settings)
chunker = default_chunker(settings, embedder)
analyzer = components.make_analyzer(settings)
embedder.count_tokens("warm up")  # loads the tokenizer outside the timing
with Span() as span:
    doc = load_document(Path(sys.argv[1]))
    chunks = chunker(doc)
    terms = sum(len(analyzer.terms(c.text)) for c in chunks)
print(json.dumps({"seconds": span.seconds, "chunks": len(chunks), "terms": terms}))
"""


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--index-kb", type=int, default=100)
    args = parser.parse_args(argv)
    say(load_line(f"at start; scale {args.scale}; index part {args.index_kb} KB a file"))
    sizes = {"table": 25_000, "divs": 50_000, "prose": 1_150_000, "text": 1_150_000}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        say("\nprepare (load + split + BM25 terms), one process per file:")
        say(f"{'shape':6} {'MB':>6} {'chunks':>7} {'s':>7} {'s/MB':>7} {'RSS MiB':>7}  x2 ratio")
        for shape, base in sizes.items():
            times = []
            for factor in (1, 2):
                path = make(shape, base * args.scale * factor, folder)
                mb = path.stat().st_size / 1e6
                run = run_child(PREPARE, str(path), str(folder / "i"))
                got = json.loads(run.stdout)
                times.append(got["seconds"])
                ratio = f"{times[1] / times[0]:.2f}" if factor == 2 else ""
                say(f"{shape:6} {mb:6.2f} {got['chunks']:7d} {got['seconds']:7.2f} "
                    f"{got['seconds'] / mb:7.2f} {run.peak_mib:7.0f}  {ratio}")  # fmt: skip
        say("\nctxr index (MiniLM, outline contexts), one process per file:")
        say(f"{'shape':6} {'MB':>6} {'chunks':>7} {'s':>7} {'s/MB':>7} {'ms/chunk':>8} "
            f"{'RSS MiB':>7}")  # fmt: skip
        index_sizes = {"table": args.index_kb * 1000 / 46, "prose": args.index_kb * 1000,
                       "text": args.index_kb * 1000, "divs": 100_000}  # fmt: skip
        for shape, size in index_sizes.items():
            path = make(shape, size, folder)
            mb = path.stat().st_size / 1e6
            index = folder / f"idx-{shape}"
            # Exit 3: some files could not be loaded and the rest was indexed.
            run = run_child(CTXR_CODE, "index", str(path), "--json", "--index", str(index),
                            ok=(0, 3))  # fmt: skip
            chunks = json.loads(run.stdout)["chunks_written"]
            say(f"{shape:6} {mb:6.2f} {chunks:7d} {run.seconds:7.1f} {run.seconds / mb:7.1f} "
                f"{1000 * run.seconds / max(chunks, 1):8.1f} {run.peak_mib:7.0f}")  # fmt: skip
    say()
    say(load_line("at end"))


if __name__ == "__main__":
    main()
