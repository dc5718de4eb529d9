"""User mistakes versus bugs: the one error boundary of the ``codegrep`` command (the edge checks it relies on are
``codegrep.files``, reading and writing files, and ``codegrep.argtypes``, argparse types).

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
validated at the edge -- also a bug, to be fixed by validating there (``codegrep.files``, ``codegrep.argtypes``).
"""
from __future__ import annotations

import errno
import linecache
import os
import re

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


def decode_error(path: str | os.PathLike, exc: UnicodeDecodeError, lineno: int | None = None) -> UserError:
    """A ``UserError`` naming the file (and line) a ``UnicodeDecodeError`` came from."""
    where = f"{path}:{lineno}" if lineno else str(path)
    return UserError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})")


def damaged_file(path: "str | os.PathLike", exc: BaseException, fix: str) -> UserError:
    """A ``UserError`` for a cached file (index, model) that cannot be read: names it, the reason, the fix.

    >>> print(damaged_file("m/model.safetensors", ValueError("header too short"), "delete m to rebuild it"))
    m/model.safetensors: damaged or truncated (ValueError: header too short); delete m to rebuild it

    A full disk is said as such, not as damage (deleting a good file would not help):

    >>> import errno
    >>> print(damaged_file("m", OSError(errno.ENOSPC, "No space left on device"), "delete m to rebuild it"))
    m: could not be read: no space left on device (OSError: [Errno 28] No space left on device); free disk space and rerun (the file itself may be fine)
    """
    reason = " ".join(str(exc).split())[:200]
    if _disk_full(exc):
        return UserError(f"{path}: could not be read: no space left on device ({type(exc).__name__}: {reason}); "
                         "free disk space and rerun (the file itself may be fine)")
    return UserError(f"{path}: damaged or truncated ({type(exc).__name__}: {reason}); {fix}")


def _disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised from is a full disk (or quota).

    >>> import errno; _disk_full(RuntimeError("x")), _disk_full(OSError(errno.EDQUOT, "quota"))
    (False, True)
    """
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
