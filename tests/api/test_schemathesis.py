"""schemathesis (`--checks all`) against a real `ctxr serve`, with and without a bearer token.

schemathesis reads /openapi.json and sends what the schema allows and what it forbids: every
answer must be one the schema declares, with the body it declares; what the schema allows must
be accepted and what it forbids refused; with a token, a request without it must be refused.
The served schema is also checked with openapi-spec-validator. Both tools are in the
`api-test` extra (CI's own step); without them this module skips.

The server is the installed `ctxr` command on the session's examples index, in a subprocess
with no LLM provider in its environment: a configured provider would make the llm reranker
call the network. schemathesis runs with a fixed seed, and in a temporary directory, where it
keeps its own files.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.index import BuiltIndex
from tests.fixtures.paths import ROOT

pytest.importorskip("schemathesis", reason="schemathesis is in the api-test extra")

# A real `ctxr serve` per token case, and schemathesis over the whole schema: a minute or more.
pytestmark = pytest.mark.slow

TOKEN = "schemathesis-token"
MAX_EXAMPLES = 15  # per operation and phase: ~20 s a run on two cores
_PROVIDER_VARS = ("ANTHROPIC_", "OPENAI_", "CTXR_LLM_", "CTXR_RERANK", "CTXR_API_")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _command(name: str) -> list[str]:
    script = Path(sys.executable).with_name(name)
    assert script.exists(), f"{name} is not installed beside {sys.executable}"
    return [str(script)]


@pytest.fixture(params=[None, TOKEN], ids=["no-token", "token"])
def served(
    request: pytest.FixtureRequest, examples_index: BuiltIndex, tmp_path: Path
) -> Iterator[tuple[str, str | None]]:
    token: str | None = request.param
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROVIDER_VARS)}
    env["CTXR_CACHE_DIR"] = str(examples_index.cache_dir)
    if token:
        env["CTXR_API_TOKEN"] = token
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        child = subprocess.Popen(
            [*_command("ctxr"), "serve", "--index", str(examples_index.index_dir),
             "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:  # ready when the index is open and answers
                assert child.poll() is None, log_path.read_text()
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            yield url, token
        finally:
            child.terminate()
            child.wait(timeout=30)  # the shard is free again before the next server


def test_schemathesis_finds_no_failure(served: tuple[str, str | None], tmp_path: Path) -> None:
    url, token = served
    headers = ["-H", f"Authorization: Bearer {token}"] if token else []
    run = subprocess.run(
        [*_command("schemathesis"), "run", f"{url}/openapi.json", "--checks", "all",
         "--max-examples", str(MAX_EXAMPLES), "--seed", "1", "--no-color", *headers],
        cwd=tmp_path, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-12_000:] + run.stderr[-2_000:]
    assert "failure" not in run.stdout.splitlines()[-1], run.stdout[-4_000:]


def test_the_served_schema_is_valid_openapi(served: tuple[str, str | None]) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    url, token = served
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    schema = httpx.get(f"{url}/openapi.json", headers=headers, timeout=30).json()
    validator.validate(schema)
    assert ("securitySchemes" in schema["components"]) is True  # /index/update needs a token
