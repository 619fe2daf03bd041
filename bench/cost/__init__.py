"""Money and provider usage of LLM contexts: tokens, prompt-cache reads and writes, requests
against a rate limit, dollars at list prices (against the test suite's fake server)."""
