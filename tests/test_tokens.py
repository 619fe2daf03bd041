import hashlib
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.paths import ROOT

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from ctxr.tokens import count_tokens, get_encoding
print(count_tokens("Contextual retrieval, offline."))
print(get_encoding("o200k_base").name)
"""


def test_tiktoken_is_seeded_offline_once(tmp_path: Path) -> None:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    first = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["6", "o200k_base"]
    assert "seeded tiktoken's cl100k_base" in first.stderr
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert (tmp_path / hashlib.sha1(url.encode()).hexdigest()).is_file()
    second = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert second.returncode == 0
    assert "seeded" not in second.stderr  # said once, not on every run
