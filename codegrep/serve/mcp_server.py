"""CodeGrep as a retrieval sub-agent for any coding agent: an MCP server over stdio.

One tool, ``find_relevant_files``, runs a retriever (grep-heuristic by default; bm25, dense, or the
trained agent) on the live working tree or on a commit, and answers the ranked files with one-line
reasons and the cost. Bad arguments come back as tool errors (``isError``), never as a crash.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict, Field, model_validator

from codegrep import __version__
from codegrep.files import json_text
from codegrep.serve.live import RequestError, adhoc_task, open_snapshot, resolve_repo
from codegrep.serve.reasons import reasons_from_episode_file

logger = logging.getLogger(__name__)
SERVER_NAME = "codegrep"
TOOL_NAME = "find_relevant_files"
TOOL_DESCRIPTION = (
    "Find the files of a repository most relevant to a task (an issue, bug report or feature request). "
    "Returns up to max_files repository-relative paths, best first, each with a one-line reason "
    "(the grep hits or read ranges that led there), plus the cost (rounds, tool calls, seconds). "
    "Searches the live working tree (uncommitted edits included) unless a commit is given. Read-only."
)


@dataclass
class ServeConfig:
    """How ``codegrep mcp`` answers ``find_relevant_files``."""

    repo: Path | None = None
    """Served repository; requests may name only paths inside it. None: every call passes an absolute repo_path."""
    retriever: str = "grep-heuristic"
    """Retriever name for ``codegrep.retrievers.registry.make_retriever`` (grep-heuristic, bm25, dense, agent)."""
    model: str | None = None
    """Agent retriever only: a model name or path (e.g. ``smollm2`` or a trained checkpoint)."""
    endpoint: str | None = None
    """Agent retriever only: an OpenAI-compatible endpoint URL serving the policy."""
    max_files_limit: int = 50
    """Largest ``max_files`` a client may ask for."""
    max_query_chars: int = 20_000
    """Longest query accepted (issue texts are rarely longer)."""
    profile: str | None = None
    """Profile (ci, smoke, paper or a YAML path) whose ``retrievers``/``env`` sections configure the
    retriever; None: the retrievers' defaults."""

    def profile_cfg(self) -> dict[str, Any] | None:
        from codegrep.config import load_profile

        return load_profile(self.profile) if self.profile else None

    def retriever_overrides(self) -> dict[str, Any]:
        """Keyword overrides for ``make_retriever``: the agent's ``--model``/``--endpoint``."""
        if self.retriever != "agent":
            return {}
        from codegrep.config import cache_dir

        agent = ((self.profile_cfg() or {}).get("retrievers") or {}).get("agent") or {}
        episodes = agent.get("episodes_dir") or cache_dir() / "mcp" / "episodes"  # reasons are read off these
        return {"model": self.model, "endpoint": self.endpoint, "episodes_dir": str(episodes)}

    def make_retriever(self) -> Any:
        from codegrep.retrievers.registry import make_retriever

        return make_retriever(self.retriever, self.profile_cfg(), **self.retriever_overrides())


def check_query(query: Any, limit: int) -> str:
    """The stripped query, or a ``RequestError`` saying what is wrong with it.

    >>> check_query("  parser crashes on empty input ", 100)
    'parser crashes on empty input'
    >>> check_query("   ", 100)
    Traceback (most recent call last):
    ...
    codegrep.serve.live.RequestError: query is empty: describe the task (e.g. the issue text)
    """
    if not isinstance(query, str) or not query.strip():
        raise RequestError("query is empty: describe the task (e.g. the issue text)")
    if len(query) > limit:
        raise RequestError(f"query is {len(query)} characters long; the limit is {limit}")
    return query.strip()


