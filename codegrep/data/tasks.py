"""The task schema (SWE-bench's) and gold files. Loaders live below the dataclass."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def patch_files(patch: str) -> list[str]:
    """Files a unified git diff touches, in order (renames: the new path; deletions: the old path).

    >>> patch_files("diff --git a/x.py b/x.py\\n--- a/x.py\\n+++ b/x.py\\n")
    ['x.py']
    >>> patch_files("diff --git a/old.py b/new.py\\nrename from old.py\\nrename to new.py\\n")
    ['new.py']
    >>> patch_files("diff --git a/gone.py b/gone.py\\ndeleted file mode 100644\\n--- a/gone.py\\n+++ /dev/null\\n")
    ['gone.py']
    """
    seen: dict[str, None] = {}
    for a, b in _DIFF_HEADER.findall(patch or ""):
        seen.setdefault(b if b != "/dev/null" else a, None)
    return list(seen)


@dataclass
class Task:
    """One localisation problem: an issue text, a repository at a commit, and the files a fix touches."""

    instance_id: str
    """Unique id, SWE-bench style (``owner__name-1234``)."""
    repo: str
    """Source repository as ``owner/name``."""
    base_commit: str
    """Commit the issue is posed against (full SHA)."""
    problem_statement: str
    """The issue text the retriever sees."""
    patch: str = ""
    """The reference fix as a unified git diff (may be empty when ``gold_files`` is given)."""
    gold_files: list[str] = field(default_factory=list)
    """Files the fix touches; derived from ``patch`` when not given."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Every other field of the source row, kept as it came."""

    def __post_init__(self) -> None:
        if not self.gold_files and self.patch:
            self.gold_files = patch_files(self.patch)

    def to_dict(self) -> dict[str, Any]:
        row = {"instance_id": self.instance_id, "repo": self.repo, "base_commit": self.base_commit,
               "problem_statement": self.problem_statement, "patch": self.patch,
               "gold_files": list(self.gold_files)}
        row.update(self.extra)
        return row

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "Task":
        known = {"instance_id", "repo", "base_commit", "problem_statement", "patch", "gold_files"}
        missing = [k for k in ("instance_id", "repo", "base_commit", "problem_statement") if not row.get(k)]
        if missing:
            raise ValueError(f"task row lacks required field(s) {missing}")
        if not row.get("patch") and not row.get("gold_files"):
            raise ValueError(f"task {row['instance_id']!r} has neither 'patch' nor 'gold_files'")
        return cls(instance_id=str(row["instance_id"]), repo=str(row["repo"]),
                   base_commit=str(row["base_commit"]), problem_statement=str(row["problem_statement"]),
                   patch=row.get("patch") or "", gold_files=list(row.get("gold_files") or []),
                   extra={k: v for k, v in row.items() if k not in known})
