"""Situating chunks: outline contexts, or LLM contexts through the queue.

`contexts` is the bridge from the sync indexer; `queue` sends one cache write per document
first, then the rest; `group` plans the requests (several chunks each) and reads their
answers; `sender` sends one request under the rate limits, with retries; `window` plans
prefixes for documents over the model's window; `validate` checks answers; `response_cache`
and `ledger` make sure nothing is paid twice and say what a run cost; `prompt` is the
situating prompt.
"""
