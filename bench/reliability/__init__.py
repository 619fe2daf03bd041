"""Hostile inputs and interruptions: pathological files, `kill -9` while indexing."""
