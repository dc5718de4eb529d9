"""User mistakes versus bugs: the one error boundary of the ``codegrep`` command and the edge checks it relies on.

A *user mistake* (a bad argument, a missing or malformed input file, an output path that cannot be written)
is reported as one line ``codegrep <command>: error: <message naming the file (and line) or the argument>``
and exit status 2, with no traceback. Anything else is a *bug*: its traceback is kept and the command says so
(exit status 1). :func:`user_message` is the rule that tells them apart:

* a :class:`UserError` (``codegrep.config.ConfigError`` is one) -- what new code raises for bad input;
* an ``OSError`` that names a file (``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError`` ...):
  the file system refused a path the user gave;
* a ``ValueError``/``RuntimeError``/``OSError`` raised by an explicit ``raise`` statement in codegrep's own
  code, or of a class codegrep defines (``ToolError``, ``SandboxError`` ...): such a message was written for the
  user (older modules raise these instead of ``UserError``).

A ``ValueError`` raised *inside* a call (``int("x")`` in codegrep, or anything in a third-party library), a
``TypeError``, ``KeyError``, ``AttributeError``, ``UnicodeDecodeError`` ... is a bug, or an input that was not
validated at the edge -- also a bug, to be fixed by validating there (the helpers below).
"""
from __future__ import annotations

import argparse
import linecache
import math
import os
import re
from pathlib import Path

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class UserError(ValueError):
    """A mistake in the user's input; the message names the file (and line) or the argument.

    A ``ValueError`` so that code catching ``ValueError`` keeps working.
    """


def _raised_by_codegrep(exc: BaseException) -> bool:
    """Whether ``exc`` came from an explicit ``raise`` statement in a codegrep source file."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
    if not filename.startswith(PACKAGE_DIR + os.sep):
        return False
    return linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise")


def user_message(exc: BaseException) -> str | None:
    """The one-line message when ``exc`` is a user mistake, else ``None`` (a bug: keep the traceback).

    >>> user_message(UserError("tasks.jsonl:3: field 'patch' must be a string, got int"))
    "tasks.jsonl:3: field 'patch' must be a string, got int"
    >>> user_message(IsADirectoryError(21, "Is a directory", "out/"))
    'out/: Is a directory'
    >>> user_message(KeyError("matched")) is None
    True
    """
    if isinstance(exc, UserError):
        message = str(exc)
    elif isinstance(exc, OSError) and getattr(exc, "filename", None) is not None:
        message = f"{exc.filename}: {exc.strerror or exc}"
    elif isinstance(exc, (ValueError, RuntimeError, OSError)) and (
            type(exc).__module__.startswith("codegrep.") or _raised_by_codegrep(exc)):
        message = str(exc)
    else:
        return None
    return re.sub(r"\s*\n\s*", " ", message.strip())  # one line


# ------------------------------------------------------------------------------------ checks at the edges


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """A text file's content as UTF-8; a missing file, a directory or undecodable bytes name the file.

    >>> read_text("/nonexistent/tasks.jsonl", "tasks file")
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: tasks file not found: /nonexistent/tasks.jsonl
    """
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{what} {p}: is a directory, not a file")
    if not p.exists():
        raise UserError(f"{what} not found: {p}")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def decode_error(path: str | os.PathLike, exc: UnicodeDecodeError, lineno: int | None = None) -> UserError:
    """A ``UserError`` naming the file (and line) a ``UnicodeDecodeError`` came from."""
    where = f"{path}:{lineno}" if lineno else str(path)
    return UserError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})")


def output_file(path: str | os.PathLike, what: str = "--out") -> Path:
    """Check that ``path`` can be a file to write: not a directory, its parent not a file."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{what} {p}: is a directory, expected a file path")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{what} {p}: {parent} is a file, not a directory")
            break
    return p


def output_dir(path: str | os.PathLike, what: str = "--out") -> Path:
    """Check that ``path`` can be a directory to write into: not an existing file (nor under one)."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise UserError(f"{what} {p}: {q} is a file, expected a directory")
            break
    return p


# ------------------------------------------------------------------ argparse types that refuse wrong shapes


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1.

    >>> positive_int("5")
    5
    >>> positive_int("-5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive integer, got '-5'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (refuses ``nan``, ``inf``, ``-1``)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (refuses ``nan``, ``inf``, ``-1``).

    >>> positive_float("2.5")
    2.5
    >>> positive_float("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive finite number, got 'nan'
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text!r}")
    return value
