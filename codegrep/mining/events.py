"""The normalised event vocabulary every trajectory format is reduced to."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from codegrep.metrics import normalize_path

_SANDBOX_ROOT = re.compile(r"^/(testbed|repo|app|workspace/[^/]+)/?$")  # the checkout itself
EVENT_KINDS = ("view", "search", "find", "list", "edit", "create", "delete", "run")


@dataclass
class Event:
    """One file-level thing an agent did in one step."""

    kind: str
    """One of ``EVENT_KINDS``: view a file, search text, find/list files, edit/create/delete a file, run."""
    step: int = 0
    """0-based index of the agent action (model turn or tool call) the event came from."""
    path: str | None = None
    """Repository-relative file (view/edit/create/delete) or search scope (search/find/list); None = whole repo."""
    pattern: str | None = None
    """Search regex (search) or file-name glob (find)."""
    lines: tuple[int, int] | None = None
    """Inclusive 1-based line range of a view, when the agent asked for one (-1 = end of file)."""
    command: str | None = None
    """The command a ``run`` event executed (first 200 characters)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def repo_path(path: str | None, root: str | None = None) -> str | None:
    """Repository-relative form of an agent path; None for empty, ``/dev/null`` or ``-`` (stdin).

    Paths outside the repository stay absolute (``/usr/lib/...``) so callers can drop them.

    >>> repo_path("/testbed/pkg/a.py:12"), repo_path("./pkg"), repo_path("/OQuPy/oqupy/x.py", "/OQuPy")
    ('pkg/a.py', 'pkg', 'oqupy/x.py')
    >>> repo_path("/dev/null"), repo_path("."), repo_path("/usr/lib/python3/os.py"), repo_path("/testbed")
    (None, '', '/usr/lib/python3/os.py', '')
    """
    if path is None:
        return None
    p = str(path).strip()
    if not p or p in ("-", "/dev/null") or p.startswith("/dev/") or p.startswith("/proc/"):
        return None
    if (root and p.rstrip("/") == root.rstrip("/")) or _SANDBOX_ROOT.match(p):
        return ""
    out = normalize_path(p, repo_root=root)
    if p.startswith("/") and out == normalize_path(p.lstrip("/")):
        return "/" + out  # nothing was stripped: a path outside the repository, keep it absolute
    return out


def in_repo(path: str | None) -> bool:
    """A non-empty repository-relative path (not absolute, not climbing out).

    >>> in_repo("pkg/a.py"), in_repo("/usr/x.py"), in_repo(""), in_repo("../x.py")
    (True, False, False, False)
    """
    return bool(path) and not path.startswith("/") and not path.startswith("../") and path != ".."
