"""Ctrl-C during `ctxr index`, for real: a subprocess gets SIGINT while its LLM contexts are
being written (the loopback fake server answers slowly), says what it kept and the command
that resumes, exits 130 with no traceback; that command then pays only for the rest."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxr.index.manifest import Manifest
from tests.fakes.llm_server import FakeLLMServer
from tests.fixtures.corpora import write_topics

# SIGINT back to Python's handler first: a suite started as a background job (`pytest &` in a
# non-interactive shell) runs with SIGINT ignored, children inherit that, and the Ctrl-C these
# tests send would be lost.
MAIN = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from ctxr.cli import main; main()"
)


def _ctxr(words: list[str]) -> list[str]:
    assert words[0] == "ctxr"
    return [sys.executable, "-c", MAIN, *words[1:]]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
def test_sigint_during_index_says_what_was_kept_and_how_to_resume(
    tmp_path: Path, fake_llm_factory: Callable[..., FakeLLMServer]
) -> None:
    server = fake_llm_factory(latency=0.2)
    corpus = write_topics(tmp_path / "corpus", sections=8, facts=8)
    mine = ("CTXR_", "ANTHROPIC_", "OPENAI_")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(mine)},
        **server.env(),
        "CTXR_LLM_PROVIDER": "anthropic",
        "CTXR_LLM_GROUP_SIZE": "1",  # one request a chunk: many small steps to stop between
        "CTXR_LLM_CONCURRENCY": "1",
        "CTXR_CACHE_DIR": str(tmp_path / "cache"),
    }  # fmt: skip
    index = tmp_path / "idx"
    # --rebuild on the first run: the resume command must leave it out, or it would delete
    # what the interrupted run kept.
    args = ["ctxr", "index", str(corpus), "--index", str(index), "--chunk-tokens", "60",
            "--rebuild"]  # fmt: skip
    child = subprocess.Popen(
        _ctxr(args), env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while server.count("messages", 200) < 3:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "no LLM request was answered"
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    answered = server.count("messages", 200)
    assert child.returncode == 130, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "interrupted" in err
    assert "LLM requests answered" in err and "response cache" in err
    [resume] = [line.split("resume with: ", 1)[1] for line in err.splitlines()
                if line.startswith("resume with: ")]  # fmt: skip
    words = shlex.split(resume)
    assert words == [w for w in args if w != "--rebuild"]

    server.latency = 0.0
    before = server.count("messages")
    done = subprocess.run(_ctxr(words), env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    chunks = Manifest.load(index).chunk_count
    asked_again = server.count("messages") - before
    # Only what was not answered is asked for (plus, at most, the one request in flight).
    assert chunks - answered <= asked_again <= chunks - answered + 1
    assert answered < chunks
