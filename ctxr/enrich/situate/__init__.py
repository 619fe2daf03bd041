"""Situating chunks: a short context for every chunk, written by an LLM or from the outline.

A map, by what each module answers (an arrow is a call):

    contexts ──▶ plan ──▶ queue ──▶ sender | batch ──▶ ctxr.llm
    (the bridge    (what     (sends     (one request, rate
     from the      to ask)    the plan)  limits, retries; or
     sync indexer)                       a Batch API, resumable)

- What to ask: `plan` (`plan_requests` returns the `RequestPlan`: prefixes, chunks already
  answered, the requests for the rest, grouped, cache-marked where it pays, small documents
  packed); `window` (a long document's prefixes: its outline and one fixed block per group of
  chunks); `group` (grouped and packed requests rendered, their JSON answers read); `prompt`
  (the per-chunk prompt). The estimate prices this same plan (`ctxr.pipeline.estimate`).
- Sending it: `queue` (per cached prefix the first request completes before the rest are
  sent; answers validated, cached, and a chunk a grouped answer missed asked again alone);
  `sender` (one request under the rate limiter, with retries); `batch` and `batch_journal`
  (the providers' Batch APIs at half price, resumable after a kill).
- Checking answers: `validate` (is this a context?), `outline` (outline contexts: the
  fallback and the no-LLM run), `results` (a chunk's outcome).
- Paying once: `response_cache` (every accepted context on disk: no chunk paid twice),
  `ledger` (what a run cost, per document, written however the run ends).
- `contexts`: which contexts a run writes, and one `asyncio.run` of the queue.
"""