def check_max_files(max_files: Any, limit: int) -> int:
    """``max_files`` when it is an integer in 1..limit, else a ``RequestError``.

    >>> check_max_files(10, 50)
    10
    >>> check_max_files(0, 50)
    Traceback (most recent call last):
    ...
    codegrep.serve.live.RequestError: max_files must be an integer between 1 and 50, got 0
    """
    if isinstance(max_files, bool) or not isinstance(max_files, int) or not 1 <= max_files <= limit:
        raise RequestError(f"max_files must be an integer between 1 and {limit}, got {max_files!r}")
    return max_files


def format_answer(answer: dict[str, Any]) -> str:
    """The text a coding agent reads: one ranked line per file, then the cost.

    >>> print(format_answer({"repo": "/r", "commit": "WORKTREE", "retriever": "bm25",
    ...     "files": [{"rank": 1, "path": "a.py", "reason": "score 3.1"}],
    ...     "cost": {"rounds": 0, "tool_calls": 0, "seconds": 0.012}}))
    1. a.py  (score 3.1)
    [bm25 on /r @ WORKTREE: 0 rounds, 0 tool calls, 0.01 s]
    """
    lines = [f"{f['rank']}. {f['path']}" + (f"  ({f['reason']})" if f.get("reason") else "")
             for f in answer["files"]] or ["(no relevant files found)"]
    cost = answer["cost"]
    lines.append(f"[{answer['retriever']} on {answer['repo']} @ {answer['commit']}: {cost['rounds']} rounds, "
                 f"{cost['tool_calls']} tool calls, {cost['seconds']:.2f} s]")
    return "\n".join(lines)


class FileFinder:
    """Validates a request, picks the snapshot, runs the retriever and shapes the answer.

    ``retriever`` may be injected (tests); otherwise it is built on first use, once per server.
    """

    def __init__(self, config: ServeConfig, retriever: Any = None, pool: Any = None):
        self.config = config
        self.root = config.repo.expanduser().resolve() if config.repo else None
        self._retriever = retriever
        self._pool = pool
        self._lock = threading.Lock()  # one retrieval at a time: retrievers and their caches are not thread-safe

    def retriever(self) -> Any:
        if self._retriever is None:
            self._retriever = self.config.make_retriever()
        return self._retriever

    def pool(self) -> Any:
        """The worktree pool for commit requests, made on first use (live-tree requests never need it)."""
        if self._pool is None:
            from codegrep.env.pool import default_pool
            self._pool = default_pool((self.config.profile_cfg() or {}).get("env"))
        return self._pool

    def find(self, query: str, repo_path: str | None = None, max_files: int = 10,
             commit: str | None = None) -> dict[str, Any]:
        """The answer as a JSON-able dict (files with rank/path/reason, cost, repo, commit, head)."""
        started = time.perf_counter()
        query = check_query(query, self.config.max_query_chars)
        max_files = check_max_files(max_files, self.config.max_files_limit)
        repo = resolve_repo(repo_path, self.root)
        with self._lock:
            retriever = self.retriever()
            with open_snapshot(repo, commit, self.pool) as snap:
                result = retriever.retrieve(adhoc_task(query, repo, snap.commit), snap.path)
        reasons = reasons_from_episode_file(result.extra.get("episode_path"), result.files) or result.reasons
        files = [{"rank": i + 1, "path": p, "reason": reasons.get(p, "")}
                 for i, p in enumerate(result.files[:max_files])]
        return {"repo": str(repo), "commit": snap.commit, "head": snap.head,
                "retriever": getattr(retriever, "name", self.config.retriever), "files": files,
                "cost": {"rounds": result.rounds, "tool_calls": result.tool_calls, "tokens": result.tokens,
                         "seconds": round(time.perf_counter() - started, 4),
                         "retriever_seconds": round(result.seconds, 4)}}


