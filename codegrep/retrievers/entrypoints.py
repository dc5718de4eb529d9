"""Glue for the CLI and other callers: retrieve in a user's repository, load a task source with its repos."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from codegrep import Retriever
from codegrep.data.tasks import Task, adhoc_id
from codegrep.errors import UserError
from codegrep.retrievers.base import Retrieval


def adhoc_task(repo_dir: Path, issue: str, commit: str | None = None) -> Task:
    """A task for free text against a local repository (no gold files); its id is a digest of the repository, the
    commit and the text (:func:`codegrep.data.tasks.adhoc_id`), so a seeded retriever (``random``) gives the same
    answer to the same request.

    >>> t = adhoc_task(Path("/src/myproj"), "crash in parser")
    >>> t.repo, t.base_commit, t.gold_files, t.instance_id == adhoc_task(Path("/src/myproj"), "crash in parser").instance_id
    ('local/myproj', '', [], True)
    """
    repo = Path(repo_dir).resolve()
    return Task(instance_id=adhoc_id(repo, commit or "", issue), repo=f"local/{repo.name}",
                base_commit=commit or "", problem_statement=issue)


def retrieve_in_repo(retriever: Retriever, repo_dir: Path, issue: str, commit: str | None = None,
                     pool: Any = None) -> Retrieval:
    """Run a retriever on a live tree, or (with ``commit``) on a pooled worktree of that commit; a ``repo_dir``
    that is a subdirectory of its repository is the same subdirectory of the worktree (paths relative to it, as
    on the live tree)."""
    repo_dir = Path(repo_dir)
    if not repo_dir.is_dir():
        raise FileNotFoundError(f"--repo {repo_dir}: not a directory")
    task = adhoc_task(repo_dir, issue, commit)
    from codegrep.data.repos import git, has_commit

    if not commit:
        bare = git("rev-parse", "--is-bare-repository", cwd=repo_dir, check=False, timeout=60)
        if bare.returncode == 0 and bare.stdout.strip() == "true":  # no files to rank, not "nothing matched"
            raise UserError(f"--repo {repo_dir}: a bare git repository has no work tree to rank; "
                            "pass --commit (e.g. --commit HEAD)")
        return retriever.retrieve(task, repo_dir)

    if not has_commit(repo_dir, commit):
        raise ValueError(f"--commit {commit}: not a commit of the git repository {repo_dir}")
    if pool is None:
        from codegrep.env.pool import WorktreePool

        pool = WorktreePool()
    prefix = git("rev-parse", "--show-prefix", cwd=repo_dir, check=False, timeout=60)
    sub = prefix.stdout.strip() if prefix.returncode == 0 else ""
    with pool.acquire(repo_dir, commit) as checkout:
        return retriever.retrieve(task, Path(checkout) / sub)


def load_task_source(source: str, repos_dir: str | None = None, split: str | None = None,
                     limit: int | None = None, seed: int = 0) -> tuple[list[Task], Any]:
    """Tasks plus a resolver for their repositories; ``default`` is the offline default set, ``verified`` /
    ``lite-train`` the shipped real instances (their repositories: the shipped snapshots unless ``repos_dir``)."""
    from codegrep.data.repos import RepoResolver
    from codegrep.data.sources import is_shipped_source, shipped_repos_dir
    from codegrep.data.tasks import load_tasks

    if source == "default":
        from codegrep.data.default_set import ensure_default_task_set

        built = ensure_default_task_set()
        source, repos_dir = str(built.tasks_path), repos_dir or str(built.repos_dir)
    elif is_shipped_source(source):
        repos_dir = repos_dir or str(shipped_repos_dir())
    tasks = load_tasks(source, limit=limit, seed=seed, split=split)
    if not tasks:
        raise ValueError(f"--tasks {source}: no tasks" + (f" in split {split!r}" if split else ""))
    return tasks, RepoResolver(repos_dir=repos_dir)
