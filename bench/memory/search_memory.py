"""What a search process holds in memory, by mapping, over indexes kept by the scale benchmark.

For each index named, a fresh process (`run_child`) opens it with `SearchService`, runs the
scale benchmark's queries (``bench.common.synthetic.make_queries`` over the kept corpus), and
reads its own ``/proc/self/smaps``: resident memory summed by mapping, the shard's files named
by their role (``segments/*/vector_storage-dense/matrix.dat`` is the float32 vector matrix,
``quantized.data`` the int8 bytes), anonymous memory as ``[heap]`` and ``[anon]``.

Resident file pages are what the process has mapped and touched. The kernel reads around a
page that faults (128 KiB) and maps the cached pages around it (64 KiB, about 170 vectors of
384 floats), so what a process holds of a file depends on what the page cache held before it
and on how its reads fall, not only on what its searches need. ``--cold`` first asks the
kernel to drop the index's clean cached pages (``posix_fadvise(POSIX_FADV_DONTNEED)`` on
every file of the index), as after a reboot; without it the page cache is as other work left
it (right after a build, much of the index). Compare indexes within one run of this command.

``--rescore both`` runs each index twice, in turns: searched as by default (int8 candidates
rescored with their float32 originals) and with ``CTXR_RESCORE=false`` (ranked by the bytes;
the originals never read), and says how many of the top 10 the two share.

Usage::

    python -m bench.speed.scale --chunks 200000 --quantization none --keep /tmp/sc/none
    python -m bench.speed.scale --chunks 200000 --quantization int8 --keep /tmp/sc/int8
    python -m bench.memory.search_memory --chunks 200000 /tmp/sc/none /tmp/sc/int8 [--cold]
    python -m bench.memory.search_memory --chunks 1000000 /tmp/s1m --rescore both --cold
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.common import markdown_corpus
from bench.common.measure import (
    drop_cached_pages,
    load_line,
    machine,
    parser,
    run_child,
    say,
    status_mib,
)
from bench.common.synthetic import make_queries

_CHILD = "import sys; from bench.memory.search_memory import child; child(*sys.argv[1:])"
_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$")
SHOWN = 8  # mappings listed per index, largest first


def resident_by_mapping() -> Counter[str]:
    """This process's resident KiB by mapping, the shard's files by their place in it."""
    found: Counter[str] = Counter()
    mapping = "[anon]"
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            head = _MAPPING.match(line)
            if head:
                mapping = head.group(1) or "[anon]"
                mapping = re.sub(r"/segments/[^/]+/", "/segments/*/", mapping)
                mapping = re.sub(r".*/qdrant/", "", mapping)
                mapping = re.sub(r".*/site-packages/", "", mapping)
            elif line.startswith("Rss:"):
                found[mapping] += int(line.split()[1])
    return found


def child(work: str, chunks: str, seed: str, queries: str, cold: str) -> None:
    """In a fresh process: open the kept index, search, print resident memory as JSON."""
    from ctxr.config import load_settings
    from ctxr.retrieve.service import SearchService

    index_dir = Path(work) / "index"
    if cold == "1":
        drop_cached_pages(index_dir)
    corpus = markdown_corpus.corpus(Path(work) / "corpus", int(chunks), int(seed))
    tops: list[list[str]] = []
    with SearchService(load_settings(index_dir=index_dir)) as service:
        for query in make_queries(corpus.words, int(queries), int(seed)):
            tops.append([hit.chunk_id for hit in service.search(query, k=10)])
        status = {field: status_mib(f"{field}:") for field in ("VmRSS", "RssAnon", "RssFile")}
        mappings = resident_by_mapping().most_common()
        print(json.dumps({"status": status, "mappings": mappings, "tops": tops}))


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("kept", nargs="+", type=Path, help="directories bench.speed.scale kept")
    p.add_argument("--chunks", type=int, required=True, help="the --chunks they were run with")
    # The corpus's seed is read from each run's state.json, as the scale benchmark wrote it.
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--cold", action="store_true", help="drop the index's cached pages first")
    p.add_argument(
        "--rescore",
        choices=("on", "off", "both"),
        default="on",
        help="int8 candidates rescored with their originals (on), ranked by the bytes (off)",
    )
    args = p.parse_args(argv)
    ways = {"on": ("true",), "off": ("false",), "both": ("true", "false")}[args.rescore]
    say(f"search memory: {machine()}; page cache {'dropped first' if args.cold else 'as left'}")
    say(load_line("at start"))
    for work in args.kept:
        state = json.loads((work / "state.json").read_text())
        held = state.get("build", {}).get("quantization", "?")
        tops: dict[str, list[list[str]]] = {}
        for rescore in ways:
            run = run_child(_CHILD, str(work), str(args.chunks), str(state["seed"]),
                            str(args.queries), str(int(args.cold)),
                            env={"CTXR_RESCORE": rescore})  # fmt: skip
            found = json.loads(run.stdout.strip().splitlines()[-1])
            tops[rescore] = found["tops"]
            status = found["status"]
            say("")
            say(
                f"{work} (vectors {held}, CTXR_RESCORE={rescore}), after {args.queries} "
                f"searches: VmRSS {status['VmRSS']:,.0f} MiB = anonymous "
                f"{status['RssAnon']:,.0f} + file {status['RssFile']:,.0f}"
            )
            for mapping, kib in found["mappings"][:SHOWN]:
                say(f"  {kib / 1024:8.1f} MiB  {mapping}")
        if len(tops) == 2:
            shared = [len(set(a) & set(b)) / max(len(a), 1)
                      for a, b in zip(tops["true"], tops["false"], strict=True)]  # fmt: skip
            say(f"  top 10 shared, rescored and not: {sum(shared) / len(shared):.4f} on average")
    say("")
    say(load_line("at end"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
