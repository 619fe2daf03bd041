"""MCP tools that refuse what they do not take, say what they do, and explain a refusal in words.

The SDK (`mcp` 2.x) builds a tool's argument model from the function's signature, but that
model ignores an argument it does not know (`{"query": "x", "top_k": 3}` searched with the
default k and said nothing), and an argument it refuses comes back as pydantic's report: a
count, the model's name, `[type=..., input_value=...]` and a link to pydantic's documentation.
A model reading that has to guess what to change.

`strict_tool` makes the SDK's tool, then swaps its argument model for one that forbids extra
arguments (so the published input schema says `additionalProperties: false`, and the server
holds to it) and its argument check for one that answers a refusal as one sentence per
argument, naming it, what it should be and what was given, ending with what to do. The
refusal stays a tool error (`is_error`), as the MCP specification asks for argument errors, so
the model can read it and call again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, ValidationError

# Where a refused call's explanation travels from the argument check to the call itself: the
# SDK reports a ValidationError raised by the check in pydantic's words, and any other
# exception there as a crash, so the check hands the sentence on and the call raises it.
_REFUSED: Final = "\0refused"
_SHOWN_INPUT = 60  # characters of a refused value echoed back
_F = TypeVar("_F", bound=Callable[..., Any])


def read_only(title: str) -> ToolAnnotations:
    """The hints for a tool that only reads this machine's index: no side effects, nothing
    outside the index reached, the same answer for the same arguments."""
    return ToolAnnotations(
        title=title,
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    )


def strict_tool(fn: Callable[..., Any], *, title: str, description: str) -> Tool:
    """The SDK's tool for `fn`, read-only, with unknown arguments refused and refusals in words."""
    tool = Tool.from_function(
        fn, title=title, description=description, annotations=read_only(title)
    )
    loose = tool.fn_metadata
    config = ConfigDict(**{**loose.arg_model.model_config, "extra": "forbid"})
    strict: type[ArgModelBase] = type(
        loose.arg_model.__name__, (loose.arg_model,), {"model_config": config,
                                                       "__module__": __name__},
    )  # fmt: skip
    checked = _Explained(
        arg_model=strict,
        output_schema=loose.output_schema,
        output_model=loose.output_model,
        wrap_output=loose.wrap_output,
        tool_name=tool.name,
    )
    return tool.model_copy(
        update={"fn_metadata": checked, "parameters": strict.model_json_schema(by_alias=True)}
    )


class _Explained(FuncMetadata):
    tool_name: str = ""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        try:
            return super().validate_arguments(arguments_to_validate)
        except ValidationError as exc:
            fields = list(self.arg_model.model_fields)
            return {_REFUSED: explain(exc, self.tool_name, fields)}

    async def call_fn(
        self,
        fn: Callable[..., Any | Awaitable[Any]],
        fn_is_async: bool,
        arguments: dict[str, Any],
        arguments_to_pass_directly: dict[str, Any] | None = None,
    ) -> Any:
        if _REFUSED in arguments:
            raise ToolError(arguments[_REFUSED])
        return await super().call_fn(fn, fn_is_async, arguments, arguments_to_pass_directly)


def explain(exc: ValidationError, tool: str, fields: Sequence[str]) -> str:
    """A refused call's errors as sentences: each argument named, then what to do."""
    parts = [_one(error, tool, fields) for error in exc.errors(include_url=False)]
    return f"invalid arguments: {'; '.join(parts)}. Fix {_them(len(parts))} and call {tool} again."


def _one(error: Any, tool: str, fields: Sequence[str]) -> str:
    name = ".".join(str(part) for part in error["loc"]) or "the arguments"
    kind = error["type"]
    if kind == "missing":
        return f"`{name}` is required"
    if kind == "extra_forbidden":
        return f"`{name}` is not an argument of {tool}, which takes {', '.join(fields)}"
    given = repr(error.get("input"))
    if len(given) > _SHOWN_INPUT:
        given = given[:_SHOWN_INPUT] + "..."
    message = str(error["msg"])
    if kind == "string_pattern_mismatch" and (error.get("ctx") or {}).get("pattern") == r"\S":
        return f"`{name}` should have a character other than spaces (given {given})"
    for prefix in ("Input ", "String "):  # "Input should be ...": the argument should be
        if message.startswith(prefix + "should"):
            return f"`{name}` {message.removeprefix(prefix)} (given {given})"
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)  # a validator's own sentence, as written
    return f"`{name}`: {message} (given {given})"


def _them(count: int) -> str:
    return "it" if count == 1 else "them"


class StrictTools:
    """A decorator collecting `strict_tool`s, for `MCPServer(tools=...)`."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def tool(self, title: str, description: str) -> Callable[[_F], _F]:
        def register(fn: _F) -> _F:
            self.tools.append(strict_tool(fn, title=title, description=description))
            return fn

        return register
