"""The HTTP API: the FastAPI app (`app`), its guard (token, limits, access log) and models."""
