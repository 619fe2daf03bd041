"""Rerankers: the protocol and shared scoring helpers (`base`), the choice by name
(`registry`), and one module per kind (`llm`, `http`, `cross_encoder`).
"""
