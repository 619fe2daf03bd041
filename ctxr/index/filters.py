"""Payload filters: a small filter language, parsed once, applied inside both retrievers.

A filter is a mapping from a payload field to a condition; all conditions must hold::

    {"source": "docs/",                      # under a directory (whole path components)
     "kind": ["markdown", "text"],            # any of a set
     "language": "python",                    # equality
     "token_count": {"gte": 50, "lte": 400},  # a range (gt, gte, lt, lte) on a number
     "doc_id": {"not": ["CHANGELOG.md"]}}     # none of: any field's condition, negated

Fields (`FIELDS`): the keyword fields `doc_id`, `title`, `kind`, `language` (a code file's
programming language), `natural_language` (a prose document's, detected: "en", "ja"; an index
written before it matches none until `--rebuild`), `doc_sha256`,
`heading_path` (matches any heading in the trail) and `context_kind` take a string or a list of
strings; the integer fields `index`, `start`, `end` and `token_count` take an integer, a list of
integers, or a range. `meta.KEY` matches a key of a Markdown file's YAML front matter
(`meta.tags`: `"api"` or a list, any of them; every front matter value is kept as text).
`{"not": CONDITION}` turns any field's condition around: a chunk passes when the condition
does not hold for it (`{"source": {"not": "tests/"}}`, `{"token_count": {"not": {"lt": 20}}}`),
including a chunk that lacks the field (a prose chunk passes `{"language": {"not": "python"}}`).
An unknown field, operator or a value of the wrong type is a `ConfigError` naming the field.

`source` takes a string or a list of strings (any of them); each is one of:

- `docs/` (trailing slash): any file under the directory `docs`, at any depth;
- `docs/guide.md`: that file, or, if it names a directory, anything under it;
- `*.md` or `**/*.md`: any `.md` file; `docs/*.md`: `.md` files directly in `docs`;
  `docs/**/*.md`: `.md` files anywhere under `docs`. Other globs are refused: Qdrant matches
  keywords exactly, so a glob is answered from the payload fields the writer derives from the
  path (`source_dirs`, every ancestor directory; `source_dir`, the parent; `source_ext`, the
  suffix). Matching is case-sensitive. An index written before these fields existed matches no
  directory or glob filter until it is re-indexed with `--rebuild`.

The parsed form (`PayloadFilter`) is translated to qdrant-edge's and qdrant-client's `Filter`
(`edge_filter`, `client_filter`, same semantics) and passed as the query filter of the dense and
the BM25 search, so k hits come back even when most of the index is filtered out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxr.errors import ConfigError

if TYPE_CHECKING:
    pass

KEYWORD = "keyword"
INTEGER = "integer"
FIELDS: dict[str, str] = {
    "source": KEYWORD,
    "doc_id": KEYWORD,
    "title": KEYWORD,
    "kind": KEYWORD,
    "language": KEYWORD,
    "natural_language": KEYWORD,
    "doc_sha256": KEYWORD,
    "heading_path": KEYWORD,
    "context_kind": KEYWORD,
    "index": INTEGER,
    "start": INTEGER,
    "end": INTEGER,
    "token_count": INTEGER,
}
RANGE_OPERATORS = ("gt", "gte", "lt", "lte")
_CLI_OPERATORS = re.compile(
    r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)?)\s*(>=|<=|!=|>|<|=)(.*)$"
)
NOT = "not"
# Front matter keys (`Document.meta`, written as the payload's `meta` object): `meta.tags`.
META_PREFIX = "meta."
_META_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_CLI_RANGE = {">=": "gte", "<=": "lte", ">": "gt", "<": "lt"}
_GLOB_CHARS = re.compile(r"[*?\[\]]")
_EXT = re.compile(r"^\*\.([^*?\[\]/.]+)$")

Scalar = str | int


@dataclass(frozen=True, slots=True)
class Match:
    """The field holds (or, for an array field, contains) any of `values`."""

    key: str
    values: tuple[Scalar, ...]


@dataclass(frozen=True, slots=True)
class Range:
    key: str
    gt: float | None = None
    gte: float | None = None
    lt: float | None = None
    lte: float | None = None


@dataclass(frozen=True, slots=True)
class AnyOf:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AllOf:
    conditions: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """`condition` does not hold (a point without the field passes a negated match)."""

    condition: Condition


Condition = Match | Range | AnyOf | AllOf | Not
PayloadFilter = AllOf


def parse_filters(spec: Mapping[str, Any] | None) -> PayloadFilter | None:
    """Validate a filter mapping into its parsed form; None or {} means no filter."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigError(f"filters must be an object of field: condition, got {spec!r}")
    conditions: list[Condition] = []
    for key, value in spec.items():
        is_meta = isinstance(key, str) and key.startswith(META_PREFIX)
        if not is_meta and key not in FIELDS:
            raise ConfigError(
                f"unknown filter field {key!r}; filterable fields: {', '.join(FIELDS)}, "
                f"or {META_PREFIX}KEY for a Markdown front matter key"
            )
        conditions.append(_negatable(key, value))
    return AllOf(tuple(conditions)) if conditions else None


