"""Tool call/result value types (the contract shared by agent, trainer, MCP server and tests), the tool
schemas, the tool configuration, and :func:`open_environment`.

Tool names and arguments:
  grep {pattern, path?, include?, ignore_case?, context?}
  glob {pattern, path?}
  read {path, start_line?, end_line?}
The typed functions :func:`grep`, :func:`glob`, :func:`read`, :func:`submit` are the schema (TRL style:
the docstring is the description); :func:`tool_schemas` turns them into function-calling JSON.
Implementations (re-exported here): ``RepoToolEnvironment`` (a directory: pooled worktree or a live
checkout, ``codegrep.env.workdir``) and ``GitObjectEnvironment`` (checkout-free, ``codegrep.env.gitobjects``).
"""
from __future__ import annotations

import inspect
import json
import types
import typing
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from codegrep.data.tasks import Task
    from codegrep.env.pool import WorktreePool

TOOL_NAMES = ("grep", "glob", "read")


@dataclass
class ToolCall:
    """One call the model made."""

    name: str
    """Tool name: ``grep``, ``glob`` or ``read`` (anything else is answered with an error)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments as the model wrote them (validated by the environment, never trusted)."""


@dataclass
class ToolResult:
    """What the environment answered to one call; errors are results, never exceptions."""

    name: str
    ok: bool
    output: str = ""
    error: str = ""
    truncated: bool = False
    latency_ms: float = 0.0
    bytes_out: int = 0

    def text(self) -> str:
        """Exactly what the model sees for this call."""
        return self.output if self.ok else f"ERROR: {self.error}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ToolError(ValueError):
    """A call that cannot be answered (missing file, bad regex, ...); the message goes to the model."""


@dataclass
class ToolConfig:
    """Caps, timeouts and parallelism of the tools (the ``env:`` section of a profile)."""

    max_output_lines: int = 200
    """grep: most result lines returned (a note says how many were cut)."""
    max_output_bytes: int = 16_000
    """grep/glob/read: most bytes of output returned."""
    max_read_lines: int = 200
    """read: most lines returned per call (the default window when ``end_line`` is omitted)."""
    max_glob_results: int = 200
    """glob: most paths returned."""
    max_line_chars: int = 400
    """Longer lines (minified code) are cut to this many characters."""
    max_context: int = 10
    """grep: largest accepted ``context``."""
    max_file_bytes: int = 8_000_000
    """read refuses, and grep skips, files larger than this."""
    capture_bytes: int = 4_000_000
    """Raw subprocess output read before the process is killed (bounds memory on ``grep .``)."""
    timeout_s: float = 10.0
    """Per-call timeout; the call's whole process group is killed when it fires."""
    workers: int = 8
    """Calls of one turn run in parallel on at most this many threads."""

    @classmethod
    def from_dict(cls, values: dict[str, Any] | None) -> "ToolConfig":
        """Build from a profile's ``env`` section, ignoring keys that belong to the pool."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in names})


# ----------------------------------------------------------------------------- the schema
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


# ----------------------------------------------------------------------------- argument parsing
_ALLOWED = {"grep": {"pattern", "path", "include", "ignore_case", "context"},
            "glob": {"pattern", "path"}, "read": {"path", "start_line", "end_line"}}


def _int_arg(value: Any, name: str, low: int, high: int | None = None) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value) if not isinstance(value, bool) and float(value) == int(float(value)) else None
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ToolError(f"{name} must be an integer {bound}, got {value!r}")
    return number


def _bool_arg(value: Any, name: str) -> bool:
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    if isinstance(value, int):
        return bool(value)
    raise ToolError(f"{name} must be true or false, got {value!r}")


def _arguments(call: ToolCall) -> dict[str, Any]:
    args = call.arguments
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(args, dict):
        raise ToolError(f"arguments must be a JSON object, got {type(args).__name__}")
    unknown = sorted(set(args) - _ALLOWED[call.name])
    if unknown:
        raise ToolError(f"unknown argument(s) {unknown} for {call.name}; expected {sorted(_ALLOWED[call.name])}")
    return args


# ----------------------------------------------------------------------------- environments
_LAZY = {"ToolEnvironmentBase": "codegrep.env.base", "RepoToolEnvironment": "codegrep.env.workdir",
         "GitObjectEnvironment": "codegrep.env.gitobjects"}
ENV_MODES = ("worktree", "objects")


def __getattr__(name: str) -> Any:  # the implementations import this module, so re-export them lazily
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextmanager
def open_environment(task: "Task", resolver: Any, pool: "WorktreePool | None" = None, mode: str = "worktree",
                     config: ToolConfig | None = None) -> Iterator[Any]:
    """The tool environment for ``task`` at its base commit; released (and the worktree unpinned) on exit.

    ``mode``: ``worktree`` (a pooled checkout shared by concurrent rollouts) or ``objects``
    (checkout-free: served from git objects). ``resolver.resolve(repo, commit)`` gives the git dir.
    """
    from codegrep.env.gitobjects import GitObjectEnvironment
    from codegrep.env.pool import default_pool
    from codegrep.env.workdir import RepoToolEnvironment

    git_dir = Path(resolver.resolve(task.repo, task.base_commit))
    if mode == "objects":
        env = GitObjectEnvironment(git_dir, task.base_commit, config)
        try:
            yield env
        finally:
            env.close()
        return
    if mode != "worktree":
        raise ValueError(f"env.mode must be one of {ENV_MODES}, got {mode!r}")
    with (pool or default_pool()).acquire(git_dir, task.base_commit) as checkout:
        env = RepoToolEnvironment(checkout, config)
        try:
            yield env
        finally:
            env.close()
