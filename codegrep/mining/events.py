"""The normalised event vocabulary every trajectory format is reduced to."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from codegrep.env.contract import ToolCall
from codegrep.metrics import normalize_path
from codegrep.mining.targets import is_artifact

SANDBOX_ROOT = re.compile(r"^/(testbed|repo|app|workspace/[^/]+)/?$")  # the checkout itself
_HOME = re.compile(r"^(~[^/]*|\$HOME|\$\{HOME\})(?=/|$)")  # ~, ~user, $HOME, ${HOME}: the home directory
_UNEXPANDED = re.compile(r"(^|/)\$|\$[({]|`")  # $VAR, ${VAR}, $(cmd), `cmd`: a path the shell had to expand
EVENT_KINDS = ("view", "search", "find", "list", "edit", "create", "delete", "revert", "run")


@dataclass
class Event:
    """One file-level thing an agent did in one step."""

    kind: str
    """One of ``EVENT_KINDS``: view a file, search text, find/list files, edit/create/delete a file, revert one (put it
    back as the commit holds it: ``git checkout f``), run."""
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

    Paths outside the repository stay absolute (``/usr/lib/...``) so callers can drop them; the home directory
    (``~``, ``$HOME``), whose place is not recorded, is written ``/~``. A path with a variable or a command
    substitution the shell expanded (``$f``, ``$(dirname x)``) names no known file: None.

    >>> repo_path("/testbed/pkg/a.py:12"), repo_path("./pkg"), repo_path("/OQuPy/oqupy/x.py", "/OQuPy")
    ('pkg/a.py', 'pkg', 'oqupy/x.py')
    >>> repo_path("/dev/null"), repo_path("."), repo_path("/usr/lib/python3/os.py"), repo_path("/testbed")
    (None, '', '/usr/lib/python3/os.py', '')
    >>> repo_path("~/.bashrc"), repo_path("$HOME/x.py"), repo_path("$f"), repo_path("pkg/${name}.py"), repo_path("A$B.java")
    ('/~/.bashrc', '/~/x.py', None, None, 'A$B.java')
    """
    if path is None:
        return None
    p = str(path).strip()
    if not p or p in ("-", "/dev/null") or p.startswith("/dev/") or p.startswith("/proc/"):
        return None
    if p[0] in "~$":
        p = _HOME.sub("/~", p, count=1)
    if ("$" in p or "`" in p) and _UNEXPANDED.search(p):
        return None
    if (root and p.rstrip("/") == root.rstrip("/")) or SANDBOX_ROOT.match(p):
        return ""
    out = normalize_path(p, repo_root=root)
    if p.startswith("/") and out == normalize_path(p.lstrip("/")):
        return "/" + out  # nothing was stripped: a path outside the repository, keep it absolute
    return out


def glob_split(path: str | None) -> tuple[str, str] | None:
    """(the directory, the pattern) of a path with a shell wildcard, split at its first wildcard component; None
    for a plain path. A wildcard path names no one file (``cat pkg/*.py`` shows every match).

    >>> glob_split("pkg/sub/*.py"), glob_split("lib/*/conf.py"), glob_split("pkg/a.py"), glob_split("test_[ab].py")
    (('pkg/sub', '*.py'), ('lib', '*/conf.py'), None, ('', 'test_[ab].py'))
    """
    if not path or not any(c in path for c in "*?["):
        return None
    parts = path.split("/")
    at = next(i for i, part in enumerate(parts) if any(c in part for c in "*?["))
    return "/".join(parts[:at]), "/".join(parts[at:])


_EXTENSIONLESS = re.compile(r"(?:[A-Z][a-z]*|GNUmake|make)file|LICENSE|README|CHANGELOG|CHANGES|AUTHORS|NOTICE|COPYING"
                            r"|VERSION|CODEOWNERS|MANIFEST")
"""Conventional file names without a suffix: ``Makefile``, ``Dockerfile``, ``Gemfile``, ``Jenkinsfile``, ``LICENSE``."""