def _negatable(key: str, value: Any) -> Condition:
    """`{"not": CONDITION}` is CONDITION turned around; anything else is the field's own."""
    if isinstance(value, Mapping) and NOT in value:
        if len(value) != 1:
            raise ConfigError(
                f"filter field {key!r}: 'not' stands alone, e.g. {{{NOT!r}: {{'lt': 20}}}} "
                "for a range turned around"
            )
        inner = value[NOT]
        if isinstance(inner, Mapping) and NOT in inner:
            raise ConfigError(f"filter field {key!r}: 'not' of 'not'; give the condition itself")
        return Not(_condition(key, inner))
    return _condition(key, value)


def _condition(key: str, value: Any) -> Condition:
    if key.startswith(META_PREFIX):
        return _meta(key, value)
    return _source(value) if key == "source" else _field(key, value)


def filters_from_cli(expressions: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` (repeated: any of), `KEY!=VALUE` (repeated: none of), `KEY>=N`, `KEY<=N`,
    `KEY>N`, `KEY<N` into a filter mapping; integer fields' values are converted."""
    spec: dict[str, Any] = {}
    for expression in expressions:
        found = _CLI_OPERATORS.match(expression.strip())
        if not found:
            raise ConfigError(
                f"cannot read filter {expression!r}; write KEY=VALUE, KEY!=VALUE or KEY>=N "
                "(also <=, >, <)"
            )
        key, op, raw = found.group(1), found.group(2), found.group(3).strip()
        value: Any = raw
        if FIELDS.get(key) == INTEGER:
            try:
                value = float(raw) if op != "=" and "." in raw else int(raw)
            except ValueError:
                raise ConfigError(f"filter field {key!r} takes a number, got {raw!r}") from None
        previous = spec.get(key)
        if op == "!=":
            if previous is not None and not (isinstance(previous, dict) and NOT in previous):
                raise ConfigError(f"filter field {key!r}: mix of != and = or a range")
            held = None if previous is None else previous[NOT]
            spec[key] = {NOT: value if held is None else [*_as_list(held), value]}
        elif op == "=":
            if isinstance(previous, dict):
                raise ConfigError(f"filter field {key!r}: mix of = and a range or !=")
            spec[key] = value if previous is None else [*_as_list(previous), value]
        else:
            bounds = spec.setdefault(key, {})
            if not isinstance(bounds, dict) or NOT in bounds:
                raise ConfigError(f"filter field {key!r}: mix of a range and = or !=")
            bounds[_CLI_RANGE[op]] = value
    return spec


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _field(key: str, value: Any) -> Condition:
    kind = FIELDS[key]
    if isinstance(value, Mapping):
        if kind != INTEGER:
            raise ConfigError(f"filter field {key!r} is text: give a value or a list, not a range")
        unknown = [op for op in value if op not in RANGE_OPERATORS]
        if unknown or not value:
            raise ConfigError(
                f"filter field {key!r}: unknown range operator {unknown[0] if unknown else None!r};"
                f" use {', '.join(RANGE_OPERATORS)}"
            )
        bounds: dict[str, float] = {}
        for op, bound in value.items():
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                raise ConfigError(f"filter field {key!r}: {op} takes a number, got {bound!r}")
            bounds[op] = float(bound)
        return Range(key, **bounds)
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"filter field {key!r}: an empty list matches nothing; drop the field")
    for item in values:
        wanted_type = str if kind == KEYWORD else int
        if isinstance(item, bool) or not isinstance(item, wanted_type):
            what = "a string" if kind == KEYWORD else "an integer"
            raise ConfigError(f"filter field {key!r} takes {what} or a list of them, got {item!r}")
    return Match(key, tuple(dict.fromkeys(values)))


def _meta(key: str, value: Any) -> Condition:
    """`meta.tags`: any of the given texts (a number is matched as the text the loader kept)."""
    name = key.removeprefix(META_PREFIX)
    if not _META_KEY.match(name):
        raise ConfigError(
            f"filter field {key!r}: a front matter key is a plain name (letters, digits, _ "
            "and -), e.g. meta.tags"
        )
    values = value if isinstance(value, list) else [value]
    if isinstance(value, Mapping) or not values:
        raise ConfigError(f"filter field {key!r} takes a value or a non-empty list of them")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, str | int):
            raise ConfigError(
                f"filter field {key!r} takes a string or an integer, or a list of them; "
                f"got {item!r}"
            )
    return Match(key, tuple(dict.fromkeys(str(item) for item in values)))


def _source(value: Any) -> Condition:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ConfigError(
            f"filter field 'source' takes a path, directory/ or glob, or a list of them; "
            f"got {value!r}"
        )
    options = [_one_source(v.strip()) for v in values]
    return options[0] if len(options) == 1 else AnyOf(tuple(options))


def _one_source(pattern: str) -> Condition:
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not _GLOB_CHARS.search(pattern):
        if pattern.endswith("/"):
            return Match("source_dirs", (pattern.rstrip("/"),))
        return AnyOf((Match("source", (pattern,)), Match("source_dirs", (pattern,))))
    head, _, tail = pattern.rpartition("/")
    ext = _EXT.match(tail)
    recursive = head == "**" or head.endswith("/**")
    base = "" if head == "**" else head.removesuffix("/**") if recursive else head
    if not ext or _GLOB_CHARS.search(base):
        raise ConfigError(
            f"filter field 'source': unsupported glob {pattern!r}; use DIR/, *.EXT, DIR/*.EXT "
            "or DIR/**/*.EXT (the glob is matched inside the search, so only these forms work)"
        )
    suffix = Match("source_ext", ("." + ext.group(1),))
    if not base:
        return suffix
    return AllOf((Match("source_dirs" if recursive else "source_dir", (base,)), suffix))


# Fields every chunk of a document shares: a filter on them means the same for a document's
# carrier point (its whole-document BM25, `ctxr.retrieve.documents`) as for its chunks.
_DOCUMENT_FIELDS = frozenset(
    {"doc_id", "source", "source_dirs", "source_dir", "source_ext", "title", "kind", "language",
     "natural_language", "doc_sha256"}
)  # fmt: skip


def is_document_level(spec: PayloadFilter | None) -> bool:
    """Whether `spec` names only document fields (and `meta.*`), so a document passes it or
    fails it as a whole; a filter on chunk fields (heading_path, offsets) is not."""

    def keys(c: Condition) -> list[str]:
        if isinstance(c, AllOf | AnyOf):
            return [k for x in c.conditions for k in keys(x)]
        if isinstance(c, Not):
            return keys(c.condition)
        return [c.key]

    if spec is None:
        return True
    return all(k in _DOCUMENT_FIELDS or k.startswith(META_PREFIX) for k in keys(spec))


def match_values(c: Match) -> list[str] | list[int]:
    # `_field` checked that one field's values share a type.
    if all(isinstance(v, str) for v in c.values):
        return [str(v) for v in c.values]
    return [int(v) for v in c.values]
