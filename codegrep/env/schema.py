"""The tool schemas: typed functions whose docstrings are the descriptions (TRL style).

Tool names and arguments:
  grep {pattern, path?, include?, ignore_case?, context?}
  glob {pattern, path?}
  read {path, start_line?, end_line?}
:func:`tool_schemas` turns them into function-calling JSON.
"""
from __future__ import annotations

import inspect
import types
import typing
from typing import Any

def grep(pattern: str, path: str | None = None, include: str | None = None, ignore_case: bool = False,
         context: int = 0) -> str:
    """Search file contents with a regular expression (ripgrep syntax); returns sorted `path:line:text` lines.

    Args:
        pattern: Regular expression to search for, e.g. `def parse_args` or `class \\w+Error`.
        path: Repository-relative directory or file to search in (default: the whole repository).
        include: Glob restricting which files are searched, e.g. `*.py` or `src/**/*.{c,h}`.
        ignore_case: Match case-insensitively.
        context: Lines of context to show around each match (0-10).
    """
    raise NotImplementedError("schema only: the environment runs this tool")


def glob(pattern: str, path: str | None = None) -> str:
    """List repository files whose path matches a glob; `*` stays in one directory, `**` crosses them.

    Args:
        pattern: Glob such as `**/*.py`, `tests/test_*.py` or `setup.cfg` (no `/` matches the name anywhere).
        path: Repository-relative directory to list under (default: the whole repository).
    """
    raise NotImplementedError("schema only: the environment runs this tool")


def read(path: str, start_line: int | None = None, end_line: int | None = None) -> str:
    """Read a text file as numbered lines.

    Args:
        path: Repository-relative file path, e.g. `src/pkg/module.py`.
        start_line: First line to show (1-based, default 1).
        end_line: Last line to show (inclusive; default: 200 lines from start_line).
    """
    raise NotImplementedError("schema only: the environment runs this tool")


def submit(files: list[str]) -> str:
    """Finish: submit the repository files relevant to the issue, most relevant first.

    Args:
        files: Repository-relative file paths, ranked by relevance.
    """
    raise NotImplementedError("schema only: the agent loop handles submit")


_JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}


def _json_type(tp: Any) -> dict[str, Any]:
    """JSON schema of a type hint, in the shape ``transformers.utils.get_json_schema`` writes."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return {**_json_type(args[0]), "nullable": True}
    if typing.get_origin(tp) is list:
        return {"type": "array", "items": _json_type(args[0])}
    return {"type": _JSON_TYPES[tp]}


def function_schema(fn: Any) -> dict[str, Any]:
    """A typed function with a Google-style docstring -> an OpenAI/Qwen function-calling schema
    (the TRL convention; same output as ``transformers.utils.get_json_schema`` without importing it)."""
    doc = inspect.getdoc(fn) or ""
    head, _, args_block = doc.partition("\nArgs:\n")
    described: dict[str, str] = {}
    for line in args_block.splitlines():
        name, sep, text = line.strip().partition(": ")
        if sep and line.startswith("    ") and not line.startswith("     ") and name.isidentifier():
            described[name] = text.strip()
        elif described and line.strip():
            last = list(described)[-1]
            described[last] += " " + line.strip()
    hints = typing.get_type_hints(fn)
    params = inspect.signature(fn).parameters
    properties = {name: {**_json_type(hints[name]), "description": described.get(name, "")} for name in params}
    required = [name for name, p in params.items() if p.default is inspect.Parameter.empty]
    return {"type": "function", "function": {"name": fn.__name__, "description": " ".join(head.split()),
                                             "parameters": {"type": "object", "properties": properties,
                                                            "required": required}}}


def tool_schemas() -> list[dict]:
    """Function-calling JSON schemas (OpenAI/Qwen format) for grep, glob, read and submit."""
    return [function_schema(fn) for fn in (grep, glob, read, submit)]
