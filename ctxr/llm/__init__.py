"""LLM providers shared by enrich (contexts) and retrieve (reranking).

One protocol (`ctxr.llm.base.LLM`), the Anthropic and OpenAI adapters, the one SDK client
factory (`clients`), error mapping (`error_map`), client-side rate limits (`ratelimit`),
prices (`pricing` and `pricing.json`) and the choice of provider (`registry`). Nothing here
imports enrich, index or retrieve.
"""
