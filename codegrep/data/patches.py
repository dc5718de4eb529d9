"""Files a git diff touches: renames, additions, deletions and quoted paths, parsed in one place."""
from __future__ import annotations

import re
from dataclasses import dataclass

_DIFF_START = re.compile(r"^diff --git ", re.MULTILINE)


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths (octal escapes are UTF-8 bytes).

    >>> _unquote('"a/caf\\303\\251 \\"x\\".py"')
    'a/café "x".py'
    """
    if not (len(path) >= 2 and path[0] == path[-1] == '"'):
        return path
    body = path[1:-1]
    raw = re.sub(r"\\([0-7]{3})", lambda m: "\\x%02x" % int(m.group(1), 8), body)
    return raw.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


def _strip_prefix(path: str, prefix: str) -> str | None:
    path = _unquote(path.split("\t")[0].rstrip())
    if path == "/dev/null":
        return None
    return path[len(prefix):] if path.startswith(prefix) else path


@dataclass(frozen=True)
class FileChange:
    """One file section of a git diff."""

    old: str | None
    """Path before the change (None for a new file)."""
    new: str | None
    """Path after the change (None for a deleted file)."""

    @property
    def status(self) -> str:
        """``added``, ``deleted``, ``renamed`` or ``modified``."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "deleted"
        return "renamed" if self.old != self.new else "modified"


def _header_paths(line: str) -> tuple[str | None, str | None]:
    """Paths from ``diff --git a/X b/Y`` (only reliable when X == Y or both are quoted)."""
    rest = line[len("diff --git "):].rstrip("\n")
    if rest.startswith('"'):
        m = re.match(r'^("(?:[^"\\]|\\.)*")\s+(.*)$', rest)
        return (_strip_prefix(m.group(1), "a/"), _strip_prefix(m.group(2), "b/")) if m else (None, None)
    half = (len(rest) - 1) // 2  # 'a/P b/P' with identical P: split in the middle (P may hold spaces)
    if rest[:half][2:] == rest[half + 1:][2:]:
        return _strip_prefix(rest[:half], "a/"), _strip_prefix(rest[half + 1:], "b/")
    parts = rest.split(" b/", 1)
    return (_strip_prefix(parts[0], "a/"), _strip_prefix("b/" + parts[1], "b/")) if len(parts) == 2 else (None, None)


def patch_changes(patch: str) -> list[FileChange]:
    """Every file section of a git diff, with old and new paths (renames, additions, deletions).

    >>> patch_changes("diff --git a/o.py b/n.py\\nsimilarity index 90%\\nrename from o.py\\nrename to n.py\\n")
    [FileChange(old='o.py', new='n.py')]
    >>> [c.status for c in patch_changes("diff --git a/x b/x\\nnew file mode 100644\\n--- /dev/null\\n+++ b/x\\n")]
    ['added']
    """
    out = []
    blocks = _DIFF_START.split(patch or "")[1:]
    for block in blocks:
        lines = block.split("\n")
        old, new = _header_paths("diff --git " + lines[0])
        for line in lines[1:]:
            if line.startswith(("@@", "diff --git ")):
                break
            if line.startswith("rename from "):
                old = _unquote(line[len("rename from "):])
            elif line.startswith("rename to "):
                new = _unquote(line[len("rename to "):])
            elif line.startswith("new file mode"):
                old = None
            elif line.startswith("deleted file mode"):
                new = None
            elif line.startswith("--- "):
                old = _strip_prefix(line[4:], "a/")
            elif line.startswith("+++ "):
                new = _strip_prefix(line[4:], "b/")
        if old or new:
            out.append(FileChange(old, new))
    return out


def patch_files(patch: str) -> list[str]:
    """Files a unified git diff touches, in order (renames: the new path; deletions: the old path).

    >>> patch_files("diff --git a/x.py b/x.py\\n--- a/x.py\\n+++ b/x.py\\n")
    ['x.py']
    >>> patch_files("diff --git a/old.py b/new.py\\nrename from old.py\\nrename to new.py\\n")
    ['new.py']
    >>> patch_files("diff --git a/gone.py b/gone.py\\ndeleted file mode 100644\\n--- a/gone.py\\n+++ /dev/null\\n")
    ['gone.py']
    """
    return list(dict.fromkeys(c.new or c.old for c in patch_changes(patch)))


def gold_files_from_patch(patch: str) -> list[str]:
    """Gold files for localisation: touched files that exist at the base commit.

    A retriever searches the base snapshot, so a rename counts by its old path and a new file
    is left out (it cannot be found); only a patch that merely adds files falls back to those.

    >>> gold_files_from_patch("diff --git a/o.py b/n.py\\nrename from o.py\\nrename to n.py\\n"
    ...                       "diff --git a/t.py b/t.py\\nnew file mode 100644\\n--- /dev/null\\n+++ b/t.py\\n")
    ['o.py']
    """
    changes = patch_changes(patch)
    existing = list(dict.fromkeys(c.old for c in changes if c.old))
    return existing or patch_files(patch)
