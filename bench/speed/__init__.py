"""Time: search and API latency, indexing against its floor, embedding, imports, loaders and the
live index's delay."""
