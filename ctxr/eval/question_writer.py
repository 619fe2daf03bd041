"""Writing a trial's questions: sampled chunks, one question each, by the configured LLM.

The chunks are drawn (seeded) from the sample's documents as the trial's first index splits
them, leaving out chunks too short to answer anything. Each request is the question prompt
(`ctxr/prompts/question.txt`): the document as the cached prefix, as the situating prompt
sends it, then the chunk and the instruction. A document's requests go one after another, so
the first writes the provider's cache and the rest read it; documents go concurrently. Errors
are retried as the situating sender retries them (backoff with jitter, at least the server's
retry-after, never longer than `CTXR_LLM_MAX_RETRY_WAIT`). An answer that is not a question
(empty, too long, the prompt's markup) is left out and counted, never guessed at.

The LLM goes through `ctxr.llm` (the same adapters and SDKs as the contexts), and what it
cost comes from the same price table as the ledger.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from ctxr.config import LLMSettings
from ctxr.enrich.situate.contexts import llm_timeout
from ctxr.enrich.situate.prompt import load_prompt
from ctxr.errors import ConfigError, ProviderError
from ctxr.eval.questions import Answer, Question
from ctxr.llm.base import LLM, Completion, CompletionRequest, Usage
from ctxr.llm.local import is_local_url
from ctxr.llm.pricing import PriceTable, load_prices
from ctxr.llm.registry import DEFAULT_MODELS, choose_provider, configured_base_url, make_llm
from ctxr.progress import Progress
from ctxr.tokens import count_tokens
from ctxr.types import Chunk, Document

PROMPT_NAME = "question"
#: Chunks shorter than this (a lone heading, an import line) answer no question worth asking.
MIN_CHUNK_TOKENS = 24
MAX_QUESTION_CHARS = 400
OUTPUT_TOKENS = 120  # a question of at most 30 words, with room for a model's preamble
MAX_ATTEMPTS = 6
PHASE = "questions"
_PREAMBLE = re.compile(r"^(?:\*\*)?(?:question|q)\s*\d*\s*[:.)-]\s*(?:\*\*)?\s*", re.IGNORECASE)
_MARKUP = re.compile(r"</?(?:document|chunk)>|The chunk sits under:", re.IGNORECASE)
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"  # straight and curly quotes


@dataclass(frozen=True, slots=True)
class Writer:
    """The provider and model that write questions."""

    provider: str
    model: str

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model}"


@dataclass
class QuestionRun:
    """What writing the questions did and cost."""

    writer: Writer
    prompt_version: str
    questions: list[Question] = field(default_factory=list)
    requests: int = 0  # answered requests (retries not counted)
    retries: int = 0
    usage: Usage = field(default_factory=Usage)
    dollars: float | None = 0.0  # None: the model has no price
    rejected: list[str] = field(default_factory=list)  # answers that were no question
    failures: list[str] = field(default_factory=list)  # chunks whose requests failed

    def to_json(self) -> dict[str, object]:
        u = self.usage
        return {
            "writer": self.writer.label,
            "prompt": self.prompt_version,
            "written": len(self.questions),
            "requests": self.requests,
            "retries": self.retries,
            "rejected": self.rejected,
            "failures": self.failures,
            "tokens": {
                "input": u.input_tokens,
                "cache_write": u.cache_write_tokens + u.cache_write_1h_tokens,
                "cache_read": u.cache_read_tokens,
                "output": u.output_tokens,
            },
            "dollars": self.dollars,
        }


def choose_writer(llm_settings: LLMSettings, model: str | None = None) -> Writer:
    """`model` (its provider from the price table, else the configured one), or the model
    that writes contexts; a `ConfigError` saying what to set when there is no provider."""
    prices = load_prices(llm_settings.prices_file)
    provider = choose_provider(llm_settings.llm_provider)
    if model and model in prices:
        provider = prices.get(model).provider
    if provider is None:
        raise ConfigError(
            "writing questions needs an LLM provider: set ANTHROPIC_API_KEY (or "
            "ANTHROPIC_BASE_URL), or OPENAI_API_KEY / OPENAI_BASE_URL, or CTXR_LLM_PROVIDER; "
            "or pass --questions FILE with questions of your own"
        )
    return Writer(provider, model or llm_settings.llm_model or DEFAULT_MODELS[provider])


def pick_chunks(
    pairs: Sequence[tuple[Document, Sequence[Chunk]]],
    count: int,
    seed: int,
    min_tokens: int = MIN_CHUNK_TOKENS,
) -> list[tuple[Document, Chunk]]:
    """`count` chunks drawn without replacement (seeded) among those of `min_tokens` or more,
    in document order; fewer when there are fewer."""
    eligible = [
        (document, chunk)
        for document, chunks in sorted(pairs, key=lambda p: p[0].source)
        for chunk in chunks
        if chunk.token_count >= min_tokens
    ]
    chosen = random.Random(seed).sample(eligible, min(count, len(eligible)))
    return sorted(chosen, key=lambda p: (p[0].source, p[1].start))


def parse_question(answer: str) -> str | None:
    """The question in a model's answer: its first line, without quotes or a "Question:"
    label; None when that is no question (empty, too long, the prompt's markup echoed)."""
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    if not lines:
        return None
    text = _PREAMBLE.sub("", lines[0]).strip().strip(_QUOTES).strip()
    if len(text) < 3 or len(text) > MAX_QUESTION_CHARS or _MARKUP.search(text):
        return None
    return text


def _window(document: Document, chunk: Chunk, limit: int, encoding: str) -> str:
    """The document, or as much of it around the chunk as `limit` tokens allow (in characters,
    in proportion: a long document is sent to the model in part, as the situating plan does)."""
    total = count_tokens(document.text, encoding)
    if total <= limit:
        return document.text
    width = max(len(chunk.text), len(document.text) * limit // total)
    start = max(0, min(chunk.start - (width - len(chunk.text)) // 2, len(document.text) - width))
    return document.text[start : start + width]


def _prices(llm_settings: LLMSettings, writer: Writer, base_url: str | None) -> PriceTable:
    prices = load_prices(llm_settings.prices_file)
    if is_local_url(base_url) and writer.model not in prices:
        return prices.with_free(writer.model, writer.provider)  # a local server bills nothing
    return prices


def write_questions(
    picked: Sequence[tuple[Document, Chunk]],
    writer: Writer,
    llm_settings: LLMSettings,
    encoding: str,
    progress: Progress,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> QuestionRun:
    """One question per picked chunk, by `writer`; see the module docstring. `encoding` is the
    tiktoken encoding that sizes documents (`CTXR_ENCODING`)."""
    prompt = load_prompt(PROMPT_NAME)
    run = QuestionRun(writer, prompt.version)
    base_url = configured_base_url(writer.provider)
    prices = _prices(llm_settings, writer, base_url)
    try:
        price = prices.get(writer.model)
    except ConfigError as exc:
        progress.note(f"the questions' cost is not counted: {exc}")
        price, run.dollars = None, None
    limit = llm_settings.max_document_tokens
    if llm_settings.llm_context_tokens is not None:  # a small local window: leave room to answer
        limit = min(limit, max(256, llm_settings.llm_context_tokens - 2 * OUTPUT_TOKENS - 200))
    by_document: dict[str, list[tuple[Document, Chunk]]] = {}
    for document, chunk in picked:
        by_document.setdefault(document.doc_id, []).append((document, chunk))
    written: dict[tuple[str, int], str] = {}
    max_wait = llm_settings.llm_max_retry_wait

    def may_retry(exc: BaseException) -> bool:
        if not isinstance(exc, ProviderError) or not exc.retryable:
            return False
        return (exc.retry_after or 0.0) <= max_wait

    def wait(state: RetryCallState) -> float:
        jittered = float(wait_random_exponential(multiplier=1.0, max=max_wait)(state))
        exc = state.outcome.exception() if state.outcome else None
        floor = exc.retry_after if isinstance(exc, ProviderError) and exc.retry_after else 0.0
        return min(max(jittered, floor), max_wait)

    def count_retry(state: RetryCallState) -> None:
        run.retries += 1

    async def ask(llm: LLM, document: Document, chunk: Chunk) -> None:
        prefix = prompt.document_part(_window(document, chunk, limit, encoding))
        request = CompletionRequest(
            instruction=prompt.chunk_part(chunk.text, chunk.heading_path),
            prefix=prefix,
            cache=count_tokens(prefix, encoding) >= llm.min_cacheable_tokens,
            max_output_tokens=OUTPUT_TOKENS,
        )
        retrying = AsyncRetrying(
            stop=stop_after_attempt(MAX_ATTEMPTS), wait=wait, retry=retry_if_exception(may_retry),
            sleep=sleep, before_sleep=count_retry, reraise=True,
        )  # fmt: skip
        where = f"{document.source} {chunk.start}-{chunk.end}"
        try:
            completion: Completion = await retrying(llm.complete, request)
        except ProviderError as exc:
            run.failures.append(f"{where}: {exc}")
            return
        finally:
            progress.advance(PHASE)
        run.requests += 1
        run.usage = run.usage + completion.usage
        text = None if completion.truncated else parse_question(completion.text)
        if text is None:
            run.rejected.append(f"{where}: {completion.text.strip()[:80]!r}")
        else:
            written[(document.doc_id, chunk.start)] = text

    async def main() -> None:
        llm = make_llm(
            writer.provider, writer.model, timeout=llm_timeout(llm_settings, base_url),
            max_output_tokens=OUTPUT_TOKENS,
        )  # fmt: skip
        slots = asyncio.Semaphore(llm_settings.llm_concurrency)

        async def one_document(items: list[tuple[Document, Chunk]]) -> None:
            async with slots:
                for document, chunk in items:  # in turn: the first writes the cache
                    await ask(llm, document, chunk)

        try:
            await asyncio.gather(*(one_document(items) for items in by_document.values()))
        finally:
            await llm.aclose()

    progress.start(PHASE, len(picked))
    asyncio.run(main())
    if price is not None:
        run.dollars = price.cost(run.usage)
    width = len(str(len(picked)))
    for n, (document, chunk) in enumerate(picked, start=1):
        text = written.get((document.doc_id, chunk.start))
        if text is not None:
            answer = Answer(document.source, chunk.start, chunk.end, chunk.text)
            run.questions.append(
                Question(f"q{n:0{width}d}", text, (answer,), writer.label, prompt.version)
            )
    return run
