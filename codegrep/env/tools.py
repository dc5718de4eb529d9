"""The environment's front door: the contract re-exported in one place, and :func:`open_environment`.

Layering (no cycles): ``contract`` (names, value types) <- ``schema``, ``arguments``, ``config`` <- ``base``
(the shared repository view) <- ``workdir`` (a directory) and ``gitobjects`` (checkout-free) <- this module
(the wiring). ``pool`` and ``blobstore`` only need ``codegrep.data.gitcmd``.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from codegrep.env.repo_view import ToolEnvironmentBase
from codegrep.env.config import ENV_OTHER_KEYS, ToolConfig
from codegrep.env.contract import ENV_MODES, TOOL_NAMES, ToolCall, ToolError, ToolResult
from codegrep.env.gitobjects import GitObjectEnvironment
from codegrep.env.schema import function_schema, tool_schemas
from codegrep.env.workdir import RepoToolEnvironment

if TYPE_CHECKING:
    from codegrep.data.tasks import Task
    from codegrep.env.pool import WorktreePool

__all__ = ["ENV_MODES", "ENV_OTHER_KEYS", "TOOL_NAMES", "GitObjectEnvironment", "RepoToolEnvironment", "ToolCall",
           "ToolConfig", "ToolEnvironmentBase", "ToolError", "ToolResult", "function_schema", "open_environment",
           "open_snapshot", "tool_schemas"]


@contextmanager
def open_snapshot(git_dir: Path | str, commit: str, mode: str = "objects", pool: "WorktreePool | None" = None,
                  config: ToolConfig | None = None) -> Iterator[ToolEnvironmentBase]:
    """The tool environment for ``commit`` of ``git_dir``; released (and a worktree unpinned) on exit.

    ``mode``: ``objects`` (checkout-free: git objects plus the shared blob store) or ``worktree`` (a pooled
    checkout shared by concurrent rollouts). Both answer every call identically (tested).
    """
    if mode not in ENV_MODES:
        raise ValueError(f"env.mode must be one of {ENV_MODES}, got {mode!r}")
    if mode == "objects":
        with GitObjectEnvironment(git_dir, commit, config) as env:
            yield env
        return
    from codegrep.env.pool import default_pool

    with (pool or default_pool()).acquire(git_dir, commit) as checkout:
        with RepoToolEnvironment(checkout, config, snapshot=True) as env:
            yield env


@contextmanager
def open_environment(task: "Task", resolver: Any, pool: "WorktreePool | None" = None, mode: str = "objects",
                     config: ToolConfig | None = None) -> Iterator[ToolEnvironmentBase]:
    """The tool environment for ``task`` at its base commit (``resolver.resolve(repo, commit)`` gives
    the git dir); see :func:`open_snapshot`."""
    git_dir = Path(resolver.resolve(task.repo, task.base_commit))
    with open_snapshot(git_dir, task.base_commit, mode, pool, config) as env:
        yield env
