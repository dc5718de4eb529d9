"""Shared test helpers: small git repositories built in a test's temporary directory (test modules import them:
``from conftest import commit_all``, as they import shared fixtures from each other).

Every git command goes through the package's one git module (``codegrep.data.gitcmd``); commits use a fixed test
identity and no signing, so a test never depends on the user's git configuration.
"""
from __future__ import annotations

from pathlib import Path

from codegrep.data.gitcmd import run as run_git

TEST_IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgSign=false")


def commit_all(work: Path, files: dict[str, str | bytes] | None = None, message: str = "init",
               force: bool = False) -> str:
    """``git init`` ``work``, write ``files`` (relative path -> text or bytes) into it, commit everything under it
    (``force``: ignored files too) and return the commit's SHA. Files already in ``work`` are committed as well."""
    work.mkdir(parents=True, exist_ok=True)
    for rel, data in (files or {}).items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    run_git("init", "-q", str(work))
    run_git("add", "-A", *(["-f"] if force else []), git_dir=work)
    run_git(*TEST_IDENTITY, "commit", "-q", "-m", message, git_dir=work)
    return run_git("rev-parse", "HEAD", git_dir=work, text=True).stdout.strip()


def git_out(work: Path, *args: str, strip: bool = True) -> str:
    """stdout of one git command in ``work`` (test identity), stripped unless ``strip=False`` (a diff used as a
    patch keeps its last newline); a failure raises RuntimeError."""
    out = run_git(*TEST_IDENTITY, *args, git_dir=work, text=True).stdout
    return out.strip() if strip else out
