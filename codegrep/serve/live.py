"""Which directory a request searches: the user's live checkout (uncommitted edits included) or a commit.

The live tree is only ever read: retrievers get its path and the environment's sandboxed tools.
A commit is checked out read-only through the shared worktree pool, never in the user's checkout.
Every bad argument raises ``RequestError`` whose message is what the MCP client sees.
"""
from __future__ import annotations

import re
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from codegrep.data.gitcmd import run as run_git
from codegrep.data.tasks import Task, adhoc_id

WORKTREE = "WORKTREE"  # base_commit label of a request on the live (possibly uncommitted) tree
_COMMIT_SPEC = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._/~^@{}-]{0,199}$")  # a rev, never an option


class RequestError(ValueError):
    """A tool argument the server refuses; the message names the argument and what is wrong."""


@dataclass
class Snapshot:
    """The directory a retriever reads, and what it is a snapshot of."""

    path: Path
    """Directory handed to the retriever (the live tree, or a pooled worktree of ``commit``)."""
    commit: str
    """Full SHA when a commit was requested, otherwise ``WORKTREE``."""
    head: str | None
    """HEAD of the repository the request named (None outside git): lets a client tell stale answers."""


def _git(cwd: Path, *args: str) -> str | None:
    """Output of a git command in ``cwd``, or None when it fails (not a repo, unknown rev)."""
    try:
        done = run_git(*args, cwd=cwd, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_toplevel(path: Path) -> Path | None:
    """Root of the git work tree holding ``path``, or None when ``path`` is not in one."""
    top = _git(path, "rev-parse", "--show-toplevel")
    return Path(top).resolve() if top else None


def resolve_repo(repo_path: str | None, root: Path | None) -> Path:
    """The directory a request searches, checked against the server's ``--repo`` root.

    Relative paths are taken from ``root``; with a root, the result must stay inside it (symlinks
    resolved) so a client cannot aim the server at the rest of the disk.
    """
    if repo_path is None or not str(repo_path).strip():
        if root is None:
            raise RequestError("repo_path is required: this server was started without --repo")
        return root
    given = Path(str(repo_path)).expanduser()
    if not given.is_absolute():
        if root is None:
            raise RequestError(f"repo_path {repo_path!r} is relative and the server has no --repo to resolve it "
                               "against; pass an absolute path")
        given = root / given
    path = given.resolve()
    if root is not None and path != root and root not in path.parents:
        raise RequestError(f"repo_path {repo_path!r} is outside the served repository {root}")
    if ".git" in path.parts:
        raise RequestError(f"repo_path {repo_path!r} is inside a .git directory; name the work tree instead")
    if not path.exists():
        raise RequestError(f"repo_path {repo_path!r} does not exist ({path})")
    if not path.is_dir():
        raise RequestError(f"repo_path {repo_path!r} is not a directory ({path})")
    return path


def git_common_dir(top: Path) -> Path:
    """The repository's git directory (shared by all its worktrees): what the worktree pool adds to."""
    common = Path(_git(top, "rev-parse", "--git-common-dir") or ".git")
    return (top / common).resolve()


def bare_git_dir(path: Path) -> Path | None:
    """The git directory when ``path`` is a bare repository (what ``--repos`` folders and mirrors hold), else None."""
    if _git(path, "rev-parse", "--is-bare-repository") != "true":
        return None
    found = _git(path, "rev-parse", "--absolute-git-dir")
    return Path(found).resolve() if found else None


def resolve_commit(repo: Path, commit: str) -> tuple[Path, str]:
    """(git top level, full SHA) of ``commit`` in the repository holding ``repo``; for a bare repository its git
    directory stands for the top level."""
    if not _COMMIT_SPEC.match(commit):
        raise RequestError(f"commit {commit!r} is not a revision (expected a SHA, branch or tag)")
    top = git_toplevel(repo) or bare_git_dir(repo)
    if top is None:
        raise RequestError(f"commit {commit!r} was given but {repo} is not inside a git repository")
    sha = _git(top, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if not sha:
        raise RequestError(f"commit {commit!r} is not a commit of the repository {top}")
    return top, sha


@contextmanager
def open_snapshot(repo: Path, commit: str | None, get_pool: Callable[[], Any] | None = None) -> Iterator[Snapshot]:
    """Yield the directory to search: ``repo`` itself (live) or ``commit``'s pooled worktree.

    ``get_pool`` returns the ``codegrep.env.pool.WorktreePool`` to use (a new one when None); it is
    called only once the commit is known to be valid.
    A subdirectory ``repo`` of a git repository maps to the same subdirectory of the worktree.
    """
    head_top = git_toplevel(repo)
    head = _git(head_top, "rev-parse", "HEAD") if head_top else None
    if commit is None or not commit.strip():
        if head_top is None and bare_git_dir(repo) is not None:  # no files to search, not "nothing matched"
            raise RequestError(f"{repo} is a bare git repository (no work tree to search): pass a commit "
                               "(e.g. HEAD)")
        yield Snapshot(path=repo, commit=WORKTREE, head=head)
        return
    top, sha = resolve_commit(repo, commit.strip())
    if head is None and top == bare_git_dir(repo):
        head, repo = _git(top, "rev-parse", "HEAD"), top
    if get_pool is None:
        from codegrep.env.pool import WorktreePool
        get_pool = WorktreePool
    pool = get_pool()
    with pool.acquire(git_common_dir(top), sha) as checkout:
        yield Snapshot(path=Path(checkout) / repo.relative_to(top), commit=sha, head=head)


def adhoc_task(query: str, repo: Path, commit: str) -> Task:
    """A ``Task`` for an ad-hoc query: no gold files (nobody knows them), a stable id per request.

    On the live tree ``base_commit`` is empty: retrievers then key their caches on the tree's file
    listing (edits invalidate them) instead of on a commit that does not describe the files.

    >>> t = adhoc_task("fix the parser", Path("/src/proj"), "WORKTREE")
    >>> t.instance_id.startswith("adhoc-"), t.repo, t.base_commit, t.gold_files
    (True, 'proj', '', [])
    """
    base_commit = "" if commit == WORKTREE else commit
    return Task(instance_id=adhoc_id(repo, commit, query), repo=repo.name, base_commit=base_commit,
                problem_statement=query, gold_files=[], extra={"source": "mcp", "path": str(repo)})
