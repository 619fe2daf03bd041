"""The folders (and files) an index was built from, recorded beside its manifest.

`ctxr index PATH...` records each PATH, resolved (`os.path.realpath`), in ``<index>/roots.json``;
`--rebuild` starts the record afresh, a later run adds to it. A `ctxr serve` that owns the index
takes updates only for paths inside these roots or the ones it was started with
(`ctxr.api.live`): whoever may send it an update may make it read files, and those files are
then served to every searcher, so it reads only what its user chose to index. An index built
before roots were recorded has none: its server takes updates only under the roots it is
given (`--root`, CTXR_API_UPDATE_ROOTS).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ctxr.atomic_write import write_atomically

ROOTS_NAME = "roots.json"


def resolved(path: str | Path) -> str:
    """A path as the checks compare it: absolute, every link in it followed."""
    return os.path.realpath(os.path.abspath(path))


def recorded_roots(index_dir: Path) -> list[str]:
    """The resolved roots recorded for the index; none for an index that records none."""
    try:
        body = json.loads((Path(index_dir) / ROOTS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    roots = body.get("roots") if isinstance(body, dict) else None
    return [r for r in roots if isinstance(r, str)] if isinstance(roots, list) else []


def record_roots(index_dir: Path, paths: Iterable[str | Path], *, fresh: bool = False) -> None:
    """Add `paths` to the index's recorded roots (`fresh`: replace them), atomically."""
    known = [] if fresh else recorded_roots(index_dir)
    roots = sorted({*known, *(resolved(p) for p in paths)})
    body = json.dumps({"roots": roots}, indent=1, ensure_ascii=False)
    write_atomically(Path(index_dir) / ROOTS_NAME, body)


def inside(path: str | Path, roots: Sequence[str]) -> bool:
    """Whether `path`, resolved, is one of `roots` (resolved) or lies under one."""
    where = resolved(path)
    return any(where == r or where.startswith(r.rstrip(os.sep) + os.sep) for r in roots)
