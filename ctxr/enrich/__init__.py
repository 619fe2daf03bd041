"""Enrichment: loading files, structure-aware splitting, and situating each chunk."""
