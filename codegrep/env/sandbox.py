"""The sandbox rules every tool argument passes before it touches the disk or a subprocess.

Paths are repository-relative POSIX paths. Refused (with a message the model sees as the tool
result): absolute paths, ``..`` escapes, NUL/newline/control characters, anything starting with
``-`` (could become a flag), paths into ``.git``, and symlinks that resolve outside the checkout.
The checks are pure string functions (doctested) plus two filesystem checks: :func:`resolve_inside` (where a
path leads) and :func:`open_inside` (open it without following a symlink that appeared since, :class:`InsideFiles`).
"""
from __future__ import annotations

import errno
import os
import posixpath
import stat
from pathlib import Path

MAX_ARG_CHARS = 1000  # a longer path or pattern is never a sensible tool argument


class SandboxError(ValueError):
    """An argument the sandbox refuses; the message is shown to the model."""


def _check_chars(value: str, what: str) -> None:
    if len(value) > MAX_ARG_CHARS:
        raise SandboxError(f"{what} is too long ({len(value)} characters; at most {MAX_ARG_CHARS})")
    if any(ord(c) < 32 or c == "\x7f" for c in value):
        raise SandboxError(f"{what} contains a NUL, newline or other control character")


def clean_relative_path(path: str | None, what: str = "path") -> str:
    """Normalise a repository-relative path (``""`` means the repository root), or refuse it.

    >>> clean_relative_path("src//pkg/./mod.py")
    'src/pkg/mod.py'
    >>> clean_relative_path(None), clean_relative_path("."), clean_relative_path("./")
    ('', '', '')
    >>> clean_relative_path("../etc/passwd")
    Traceback (most recent call last):
    ...
    codegrep.env.sandbox.SandboxError: path '../etc/passwd' escapes the repository ('..'); use a repository-relative path
    >>> clean_relative_path("/etc/passwd")
    Traceback (most recent call last):
    ...
    codegrep.env.sandbox.SandboxError: path '/etc/passwd' is absolute; use a repository-relative path such as 'src/module.py'
    >>> clean_relative_path("-rf")
    Traceback (most recent call last):
    ...
    codegrep.env.sandbox.SandboxError: path '-rf' starts with '-'; paths may not look like command-line flags
    """
    if path is None:
        return ""
    if not isinstance(path, str):
        raise SandboxError(f"{what} must be a string, got {type(path).__name__}")
    _check_chars(path, what)
    if path.startswith(("/", "~", "\\")) or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        raise SandboxError(f"{what} {path!r} is absolute; use a repository-relative path such as 'src/module.py'")
    if path.startswith("-"):
        raise SandboxError(f"{what} {path!r} starts with '-'; paths may not look like command-line flags")
    parts = path.replace("\\", "/").split("/")
    if ".." in parts:
        raise SandboxError(f"{what} {path!r} escapes the repository ('..'); use a repository-relative path")
    norm = posixpath.normpath("/".join(parts))
    if ".git" in norm.split("/"):
        raise SandboxError(f"{what} {path!r} is inside .git, which the tools do not serve")
    return "" if norm == "." else norm


def check_glob(pattern: str | None, what: str = "pattern", required: bool = True) -> str | None:
    """Validate a glob (``**/*.py``, ``src/*.{c,h}``): relative, no escapes, no flags.

    >>> check_glob("**/*.py")
    '**/*.py'
    >>> check_glob("!*.md", what="include")  # ripgrep negation is fine: it is passed as --glob=VALUE
    '!*.md'
    >>> check_glob("--pre=sh", what="include")
    Traceback (most recent call last):
    ...
    codegrep.env.sandbox.SandboxError: include '--pre=sh' starts with '-'; it may not look like a command-line flag
    """
    if pattern is None or pattern == "":
        if required:
            raise SandboxError(f"{what} is required and must be a non-empty string")
        return None
    if not isinstance(pattern, str):
        raise SandboxError(f"{what} must be a string, got {type(pattern).__name__}")
    _check_chars(pattern, what)
    if pattern.startswith("-"):
        raise SandboxError(f"{what} {pattern!r} starts with '-'; it may not look like a command-line flag")
    body = pattern.lstrip("!")
    if body.startswith(("/", "~")):
        raise SandboxError(f"{what} {pattern!r} is absolute; globs are matched against repository-relative paths")
    if ".." in body.replace("\\", "/").split("/"):
        raise SandboxError(f"{what} {pattern!r} contains '..'; globs may not leave the repository")
    return pattern


def check_regex(pattern: str | None) -> str:
    """A grep pattern: any non-empty string without NUL/newline (it goes after ``-e``, never as a flag).

    >>> check_regex("-rf")
    '-rf'
    """
    if not isinstance(pattern, str) or not pattern:
        raise SandboxError("pattern is required and must be a non-empty string")
    _check_chars(pattern, "pattern")
    return pattern


def resolve_inside(root: Path, rel: str) -> Path:
    """The real path of ``root/rel``, refusing anything whose symlinks resolve outside ``root``."""
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / rel)) if rel else real_root
    if target != real_root and real_root not in target.parents:
        raise SandboxError(f"path {rel!r} resolves outside the repository (symlink); refused")
    if ".git" in target.relative_to(real_root).parts:
        raise SandboxError(f"path {rel!r} resolves into .git, which the tools do not serve")
    return target


_NO_LINK = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class InsideFiles:
    """Opens regular files under ``root`` one path component at a time, with ``O_NOFOLLOW`` on each directory and on
    the file: a path without symlinks (one :func:`resolve_inside` returned, or a listed file) that now has one
    (``pkg/`` or ``pkg/a.py`` replaced by a link to ``/etc``) changed since, and is refused rather than followed out of
    the repository. The directories opened are kept until :meth:`close` (a context manager), so the files of one grep
    share them."""

    def __init__(self, root: Path | str) -> None:
        self.root = root
        self._dirs: dict[str, int] = {}

    def _dir(self, rel: str) -> int:
        if rel not in self._dirs:
            parent, _, name = rel.rpartition("/")
            self._dirs[rel] = os.open(name, _NO_LINK | os.O_DIRECTORY, dir_fd=self._dir(parent)) if rel else \
                os.open(self.root, _NO_LINK | os.O_DIRECTORY)
        return self._dirs[rel]

    def open(self, rel: str) -> int:
        """A read-only descriptor of the regular file ``rel``: ``FileNotFoundError`` when it is gone,
        ``SandboxError`` when a symlink or a non-directory now stands on its path or it is not a regular file."""
        changed = SandboxError(f"{rel} changed while the tool ran (a symlink or a non-regular file is now on its "
                               "path); not read")
        parent, _, name = rel.rpartition("/")
        try:  # O_NONBLOCK: a FIFO must not block the open
            fd = os.open(name, _NO_LINK | getattr(os, "O_NONBLOCK", 0), dir_fd=self._dir(parent))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW on a link
                raise changed from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise changed
        return fd

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def __enter__(self) -> "InsideFiles":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_inside(root: Path | str, rel: str) -> int:
    """A read-only descriptor of the regular file ``root/rel`` opened without following any symlink on its path
    (:class:`InsideFiles`)."""
    with InsideFiles(root) as files:
        return files.open(rel)
