"""Thumbnail rendering and the on-disk thumbnail cache for Lumen.

Thumbnails are derived data: they can always be rebuilt from the original, so
the cache is allowed to forget them. The size of the cache is capped by the
``THUMB_CACHE_MAX`` environment variable (bytes, or a number with a K/M/G
suffix); the least recently served entries are evicted first.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CACHE_MAX = 2 * 1024**3  # 2 GiB
_SUFFIXES = {"K": 1024, "M": 1024**2, "G": 1024**3}

# EXIF orientation values that need the image rotated before resizing.
ROTATIONS = {3: 180, 6: 270, 8: 90}


class ThumbnailDecodeError(Exception):
    """The original could not be decoded (logged as LUM-E217)."""

    code = "LUM-E217"


def parse_size(value: str | None) -> int:
    """Turn ``"512M"`` or ``"2147483648"`` into a number of bytes.

    An empty or missing value gives ``DEFAULT_CACHE_MAX``.
    """
    if not value:
        return DEFAULT_CACHE_MAX
    value = value.strip().upper()
    if value[-1] in _SUFFIXES:
        return int(float(value[:-1]) * _SUFFIXES[value[-1]])
    return int(value)


@dataclass(frozen=True)
class ThumbKey:
    """Identifies one rendered thumbnail: photo checksum, edge length, format."""

    checksum: str
    edge: int
    fmt: str = "webp"

    def filename(self) -> str:
        digest = hashlib.sha1(f"{self.checksum}:{self.edge}".encode()).hexdigest()
        return f"{digest[:2]}/{digest}.{self.fmt}"


class ThumbnailCache:
    """A size-capped LRU cache of rendered thumbnails on disk.

    The access time of a file is the recency signal; it is touched explicitly
    on every hit because many servers mount their data disk with ``noatime``.
    """

    def __init__(self, root: Path, max_bytes: int | None = None) -> None:
        self.root = root
        self.max_bytes = (
            max_bytes
            if max_bytes is not None
            else parse_size(os.environ.get("THUMB_CACHE_MAX") or os.environ.get("LUMEN_CACHE_SIZE"))
        )
        self._used = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())

    def get(self, key: ThumbKey) -> bytes | None:
        """Return the cached thumbnail, or None on a miss; a hit refreshes recency."""
        path = self.root / key.filename()
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        now = time.time()
        os.utime(path, (now, now))
        return data

    def put(self, key: ThumbKey, data: bytes) -> None:
        """Store a thumbnail, then evict old entries until under ``max_bytes``."""
        path = self.root / key.filename()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: readers never see half a file
        self._used += len(data)
        self._evict_until_under_limit()

    def _evict_until_under_limit(self) -> None:
        """Delete least recently served thumbnails until the cache fits the cap."""
        if self._used <= self.max_bytes:
            return
        files = sorted(
            (p for p in self.root.rglob("*") if p.is_file()),
            key=lambda p: p.stat().st_atime,
        )
        for path in files:
            if self._used <= self.max_bytes:
                break
            size = path.stat().st_size
            path.unlink(missing_ok=True)
            self._used -= size


def render(original: Path, edge: int, orientation: int = 1, quality: int = 82) -> bytes:
    """Resize ``original`` so that its longer edge is ``edge`` pixels.

    The image is rotated according to its EXIF orientation first, so that
    portrait photos taken with a phone held upright are not shown sideways.
    Raises ThumbnailDecodeError when libvips cannot read the file, which for
    HEIC photos usually means libheif is missing.
    """
    import pyvips  # imported lazily: the CLI must start without libvips

    try:
        image = pyvips.Image.thumbnail(str(original), edge, size="down")
    except pyvips.Error as exc:
        raise ThumbnailDecodeError(f"{original}: {exc}") from exc
    angle = ROTATIONS.get(orientation)
    if angle:
        image = image.rotate(angle)
    return image.webpsave_buffer(Q=quality, strip=True)