def looks_like_file(path: str) -> bool:
    """Whether a path named without other evidence is a file rather than a folder: its name has a suffix
    (``a.py``, ``.eslintrc.json``) or is a conventional suffix-less file name (``_EXTENSIONLESS``); ``pkg``, ``.``,
    ``src/`` are folders.

    >>> [looks_like_file(p) for p in ("pkg/a.py", "pkg", ".", "src/", "Makefile", "docker/Dockerfile", "LICENSE", "lib")]
    [True, False, False, False, True, True, True, False]
    """
    name = path.rstrip("/").rpartition("/")[2] if not path.endswith("/") else ""
    return "." in name.strip(".") or _EXTENSIONLESS.fullmatch(name) is not None


def viewed_files(events: Iterable[Event]) -> list[str]:
    """The repository files the events view, in first-view order: a wildcard (``cat pkg/*.py``) or a path outside
    the repository names none, as in the supervision record's ``viewed_files``.

    >>> viewed_files([Event("view", 0, "a.py"), Event("view", 1, "pkg/*.py"), Event("view", 2, "/tmp/r.py"),
    ...               Event("search", 3, "b.py"), Event("view", 4, "a.py")])
    ['a.py']
    """
    return list(dict.fromkeys(e.path for e in events if e.kind == "view" and in_repo(e.path)
                              and not glob_split(e.path)))


def in_repo(path: str | None) -> bool:
    """A non-empty repository-relative path (not absolute, not climbing out).

    >>> in_repo("pkg/a.py"), in_repo("/usr/x.py"), in_repo(""), in_repo("../x.py")
    (True, False, False, False)
    """
    return bool(path) and not path.startswith("/") and not path.startswith("../") and path != ".."


def event_call(event: Event, *, default_glob: str | None = "*", skip_artifacts: bool = True) -> ToolCall | None:
    """The grep/glob/read call standing for one exploration event (None for the rest): the one mapping used by
    the demonstrations (``codegrep.mining.demos``) and the recorded-run converter (``codegrep.mining.run_converter``).

    The two callers differ in two explicit ways. ``default_glob``: the pattern a ``find`` without a name stands for
    (demonstrations: ``*``, any file); None maps it to no call (the converter must rebuild the live tool's answer
    from the recorded output, so it needs the name glob the command used). ``skip_artifacts``: a view of a build or
    run artifact (``is_artifact``) is no call (demonstrations replay reads against a clean checkout, where it does
    not exist); the converter keeps it, since the recorded output shows what the file held.

    >>> event_call(Event("search", path="pkg", pattern="def foo"))
    ToolCall(name='grep', arguments={'pattern': 'def foo', 'path': 'pkg'})
    >>> event_call(Event("find", path="", pattern="*.py")).arguments, event_call(Event("view", path="a.py", lines=(5, -1))).arguments
    ({'pattern': '**/*.py'}, {'path': 'a.py', 'start_line': 5})
    >>> event_call(Event("find", path="pkg")).arguments, event_call(Event("find", path="pkg"), default_glob=None)
    ({'pattern': '**/*', 'path': 'pkg'}, None)
    >>> event_call(Event("view", path="a.py.orig")), event_call(Event("view", path="a.py.orig"), skip_artifacts=False)
    (None, ToolCall(name='read', arguments={'path': 'a.py.orig'}))
    >>> event_call(Event("list", path="pkg")).arguments, event_call(Event("edit", path="a.py"))
    ({'pattern': '*', 'path': 'pkg'}, None)
    """
    scope = {"path": event.path} if event.path else {}
    in_scope = event.path == "" or in_repo(event.path)
    if event.kind == "search" and event.pattern and in_scope:
        return ToolCall("grep", {"pattern": event.pattern, **scope})
    if event.kind == "find" and in_scope and (event.pattern or default_glob):
        pattern = event.pattern or default_glob or ""
        return ToolCall("glob", {"pattern": pattern if "/" in pattern else f"**/{pattern}", **scope})
    if event.kind == "list" and in_scope:
        return ToolCall("glob", {"pattern": "*", **scope})
    if event.kind == "view" and in_repo(event.path) and not glob_split(event.path) and not (
            skip_artifacts and is_artifact(event.path)):
        args: dict[str, Any] = {"path": event.path}
        if event.lines:
            args["start_line"] = event.lines[0]
            if event.lines[1] > 0:
                args["end_line"] = event.lines[1]
        return ToolCall("read", args)
    return None
