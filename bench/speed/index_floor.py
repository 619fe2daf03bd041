"""`ctxr index` against the embedder's floor: every word piece of the corpus embedded once.

The floor: the 90 anthropic-codebase files (written as code files by
`bench.common.codebase.write_corpus`), each tokenized with the embedded model's own tokenizer
and cut into windows of 254 word pieces (256 with [CLS] and [SEP]), the windows embedded by
onnxruntime directly (the same int8 MiniLM graph, batches of 8, longest first, threads as ctxr
sets them). Nothing a retrieval index needs beyond that: no chunking, no contexts, no store.

`ctxr index`: the CLI in a subprocess, cold (a fresh index and embedding cache every time),
outline contexts, the defaults. The two are timed in turns (floor, index, floor, index, ...),
each in its own process, which reports its own peak RSS (`bench.common.measure.run_child`).
With ``--copies N`` the corpus is the same files N times under different paths (how peak RSS
grows with the corpus). Printed: seconds per turn, the ratio of the medians, chunks/s,
embedded word pieces/s, the amplification `ctxr index` reports, peak RSS, and the load
average.

Usage::

    python -m bench.speed.index_floor [--turns 2] [--copies 1]
        [--data ../shared/data/anthropic-codebase]
"""

from __future__ import annotations

import json
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import CTXR_CODE
from bench.common.codebase import add_data_option, write_corpus
from bench.common.measure import load_line, ratio_table, run_child, say, turns
from bench.common.measure import parser as cli

WINDOW = 254
FLOOR_SCRIPT = f"""
import sys, numpy as np, onnxruntime as ort
from pathlib import Path
from tokenizers import Tokenizer
from ctxr.index.embed.onnx import model_path, tokenizer_path, _default_threads
tok = Tokenizer.from_file(str(tokenizer_path()))
tok.no_truncation()
windows = []
for path in sorted(Path(sys.argv[1]).rglob("*.*")):
    ids = tok.encode(path.read_text(), add_special_tokens=False).ids
    for i in range(0, len(ids), {WINDOW}):
        windows.append([101] + ids[i:i + {WINDOW}] + [102])
opts = ort.SessionOptions(); opts.intra_op_num_threads = _default_threads()
opts.inter_op_num_threads = 1; opts.log_severity_level = 3
session = ort.InferenceSession(str(model_path()), sess_options=opts,
                               providers=["CPUExecutionProvider"])
names = {{i.name for i in session.get_inputs()}}
windows.sort(key=len, reverse=True)
for s in range(0, len(windows), 8):
    batch = windows[s:s + 8]; width = len(batch[0])
    ids = np.zeros((len(batch), width), np.int64); mask = np.zeros_like(ids)
    for r, w in enumerate(batch):
        ids[r, :len(w)] = w; mask[r, :len(w)] = 1
    feeds = {{"input_ids": ids, "attention_mask": mask}}
    if "token_type_ids" in names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    session.run(None, feeds)
print(len(windows), sum(len(w) for w in windows))
"""
FLOOR, INDEX = "floor", "ctxr index"


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--copies", type=int, default=1)
    add_data_option(parser)
    args = parser.parse_args(argv)
    say(load_line(f"at start; {args.copies} copies of the corpus"))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus"
        write_corpus(args.data, corpus / "c0", None)
        for copy in range(1, args.copies):
            target = corpus / f"c{copy}"
            target.mkdir()
            for path in (corpus / "c0").iterdir():
                (target / path.name).write_text(path.read_text())
        seconds: dict[str, list[float]] = {FLOOR: [], INDEX: []}
        peaks = dict.fromkeys(seconds, 0.0)
        report: dict[str, object] = {}
        windows = pieces = 0
        for turn, name in turns(list(seconds), args.turns):
            if name == FLOOR:
                run = run_child(FLOOR_SCRIPT, str(corpus))
                windows, pieces = (int(x) for x in run.stdout.split())
            else:  # cold: a fresh index and embedding cache every turn
                index, cache = root / f"idx-{turn}", root / f"cache-{turn}"
                run = run_child(CTXR_CODE, "index", str(corpus), "--index", str(index),
                                "--json", "--context", "outline",
                                env={"CTXR_CACHE_DIR": str(cache)})  # fmt: skip
                report = json.loads(run.stdout)
            seconds[name].append(run.seconds)
            peaks[name] = max(peaks[name], run.peak_mib)
            say(f"turn {turn}: {name} {run.seconds:.1f} s, peak RSS {run.peak_mib:.0f} MiB")
        chunks = int(report["chunks_written"])  # type: ignore[call-overload]
        embedded = sum(dict(report["embedded_pieces"]).values())  # type: ignore[call-overload]
        median = statistics.median(seconds[INDEX])
        for line in ratio_table(seconds, FLOOR, digits=1):
            say(line)
        say(f"floor: {windows:,} windows, {pieces:,} word pieces")
        say(f"ctxr index: {chunks:,} chunks, {embedded:,} word pieces embedded; "
            f"{chunks / median:.1f} chunks/s, {embedded / median:,.0f} pieces/s at the median; "
            f"amplification {report['amplification']}")  # fmt: skip
        say(f"peak RSS: ctxr index {peaks[INDEX]:.0f} MiB (floor process {peaks[FLOOR]:.0f} MiB)")
    say(load_line("at end"))


if __name__ == "__main__":
    main()