def unknown_arguments_refused(tool: Tool) -> Tool:
    """``tool`` with an argument model that refuses an argument it does not declare.

    The SDK's argument model takes extra keys and drops them, so ``{"repo": "/src/app"}`` (for ``repo_path``)
    searched the served repository as if nothing had been said. A subclass of that model with ``extra="forbid"``
    (which also publishes ``additionalProperties: false`` in the tool's input schema, for clients that check
    before sending) and a ``ValueError`` from a pydantic validator, which the SDK documents as an argument
    failure the caller sees (``ToolError``): the argument, close matches, the accepted ones.
    """
    import difflib

    base = tool.fn_metadata.arg_model
    accepted = [f.alias or name for name, f in base.model_fields.items()]

    class Arguments(base):  # type: ignore[valid-type, misc]
        model_config = ConfigDict(extra="forbid", title=base.__name__)

        @model_validator(mode="before")
        @classmethod
        def declared_arguments_only(cls, data: Any) -> Any:
            unknown = [k for k in data if k not in accepted] if isinstance(data, dict) else []
            if unknown:
                close = difflib.get_close_matches(str(unknown[0]), accepted, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown argument {unknown[0]!r}{hint}; {tool.name} accepts "
                                 f"{', '.join(accepted)}")
            return data

    tool.fn_metadata.arg_model = Arguments  # read at each call (FuncMetadata)
    tool.parameters = Arguments.model_json_schema(by_alias=True)
    return tool


def build_server(config: ServeConfig, finder: FileFinder | None = None) -> MCPServer:
    """An ``MCPServer`` exposing ``find_relevant_files`` backed by ``finder`` (or a new one)."""
    finder = finder or FileFinder(config)

    def find_relevant_files(
        query: Annotated[str, Field(description="The task in plain words: an issue text, bug report or request.")],
        repo_path: Annotated[str | None, Field(description="Directory to search (default: the served "
                                               "repository); relative paths are taken from it.")] = None,
        max_files: Annotated[int, Field(description="How many files to return, best first.")] = 10,
        commit: Annotated[str | None, Field(description="Search this commit (SHA, branch or tag) instead "
                                            "of the live working tree.")] = None,
    ) -> CallToolResult:
        try:
            answer = finder.find(query, repo_path=repo_path, max_files=max_files, commit=commit)
        except (ValueError, FileNotFoundError) as exc:  # RequestError and library errors naming the argument
            raise ToolError(str(exc)) from exc
        except Exception as exc:  # e.g. a model endpoint that is down: say what broke, keep serving
            if isinstance(exc, (RuntimeError, OSError)):  # environmental: the message says it all
                logger.warning("find_relevant_files failed: %s", exc)
            else:  # a bug: keep the traceback on stderr, where MCP clients log it
                logger.exception("find_relevant_files failed")
            raise ToolError(f"retrieval failed ({type(exc).__name__}): {exc}") from exc
        return CallToolResult(content=[TextContent(type="text", text=format_answer(answer))],
                              structured_content=answer)

    hints = ToolAnnotations(title="Find relevant files", read_only_hint=True, destructive_hint=False,
                            idempotent_hint=True, open_world_hint=False)  # lets clients auto-approve it
    tool = Tool.from_function(find_relevant_files, name=TOOL_NAME, description=TOOL_DESCRIPTION, annotations=hints)
    return MCPServer(SERVER_NAME, instructions=TOOL_DESCRIPTION, version=__version__, log_level="WARNING",
                     tools=[unknown_arguments_refused(tool)])


def serve_stdio(config: ServeConfig) -> None:
    """Run the server on stdin/stdout until the client disconnects; a malformed line gets a JSON-RPC
    error reply (``-32700``/``-32600``) instead of silence (``codegrep.serve.transport``)."""
    import anyio

    from codegrep.serve.transport import serve_checked_stdio

    anyio.run(serve_checked_stdio, build_server(config))


def answer_once(config: ServeConfig, query: str, max_files: int = 10, commit: str | None = None) -> str:
    """The JSON answer for one query, without a server (``codegrep mcp --query``): handy to check a setup."""
    return json_text(FileFinder(config).find(query, max_files=max_files, commit=commit), indent=2)
