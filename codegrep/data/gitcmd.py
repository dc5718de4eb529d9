"""Running git: the one module that spawns git for the package. It lives in ``codegrep.data``, the lowest layer
that runs git (repository resolution, the default set's snapshots); ``codegrep.env`` (plumbing over bare
repositories) and ``codegrep.serve`` (benchmark repository, live requests) import it from here.

``run`` is the one ``subprocess`` call; ``git`` is its bytes-in-``git_dir`` form the environment uses,
``resolve_commit`` the commit resolution every mode shares, ``cat_file_batch`` the one long-lived reader.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator, Sequence

PROMPTLESS = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
"""Environment for git commands that may reach a remote: never prompt, ignore the system config."""


def run(*args: str, git_dir: Path | str | None = None, cwd: str | os.PathLike | None = None,
        input: bytes | str | None = None, env: dict[str, str] | None = None, timeout: float | None = None,
        text: bool = False, check: bool = True, pass_fds: Sequence[int] = ()) -> subprocess.CompletedProcess:
    """Run ``git [-C git_dir] *args`` (in ``cwd``), output captured; ``env`` is added to the process environment.
    With ``check`` a non-zero exit raises RuntimeError naming the command, the directory and git's message.

    ``pass_fds``: descriptors the child inherits; the worktree pool passes its lock files so that a
    ``git worktree add`` orphaned by a killed parent keeps holding them until it exits.

    >>> run("--version", text=True).stdout.startswith("git version")
    True
    >>> run("rev-parse", "HEAD", git_dir="/")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: git rev-parse HEAD in / failed: fatal: not a git repository...
    """
    where = ["-C", str(git_dir)] if git_dir is not None else []
    proc = subprocess.run(["git", *where, *args], cwd=cwd, input=input, capture_output=True, text=text,
                          timeout=timeout, env={**os.environ, **env} if env else None, pass_fds=tuple(pass_fds))
    if check and proc.returncode != 0:
        err = proc.stderr if text else proc.stderr.decode(errors="replace")
        raise RuntimeError(f"git {' '.join(args)} in {git_dir or cwd or os.getcwd()} failed: {err.strip()}")
    return proc


def git(git_dir: Path | str, *args: str, input: bytes | None = None, pass_fds: Sequence[int] = ()) -> bytes:
    """Run one git command against ``git_dir`` and return stdout (raises RuntimeError naming the command)."""
    return run(*args, git_dir=git_dir, input=input, pass_fds=pass_fds).stdout


def resolve_commit(git_dir: Path | str, commit: str) -> str:
    """Full SHA of ``commit`` in ``git_dir`` (raises RuntimeError when it is not there)."""
    return git(git_dir, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()


def cat_file_batch(git_dir: Path | str, quiet: bool = False) -> subprocess.Popen:
    """A running ``git cat-file --batch`` over ``git_dir`` (stdin/stdout pipes; ``quiet``: stderr discarded)."""
    return subprocess.Popen(["git", "-C", str(git_dir), "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if quiet else None)


@contextlib.contextmanager
def detached_worktree(git_dir: Path | str, path: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``git_dir`` at ``commit`` in ``path`` for the block, removed after it (removal errors
    ignored: the caller's temporary directory goes anyway)."""
    run("worktree", "add", "--detach", "-f", str(path), commit, git_dir=git_dir)
    try:
        yield path
    finally:
        run("worktree", "remove", "--force", str(path), git_dir=git_dir, check=False)


def checkout_commit(root: Path | str, dirty_mark: str, timeout: float | None = None) -> str:
    """HEAD of the checkout at ``root`` with ``dirty_mark`` appended when tracked files differ; ``unknown`` when
    git or the checkout is missing. (``codegrep report`` marks ``+dirty``, the study ``-dirty``: both kept.)"""
    try:
        head = run("rev-parse", "HEAD", cwd=root, text=True, timeout=timeout)
        dirty = run("status", "--porcelain", "--untracked-files=no", cwd=root, text=True, timeout=timeout)
    except (OSError, RuntimeError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + (dirty_mark if dirty.stdout.strip() else "")
