"""Stores: the protocol (`base`), the embedded qdrant-edge shard (`edge`), a Qdrant server
(`server`) and the choice between them (`factory`). Each translates `ctxr.index.filters` itself.
"""
