"""Named task sources over the real data shipped in ``data/`` (no network, no ``../shared``).

- ``verified``   — the SWE-bench Verified instances whose repository snapshot is shipped (86: 75 sympy,
  11 astropy): issue text, gold files from the patch, the repository at ``base_commit``. The evaluation split.
- ``lite-train`` — the SWE-bench Lite sympy instances that are *not* in Verified and whose snapshot is shipped
  (55): a real training pool disjoint from Verified by construction.

An instance belongs to a source only when its tag ``refs/tags/<instance_id>`` exists in the shipped snapshot
(so every task loads with its repository). Their ``--repos`` directory is :func:`snapshot_repos_dir`.
"""
from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from codegrep.data.shipped import lite_rows_path, snapshot_repos_dir, verified_rows_path

SHIPPED_SOURCES = ("verified", "lite-train")
"""Task-source names that stand for the shipped real data (``tasks.source``, ``--tasks``)."""


def is_shipped_source(source: Any) -> bool:
    """Whether ``source`` names one of :data:`SHIPPED_SOURCES`.

    >>> is_shipped_source("verified"), is_shipped_source("default"), is_shipped_source(["verified"])
    (True, False, False)
    """
    return isinstance(source, str) and source in SHIPPED_SOURCES


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a ``.jsonl`` or ``.jsonl.gz`` file."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@lru_cache(maxsize=1)
def shipped_tags() -> dict[str, dict[str, str]]:
    """``{owner/name: {instance_id: commit}}`` for every tag of the shipped snapshots."""
    from codegrep.data.repos import git

    out: dict[str, dict[str, str]] = {}
    root = snapshot_repos_dir()
    for repo_dir in sorted(root.glob("*.git")):
        repo = repo_dir.name[: -len(".git")].replace("__", "/", 1)
        refs = git("for-each-ref", "--format=%(refname:strip=2) %(objectname) %(*objectname)", "refs/tags",
                   cwd=repo_dir).stdout.split("\n")
        tags = {}
        for line in filter(None, refs):
            name, obj, peeled = (line.split(" ") + ["", ""])[:3]
            tags[name] = peeled or obj  # annotated tags peel to their commit
        out[repo] = tags
    return out


def _with_snapshot(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    tags = shipped_tags()
    for row in rows:
        commit = tags.get(row.get("repo", ""), {}).get(row.get("instance_id", ""))
        if commit and commit == row.get("base_commit"):
            yield row


def shipped_rows(name: str) -> list[dict[str, Any]]:
    """The rows of one shipped source (see the module docstring), in file order."""
    if name == "verified":
        return list(_with_snapshot(read_rows(verified_rows_path())))
    if name == "lite-train":
        verified = {r["instance_id"] for r in read_rows(verified_rows_path())}
        return [r for r in _with_snapshot(read_rows(lite_rows_path())) if r["instance_id"] not in verified]
    raise ValueError(f"unknown shipped task source {name!r}; choose one of {SHIPPED_SOURCES}")


def shipped_repos_dir() -> Path:
    """The ``--repos`` directory of the shipped sources (bare snapshots extracted into the cache)."""
    return snapshot_repos_dir()
