"""The reference pages that are generated from the code, never written by hand.

- `cli_reference()`: every command of `ctxr`, read from its click commands (usage, help, every
  argument and option with its type, default and help).
- `settings_reference()`: every field of `ctxr.config.Settings` as its `CTXR_*` variable,
  with its type, default, what it does (the field's description, else the comment above it in
  `.env.example`) and what changing it does to an existing index.

Both are plain functions, importable without MkDocs (the tests call them directly). MkDocs
runs this file as a hook (`hooks:` in mkdocs.yml): `on_page_markdown` puts their output where
a page holds the `<!-- ctxr:cli -->` or `<!-- ctxr:settings -->` marker.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / ".env.example"
MARKERS = {"<!-- ctxr:cli -->": "cli", "<!-- ctxr:settings -->": "settings"}

# --- the CLI -------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """Text that is safe in one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _param_type(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return "flag"
    if isinstance(param.type, click.Choice):
        return " \\| ".join(f"`{choice}`" for choice in param.type.choices)
    return param.type.name.lower()


def _param_default(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return ""
    default = param.default
    # click 8.3 marks "no default" with a sentinel object of its own.
    if default is None or default == () or callable(default) or "UNSET" in repr(default):
        return ""
    if isinstance(default, bool) and isinstance(param, click.Option) and param.secondary_opts:
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    return f"`{default}`"


def _param_names(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return f"`{param.human_readable_name}`" + (" (repeatable)" if param.nargs == -1 else "")
    names = [*param.opts, *param.secondary_opts]
    repeat = " (repeatable)" if isinstance(param, click.Option) and param.multiple else ""
    return ", ".join(f"`{name}`" for name in names) + repeat


def _param_help(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return "required" if param.required else "optional"
    if text := getattr(param, "help", None):
        return str(text)
    # An option without help of its own that sets a setting says what the setting does.
    from ctxr.config import setting_fields

    field = setting_fields().get(param.name or "")
    if field is not None and field.description:
        return f"{field.description} [CTXR_{(param.name or '').upper()}]"
    return ""


def _commands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        yield name, command
        if isinstance(command, click.Group):
            sub = click.Context(command, info_name=name, parent=ctx)
            for sub_name, sub_command in _commands(command, sub):
                yield f"{name} {sub_name}", sub_command


def _command_section(path: str, command: click.Command, ctx: click.Context, level: int) -> str:
    usage = " ".join(command.collect_usage_pieces(ctx))
    help_text = inspect.cleandoc(command.help or "")
    lines = [f"{'#' * level} `{path}`", "", help_text, "", "```text", f"{path} {usage}", "```", ""]
    params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    if params:
        lines += ["| argument or option | type | default | what it does |", "|---|---|---|---|"]
        for param in params:
            cells = (_param_names(param), _param_type(param), _param_default(param),
                     _cell(_param_help(param)))  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def cli_reference() -> str:
    """Markdown for every `ctxr` command, in the order `ctxr --help` lists them."""
    from ctxr.cli import main

    root = click.Context(main, info_name="ctxr")
    parts = [_command_section("ctxr", main, root, 2)]
    for path, command in _commands(main, root):
        ctx = click.Context(command, info_name=path.split()[-1], parent=root)
        parts.append(_command_section(f"ctxr {path}", command, ctx, 2))
    return "\n".join(parts)


# --- the settings --------------------------------------------------------------------------

_SETTING_LINE = re.compile(r"^#?\s*(CTXR_[A-Z0-9_]+)=")


def env_comments(path: Path = ENV_EXAMPLE) -> dict[str, str]:
    """`.env.example`'s comment for each variable: the comment lines right above it (a run of
    variables shares the comment above the run)."""
    found: dict[str, str] = {}
    pending: list[str] = []
    after_setting = False
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if match := _SETTING_LINE.match(line):
            found[match.group(1)] = " ".join(pending)
            after_setting = True
        elif line.startswith("#"):
            if after_setting:
                pending, after_setting = [], False
            pending.append(line.lstrip("#").strip())
        else:
            pending, after_setting = [], False
    return found


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{choice}`" for choice in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in get_args(annotation) if a is not type(None))
    if get_origin(annotation) is not None and hasattr(annotation, "__metadata__"):
        return _type_name(get_args(annotation)[0])  # Annotated[...]
    if origin in (dict,):
        return "`KEY=VALUE,...`"
    if origin in (frozenset, set, list, tuple):
        return "comma-separated names"
    if annotation is SecretStr:
        return "secret string"
    if isinstance(annotation, type):
        return {"Path": "path", "str": "string", "int": "integer", "float": "number",
                "bool": "boolean"}.get(annotation.__name__, annotation.__name__)  # fmt: skip
    return str(annotation)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return f"`{','.join(f'{k}={v}' for k, v in value.items())}`" if value else "empty"
    if isinstance(value, frozenset | set | list | tuple):
        return f"`{','.join(sorted(map(str, value)))}`" if value else "empty"
    return f"`{value}`"


def _fields_read_by(module: str, function: str | None = None) -> set[str]:
    """The settings a piece of code reads (`settings.NAME`), so that the impact column follows
    the code as settings are added to it."""
    try:
        target: Any = importlib.import_module(module)
        if function is not None:
            target = getattr(target, function)
        source = inspect.getsource(target)
    except (ImportError, AttributeError, OSError, TypeError):
        return set()
    return set(re.findall(r"settings\.(?:\w+\.)?(\w+)", source))


# What a change does beyond the document recipe and the index's recorded vector settings,
# which are read from the code below.
_BY_CONTEXT_PLAN = {"context", "llm_provider", "llm_model", "llm_group_size"}
_EMBEDDER = {"embedder", "embedding_model", "embedding_dimensions"}
_WHERE = {"index_dir", "qdrant_url", "qdrant_collection"}
_ON_CREATION = {"qdrant_shards", "qdrant_replicas", "quantization"}


def _impact(name: str, recipe: set[str], recorded: set[str]) -> str:
    if name in _WHERE:
        return "another index: points at a different store"
    if name in _EMBEDDER or name in recorded:
        return "refused by an existing index: `ctxr index --rebuild`"
    if name in _BY_CONTEXT_PLAN:
        return "re-indexes documents whose contexts it shapes (cached answers reused)"
    if name in recipe:
        return "re-indexes the documents it shapes (part of each document's recipe)"
    if name in _ON_CREATION:
        return "only when ctxr creates the collection or shard (`--rebuild`)"
    return "nothing: read by the next run or search"


def _settings_rows(
    model: type[BaseModel],
    prefix: str,
    recipe: set[str],
    recorded: set[str],
    skip: set[str] | frozenset[str] = frozenset(),
) -> Iterator[tuple[str, str, str, str, str, str]]:
    comments = env_comments()
    for name, field in model.model_fields.items():
        if name in skip:  # a group, given its own table
            continue
        annotation = field.annotation
        alias = field.validation_alias
        if isinstance(alias, str):
            env = alias.upper()
        elif alias is not None and getattr(alias, "choices", None):
            env = str(next(c for c in alias.choices if isinstance(c, str))).upper()
        else:
            env = f"{prefix}{name}".upper()
        # .env.example's comment says more than the field's one-line description.
        what = comments.get(env) or field.description or ""
        # A comment that points at a page of this site becomes a link to it.
        what = re.sub(r"docs/((?:explanation|how-to|reference|tutorials)/[\w-]+)\.md",
                      r"[\1](../\1.md)", what)  # fmt: skip
        yield (env, name, _type_name(annotation), _default(field), _cell(what),
               _impact(name, recipe, recorded))  # fmt: skip


def settings_reference() -> str:
    """Markdown for every `CTXR_*` setting of `ctxr.config.Settings`: where the index lives,
    then one table per group (`settings.split`, `settings.llm`, ...), in the classes' order."""
    from ctxr.config import GROUPS, Settings

    recipe = _fields_read_by("ctxr.pipeline.recipe")
    recorded = _fields_read_by("ctxr.index.components", "index_settings")
    prefix = str(Settings.model_config.get("env_prefix", "CTXR_"))
    header = [
        "| variable | type | default | what it does | changing it |",
        "|---|---|---|---|---|",
    ]

    def table(model: type[BaseModel], skip: Iterable[str] = ()) -> list[str]:
        rows = list(header)
        for env, name, type_name, default, what, impact in _settings_rows(
            model, prefix, recipe, recorded, skip=set(skip)
        ):
            rows.append(f"| `{env}`<br>`{name}` | {type_name} | {default} | {what} | {impact} |")
        return rows

    lines = ["### Where the index lives", "", *table(Settings, skip=GROUPS), ""]
    for group, model in GROUPS.items():
        doc = inspect.cleandoc(model.__doc__ or "")
        lines += [f"### `settings.{group}`", "", doc, "", *table(model), ""]
    return "\n".join(lines)


# --- the MkDocs hook -----------------------------------------------------------------------


def on_page_markdown(markdown: str, **_: Any) -> str:
    for marker, which in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(
                marker, cli_reference() if which == "cli" else settings_reference()
            )
    return markdown
