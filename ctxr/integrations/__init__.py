"""Retrievers for LangChain (`ctxr.integrations.langchain`) and LlamaIndex
(`ctxr.integrations.llama_index`), optional extras: `pip install 'ctxr[langchain]'` or
`'ctxr[llama-index]'`. Both search an embedded index (`index_dir=`) or a running `ctxr serve`
(`base_url=`) through the one search client, `ctxr.Client`, so they return the same hits."""
