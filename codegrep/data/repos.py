"""Repository resolution without Docker: a ``--repos`` directory, else a cached bare mirror.

Layout a user passes with ``--repos DIR``: one git repository per source repository, named
``owner__name`` (bare or with a work tree, optional ``.git`` suffix), e.g.
``DIR/django__django``, ``DIR/astropy__astropy.git``. Without it, ``owner/name`` is cloned once as a
bare mirror from GitHub into ``cache_dir()/mirrors`` and fetched again only when a commit is missing.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from pathlib import Path
from typing import Sequence

from codegrep.config import cache_dir
from codegrep.data import gitcmd

GITHUB_URL = "https://github.com/{repo}.git"
FIXED_IDENTITY = {  # same author, committer and date => same commit SHA for the same tree
    "GIT_AUTHOR_NAME": "codegrep", "GIT_AUTHOR_EMAIL": "codegrep@localhost",
    "GIT_COMMITTER_NAME": "codegrep", "GIT_COMMITTER_EMAIL": "codegrep@localhost",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
}
LOCAL_ONLY_OWNER = "codegrep-default"  # repositories of the default set exist only locally, never on GitHub
_TRUE = {"1", "true", "yes", "on"}


def is_offline() -> bool:
    """True when the environment says not to use the network (HF_HUB_OFFLINE, HF_DATASETS_OFFLINE, CODEGREP_OFFLINE)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE
               for v in ("CODEGREP_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def git(*args: str, cwd: str | os.PathLike | None = None, env: dict | None = None, timeout: float = 600,
        check: bool = True) -> subprocess.CompletedProcess:
    """Run ``git`` without prompts (``codegrep.data.gitcmd.run``, text output); a failure raises RuntimeError
    with git's message."""
    return gitcmd.run(*args, cwd=cwd, env={**gitcmd.PROMPTLESS, **(env or {})}, timeout=timeout, text=True,
                      check=check)


def commit_snapshot(repo_dir: Path, files: dict[str, str], message: str) -> str:
    """Write ``files`` into a fresh repository with one commit by a fixed identity; return its SHA."""
    repo_dir.mkdir(parents=True, exist_ok=True)
    cfg = ("-c", "core.autocrlf=false", "-c", "core.fileMode=false", "-c", "commit.gpgSign=false")
    git("init", "-q", "-b", "main", ".", cwd=repo_dir)
    for rel, text in files.items():
        dest = repo_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(text.encode("utf-8"))
    git(*cfg, "add", "-A", ".", cwd=repo_dir)
    git(*cfg, "commit", "-q", "--no-verify", "-m", message, cwd=repo_dir, env=FIXED_IDENTITY)
    return git("rev-parse", "HEAD", cwd=repo_dir).stdout.strip()


def has_commit(git_dir: Path, commit: str) -> bool:
    """Whether ``commit`` exists in the repository at ``git_dir``."""
    proc = git("cat-file", "-e", f"{commit}^{{commit}}", cwd=git_dir, check=False, timeout=60)
    return proc.returncode == 0


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class RepoResolver:
    """Maps ``(owner/name, commit)`` to a local git directory that contains the commit."""

    def __init__(self, repos_dir: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
                 mirror_dir: str | os.PathLike | None = None, offline: bool | None = None,
                 url_template: str = GITHUB_URL) -> None:
        many = repos_dir if isinstance(repos_dir, (list, tuple)) else ([repos_dir] if repos_dir else [])
        self.repos_dirs = [Path(d).expanduser() for d in many if d]
        """Directories of ``owner__name`` repositories, searched in order before the mirror."""
        self.repos_dir = self.repos_dirs[0] if self.repos_dirs else None
        """The first of ``repos_dirs`` (the user's ``--repos`` when given)."""
        self.mirror_dir = Path(mirror_dir).expanduser() if mirror_dir else cache_dir() / "mirrors"
        """Where bare mirrors are cloned (one per repository)."""
        self.offline = is_offline() if offline is None else offline
        """When true, never clone or fetch; a missing repository or commit is an error at once."""
        self.url_template = url_template
        """Clone URL with ``{repo}`` = ``owner/name`` (tests point it at local paths)."""
        self._found: dict[tuple[str, str], Path] = {}

    def __repr__(self) -> str:
        return f"RepoResolver(repos_dirs={[str(d) for d in self.repos_dirs]}, mirror_dir={self.mirror_dir}, offline={self.offline})"

    def local_candidates(self, repo: str) -> list[Path]:
        """Existing repository directories for ``repo`` under ``repos_dir``, then the mirror."""
        slug = repo.replace("/", "__")
        roots = [*self.repos_dirs, self.mirror_dir]
        return [root / name for root in roots for name in (slug, slug + ".git") if (root / name).is_dir()]

    def resolve(self, repo: str, commit: str) -> Path:
        """A git directory holding ``commit`` of ``repo``; clones or fetches a mirror when allowed."""
        key = (repo, commit)
        if key not in self._found:
            self._found[key] = self._resolve(repo, commit)
        return self._found[key]

    def _resolve(self, repo: str, commit: str) -> Path:
        if "/" not in repo:
            raise ValueError(f"repository {repo!r} is not 'owner/name'")
        local = self.local_candidates(repo)
        for path in local:
            if has_commit(path, commit):
                return path
        where = f"looked in {[str(p) for p in local]}" if local else (
            f"no {repo.replace('/', '__')}[.git] under {[str(d) for d in self.repos_dirs] or '(no --repos)'} "
            f"or {self.mirror_dir}")
        if self.offline or repo.startswith(LOCAL_ONLY_OWNER + "/"):
            raise FileNotFoundError(f"repository {repo} at commit {commit} is not available offline ({where}); "
                                    f"pass --repos DIR with an owner__name git repository containing it")
        return self._mirror(repo, commit, where)

    def _mirror(self, repo: str, commit: str, where: str) -> Path:
        mirror = self.mirror_dir / f"{repo.replace('/', '__')}.git"
        url = self.url_template.format(repo=repo)
        with _locked(self.mirror_dir / f".{mirror.name}.lock"):
            try:
                if not mirror.is_dir():
                    git("clone", "--mirror", "-q", url, str(mirror), timeout=3600)
                elif not has_commit(mirror, commit):
                    git("fetch", "-q", "origin", cwd=mirror, timeout=3600)
                if not has_commit(mirror, commit):  # unreachable commits (force-pushed away)
                    git("fetch", "-q", "origin", commit, cwd=mirror, timeout=600, check=False)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                raise RuntimeError(f"repository {repo} at commit {commit}: could not clone/fetch {url} "
                                   f"({where}): {exc}") from exc
        if not has_commit(mirror, commit):
            raise FileNotFoundError(f"repository {repo} has no commit {commit} (mirror {mirror}, from {url})")
        return mirror
