"""LLM providers shared by enrich (contexts) and retrieve (reranking).

One protocol (`ctxr.llm.base.LLM`, and `RequestCounter`: how a provider counts and bills a
prompt without sending it), the Anthropic and OpenAI adapters and their counters
(`anthropic_tokens`, `openai_tokens`), the one SDK client factory (`clients`), error mapping
(`error_map`), client-side rate limits (`ratelimit`), prices (`pricing` and `pricing.json`)
and the providers by name (`registry.REGISTRY`: a new provider is its module and one entry).
Nothing here imports enrich, index or retrieve.
"""
