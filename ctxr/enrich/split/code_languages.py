"""What the code splitter knows about each language: its grammar wheel and its node types.

Grammars come from the per-language PyPI wheels (``tree-sitter-python`` and so on), which
parse offline. A wheel that is missing or fails to load makes ``parser_for`` return None once
with a logged notice, and the caller falls back to the recursive splitter.

The node-type knowledge is deliberately generic: a definition's name is its ``name`` field
(or the end of its ``declarator`` chain in C and C++), its body is its ``body`` field or the
first block-like node below it, and a few wrapper nodes (decorators, ``export``, ``template``,
Go's ``type``) are looked through.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from functools import cache

from tree_sitter import Language, Node, Parser

log = logging.getLogger(__name__)

# language -> (grammar module, function returning the language pointer)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "java": ("tree_sitter_java", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "go": ("tree_sitter_go", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
}
SUPPORTED = frozenset(_GRAMMARS) - {"tsx"}  # tsx is chosen by file suffix within typescript

# Top-level nodes that make up a file's import block (repeated in a member chunk's prefix).
IMPORT_TYPES = frozenset(
    (
        *("import_statement", "import_from_statement", "future_import_statement"),
        *("import_declaration", "package_declaration", "package_clause"),
        *("use_declaration", "extern_crate_declaration", "preproc_include", "using_declaration"),
    )
)
# Nodes that belong to the definition right below them when no blank line separates them.
LEADING_TYPES = frozenset(
    ("comment", "line_comment", "block_comment", "attribute_item", "decorator", "annotation")
)
_WRAPPERS = frozenset(("decorated_definition", "export_statement", "template_declaration"))
_BODY_TYPES = frozenset(
    (
        *("block", "compound_statement", "statement_block", "class_body", "declaration_list"),
        *("field_declaration_list", "enum_body", "interface_body", "enum_variant_list"),
        *("object_type", "constructor_body", "enum_member_declaration_list"),
    )
)
STATEMENT_BODIES = frozenset(("block", "compound_statement", "statement_block"))
_CLASSISH = ("class", "struct", "interface", "impl", "trait", "enum", "namespace", "type")
_DEFINITION = (*_CLASSISH, "function", "method", "constructor", "macro")


@cache
def parser_for(language: str) -> Parser | None:
    """A parser for ``language``, or None (logged once) when its grammar cannot be loaded."""
    module_name, attr = _GRAMMARS[language]
    try:
        module = importlib.import_module(module_name)
        make: Callable[[], object] = getattr(module, attr)
        return Parser(Language(make()))
    except Exception as exc:  # any failure to load a grammar means: split without it
        log.warning(
            "tree-sitter grammar for %s unavailable (%s); splitting %s files by lines instead. "
            "Install %s to split them by syntax.",
            language, exc, language, module_name.replace("_", "-"),
        )  # fmt: skip
        return None


def unwrap(node: Node) -> Node:
    """The definition inside decorator, export, template and Go ``type`` wrappers."""
    while True:
        inner: Node | None = None
        if node.type in _WRAPPERS:
            inner = node.child_by_field_name("definition") or node.child_by_field_name(
                "declaration"
            )
            if inner is None and node.named_children:
                inner = node.named_children[-1]
        elif node.type == "type_declaration":
            specs = [c for c in node.named_children if c.type == "type_spec"]
            inner = specs[0] if len(specs) == 1 else None
        if inner is None:
            return node
        node = inner


def is_definition(node: Node) -> bool:
    """Whether a node inside a function body is a definition worth a symbol path entry."""
    return _is_definition_type(node.type)


def is_classish(node: Node) -> bool:
    return _is_classish_type(node.type)


@cache
def _is_definition_type(node_type: str) -> bool:  # a grammar has a few hundred node types
    return any(word in node_type for word in _DEFINITION)


@cache
def _is_classish_type(node_type: str) -> bool:
    return any(word in node_type for word in _CLASSISH)


def _text(node: Node) -> str:
    raw = node.text or b""
    return " ".join(raw.decode("utf-8", "replace").split())


def symbol_name(node: Node, language: str) -> tuple[str, ...]:
    """The symbol path entries a definition adds (usually one name), or () if it has none."""
    name = node.child_by_field_name("name")
    if node.type == "impl_item":
        name = node.child_by_field_name("type")
    elif node.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        name = declarators[0].child_by_field_name("name") if len(declarators) == 1 else None
    elif name is None:
        declarator = node.child_by_field_name("declarator")
        while declarator is not None:
            name = declarator
            inner = declarator.child_by_field_name("declarator")
            if inner is None:  # C++ `T& f()` / `T&& f()`: the reference wraps it unnamed
                inner = next(
                    (c for c in declarator.named_children if c.type.endswith("declarator")), None
                )
            declarator = inner
        if name is not None and name.child_by_field_name("name") is not None:
            name = name.child_by_field_name("name")
    if name is None or name.type.endswith("parameter_list"):
        return ()
    text = _text(name)
    if not text:
        return ()
    if node.type == "method_declaration" and language == "go":
        receiver = node.child_by_field_name("receiver")
        owner = _first_of_type(receiver, "type_identifier") if receiver else None
        return (_text(owner), text) if owner else (text,)
    if language == "cpp" and "::" in text:
        return tuple(part for part in text.split("::") if part)
    return (text,)


def _first_of_type(node: Node, node_type: str) -> Node | None:
    stack = [node]
    while stack:
        current = stack.pop(0)
        if current.type == node_type:
            return current
        stack.extend(current.named_children)
    return None


def find_body(node: Node) -> Node | None:
    """The node whose named children are the definition's members or statements."""
    body = node.child_by_field_name("body")
    if body is not None and body.named_child_count:
        return body
    frontier = list(node.named_children)
    for _ in range(4):  # e.g. lexical_declaration > variable_declarator > arrow_function > body
        nxt: list[Node] = []
        for child in frontier:
            if child.type in _BODY_TYPES and child.named_child_count:
                return child
            nxt.extend(child.named_children)
        frontier = nxt
    return None
