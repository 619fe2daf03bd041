"""Test doubles that plug into ctxr the way real parts do (structurally, via Protocols)."""
