"""The filter language (`ctxr.index.filters`) as JSON Schema, for the search request's schema.

A client or a generator reading /openapi.json then knows which fields may be filtered on and
what each takes, and the server refuses exactly what the schema forbids: a text field takes
a string or a non-empty list of strings; an integer field an integer, a non-empty list of them
or a range (gt, gte, lt, lte); `meta.KEY` a string or integer, or a non-empty list of them;
`source` a path, `DIR/`, or one of the globs `*.EXT`, `**/*.EXT`, `DIR/*.EXT`, `DIR/**/*.EXT`;
and any field `{"not": CONDITION}`, its own condition turned around.
"""

from __future__ import annotations

from typing import Any, Final

from ctxr.index.filters import FIELDS, INTEGER, META_PREFIX, NOT, RANGE_OPERATORS

_NO_GLOB = r"[^*?\[\]]*"
_EXT = r"\*\.[^*?\[\]/.]+"
# After surrounding spaces and leading "./" are dropped: a path without glob characters, or
# one of the four glob forms (the only ones the search can match).
_SOURCE = (
    rf"^(?:{_NO_GLOB}[^*?\[\]\s]{_NO_GLOB}|\s*(?:\./)*(?:{_NO_GLOB}/(?:\*\*/)?|\*\*/)?{_EXT}\s*)$"
)


def _one_or_more(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [item, {"type": "array", "items": item, "minItems": 1}]


def _negatable(condition: dict[str, Any]) -> dict[str, Any]:
    """A field's condition, or `{"not": condition}`."""
    negated = {"type": "object", "properties": {NOT: condition}, "required": [NOT],
               "additionalProperties": False}  # fmt: skip
    return {"anyOf": [condition, negated]}


def _condition(kind: str) -> dict[str, Any]:
    if kind != INTEGER:
        return {"anyOf": _one_or_more({"type": "string"})}
    bounds = {"type": "object", "minProperties": 1, "additionalProperties": False,
              "properties": {op: {"type": "number"} for op in RANGE_OPERATORS}}  # fmt: skip
    return {"anyOf": [*_one_or_more({"type": "integer"}), bounds]}


FILTERS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        name: _negatable(
            {"anyOf": _one_or_more({"type": "string", "pattern": _SOURCE})}
            if name == "source"
            else _condition(kind)
        )
        for name, kind in FIELDS.items()
    },
    "patternProperties": {
        "^" + META_PREFIX.replace(".", r"\.") + r"[A-Za-z_][A-Za-z0-9_-]*$": _negatable(
            {"anyOf": _one_or_more({"type": ["string", "integer"]})}
        )
    },
    "additionalProperties": False,
}
