"""Files at the edges: reading user files (one clear line on failure), checked output paths, atomic writes
that never replace an input, and JSON with a depth limit. Errors are ``codegrep.errors.UserError``."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import json
import math
import os
import threading
import zlib
from glob import escape as glob_escape
from pathlib import Path
from typing import IO, Any, Iterator

from codegrep.errors import UserError


# ------------------------------------------------------------------------------------ checks at the edges


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """A text file's content as UTF-8 (gunzipped when its name ends in ``.gz``; a leading byte-order mark, as
    Windows editors write one, dropped); a missing file, a directory, undecodable bytes or a damaged gzip stream
    name the file.

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
        data = p.read_bytes()
        if p.name.endswith(".gz"):
            data = gzip.decompress(data)
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise UserError(f"{what} {p}: not gzip data, or truncated ({exc or type(exc).__name__})") from None


def jsonl_objects(path: str | os.PathLike, what: str = "file") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) of a JSONL file (:func:`read_text`) whose rows must be JSON objects; blank lines are
    skipped; a row that is not JSON, or not an object, is a ``UserError`` naming ``file:line``.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.jsonl"; _ = p.write_text('{"a": 1}\\n\\n[2]\\n')
    >>> list(jsonl_objects(p))
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: .../r.jsonl:3: must be a JSON object, got list
    """
    for n, line in enumerate(read_text(path, what).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json_loads(line, f"{path}:{n}")
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{n}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{n}: must be a JSON object, got {type(row).__name__}")
        yield n, row


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


# --------------------------------------------------------------------- outputs: atomic, never over an input


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file (same resolved path, or the same inode through a link)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(outputs: dict[str, "str | os.PathLike | None"],
                              inputs: dict[str, "str | os.PathLike | None"]) -> None:
    """Refuse, before anything is opened, an output that is one of the inputs or another output.

    Keys are what the user typed (``--out``, ``--tasks``, ``input 2``); values are paths (None: not given).

    >>> refuse_overwriting_inputs({"--out": "a.jsonl"}, {"--tasks": "a.jsonl"})
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: --out a.jsonl: is also an input (--tasks); refusing to overwrite an input (give another --out)
    >>> refuse_overwriting_inputs({"--out": "r.jsonl", "--demonstrations": "r.jsonl"}, {})
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: --demonstrations r.jsonl: is the same file as --out; give two different paths
    """
    outs = [(k, Path(v)) for k, v in outputs.items() if v is not None]
    for i, (flag, out) in enumerate(outs):
        for flag2, out2 in outs[:i]:
            if _same(out, out2):
                raise UserError(f"{flag} {out}: is the same file as {flag2}; give two different paths")
        for name, src in inputs.items():
            if src is not None and _same(out, Path(src)):
                raise UserError(f"{flag} {out}: is also an input ({name}); refusing to overwrite an input "
                                f"(give another {flag})")


def _write_error(path: Path, exc: OSError) -> UserError:
    return UserError(f"{path}: cannot write ({exc.strerror or exc}); nothing was replaced: the previous {path.name} "
                     "(if any) is as it was")


def _label(path: Path, label: "str | os.PathLike | None") -> Path:
    return Path(label) if label is not None else path


@contextlib.contextmanager
def write_errors(path: "str | os.PathLike", note: str = "") -> Iterator[None]:
    """Turn an ``OSError`` of writing ``path`` that names no file (no space, file too large: ``write`` and
    ``flush`` do not say which file) into a :class:`UserError` naming ``path`` (and ``note``).

    An ``OSError`` without an ``errno`` did not come from the system: code raised it with its own message (the
    repository resolver's ``FileNotFoundError("repository o/n ... is not available offline ...")`` inside an
    ``evaluate`` loop); it passes through unchanged instead of being called a write error.
    """
    try:
        yield
    except OSError as exc:
        if getattr(exc, "filename", None) is not None or exc.errno is None:
            raise
        raise UserError(f"{path}: cannot write ({exc.strerror or exc}){note}") from None


@contextlib.contextmanager
def atomic_write(path: "str | os.PathLike", mode: str = "wb", label: "str | os.PathLike | None" = None,
                 **open_kwargs: Any) -> Iterator[IO]:
    """Write ``path`` through a temporary sibling renamed into place on success: a reader (or a killed or
    failed run) sees the previous file whole or the new one whole, never half of one.

    The one helper every output of the package goes through. A failure to write (no space, file too large,
    permission) is a :class:`UserError` naming ``path`` (or ``label``, the file the user knows, when ``path`` is a
    hidden working file); on any failure the temporary file is removed, and so are the directories made for it
    (nothing is left that was not there).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "x.txt"
    >>> with atomic_write(p, "w") as fh:
    ...     _ = fh.write("whole")
    >>> p.read_text(), sorted(q.name for q in p.parent.iterdir())
    ('whole', ['x.txt'])
    >>> try:
    ...     with atomic_write(p.parent / "new" / "sub" / "y.txt", "w") as fh:
    ...         raise ValueError("failed")
    ... except ValueError:
    ...     sorted(q.name for q in p.parent.iterdir())
    ['x.txt']
    """
    p = Path(path)
    made = _missing_dirs(p.parent)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _remove_dirs(made)
        raise UserError(f"{_label(p, label)}: cannot create its directory ({exc.strerror or exc})") from None
    _remove_dead_temporaries(p)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fh = open(tmp, mode, **open_kwargs)
    except OSError as exc:
        _remove_dirs(made)
        raise _write_error(_label(p, label), exc) from None
    try:
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        _remove_dirs(made)
        if getattr(exc, "filename", None) is not None and exc.filename != str(tmp) or exc.errno is None:
            raise  # an error of another file (an input read while writing) names itself; one without an errno was
            # raised by code in the block (a repository not available offline), not by writing (see write_errors)
        raise _write_error(_label(p, label), exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        _remove_dirs(made)
        raise


def _missing_dirs(directory: Path) -> list[Path]:
    """``directory`` and its ancestors that do not exist yet, deepest first (what ``mkdir(parents=True)`` makes)."""
    out = []
    try:
        while not directory.exists() and directory != directory.parent:
            out.append(directory)
            directory = directory.parent
    except OSError:  # a folder the user may not search (EACCES): mkdir then says why, as a UserError
        pass
    return out


def _remove_dirs(dirs: list[Path]) -> None:
    """Remove the directories a failed write made, deepest first; one that something else now holds stays."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            return


def _remove_dead_temporaries(path: Path) -> None:
    """Remove the temporary siblings of ``path`` that killed runs left (their process no longer exists)."""
    try:
        leftovers = list(path.parent.glob(f".{glob_escape(path.name)}.*.tmp"))
    except OSError:
        return
    for tmp in leftovers:
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                tmp.unlink()
        except OSError:  # alive, owned by another user
            pass


def write_atomic(path: "str | os.PathLike", data: "str | bytes") -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically (:func:`atomic_write`); returns the path."""
    with atomic_write(path, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def tree_usage(path: Path) -> tuple[int, float]:
    """(bytes, newest mtime) of a file or a directory tree, links not followed; entries vanishing meanwhile are
    passed over (a cache being pruned or filled by another process)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return 0, 0.0
    if not path.is_dir() or path.is_symlink():
        return st.st_size, st.st_mtime
    total, newest, stack = 0, st.st_mtime, [str(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for item in it:
                    try:
                        info = item.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    newest = max(newest, info.st_mtime)
                    if item.is_dir(follow_symlinks=False):
                        stack.append(item.path)
                    else:
                        total += info.st_size
        except (FileNotFoundError, NotADirectoryError):
            continue
    return total, newest


def end_last_row(path: "str | os.PathLike") -> int:
    """Make a JSONL log end with a whole row before more rows are appended: a last line without its newline that
    is not a JSON value (a row a killed process was writing) is cut; a whole one is ended with its newline.
    Returns the bytes cut.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "m.jsonl"
    >>> _ = p.write_text('{"step": 1}\\n{"step": 2, "kl'); end_last_row(p), p.read_text()
    (15, '{"step": 1}\\n')
    >>> _ = p.write_text('{"step": 1}'); end_last_row(p), p.read_text()
    (0, '{"step": 1}\\n')
    >>> end_last_row(p), end_last_row(p.with_name("absent.jsonl"))
    (0, 0)
    """
    try:
        with open(path, "r+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0 or (fh.seek(size - 1), fh.read(1))[1] == b"\n":
                return 0  # the usual case: one byte read
            fh.seek(0)
            data = fh.read()
            keep = data.rfind(b"\n") + 1
            try:
                json.loads(data[keep:])
            except (ValueError, RecursionError):
                fh.truncate(keep)
                return size - keep
            fh.write(b"\n")  # a whole row that only lacks its newline
            return 0
    except FileNotFoundError:
        return 0


def open_append(path: "str | os.PathLike", encoding: str = "utf-8") -> IO[str]:
    """Open an append-only JSONL log (results, metrics, plans) to continue it, after :func:`end_last_row`: a row a
    killed run left half-written is cut first (readers skip it as torn; the resumed run writes it again), so the
    first new row does not land on it, where it was skipped in turn and the next resume met a bad middle line."""
    end_last_row(path)
    return open(path, "a", encoding=encoding)


# ------------------------------------------------------------------------------- strict JSON out


def jsonable(obj: Any) -> Any:
    """``obj`` as plain JSON values: numpy scalars as Python numbers, paths as strings, keys as strings, and a
    float that is not finite (NaN, inf: an undefined mean, a change from a zero base) as ``None``.

    >>> import math; jsonable({1: [math.nan, 2.5, float("inf")], "p": Path("a/b")})
    {'1': [None, 2.5, None], 'p': 'a/b'}
    """
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_text(obj: Any, **kwargs: Any) -> str:
    """Strict JSON (RFC 8259) for what the commands print and save: ``json.dumps`` writes ``NaN`` and
    ``Infinity``, which ``jq``, JavaScript and most other parsers refuse; here they are ``null`` (:func:`jsonable`).
    ``kwargs`` go to ``json.dumps`` (``indent``, ``sort_keys``, ``default``).

    >>> json_text({"resolve_rate": float("nan"), "n": 0})
    '{"resolve_rate": null, "n": 0}'
    """
    return json.dumps(jsonable(obj), allow_nan=False, **kwargs)


# ------------------------------------------------------------------------------- parsers with a depth limit


def json_loads(data: "str | bytes", source: str) -> Any:
    """``json.loads`` whose nesting-depth failure (``RecursionError``) is one ``UserError`` naming ``source``;
    other malformed JSON raises ``json.JSONDecodeError`` as usual (the caller words it with its line).

    >>> json_loads("[" * 100_000 + "]" * 100_000, "t.json")
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: t.json: JSON nested too deeply (more than 900 levels); refusing to read it
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise UserError(f"{source}: JSON nested too deeply (more than {MAX_JSON_DEPTH} levels); "
                        "refusing to read it") from None


MAX_JSON_DEPTH = 900
"""Nesting the JSON parsers accept (Python's own recursion limit, about 1000, is what stops them)."""


def read_json(path: "str | os.PathLike", what: str = "file") -> Any:
    """A JSON file's value; missing, not UTF-8, malformed (``file:line``) or nested too deeply is one ``UserError``.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "run.json"; _ = p.write_text('{"a": 1,\\n')
    >>> read_json(p)
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: .../run.json:2: invalid JSON: Expecting property name enclosed in double quotes
    """
    try:
        return json_loads(read_text(path, what), str(path))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None


def read_json_object(path: "str | os.PathLike") -> dict[str, Any]:
    """:func:`read_json` of a file that must hold one JSON object (a run's ``run.json``, a headline)."""
    data = read_json(path, "run record")
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object, got {type(data).__name__}")
    return data


# ------------------------------------------------------------------------------------ locks


class Flock:
    """An ``flock`` on a path that survives the unlink-and-recreate race (the inode is re-checked). Each instance
    opens its own file description, so threads of one process exclude each other as processes do; the kernel drops a
    dead process's locks, so a crash never leaves a stale one."""

    def __init__(self, path: Path) -> None:
        self.path, self.fd = path, -1

    def lock(self, mode: int) -> bool:
        """Take ``mode`` (LOCK_SH/LOCK_EX, optionally | LOCK_NB); False when NB and busy."""
        while True:
            if self.fd < 0:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(self.fd, mode)
            except BlockingIOError:
                return False
            try:
                if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                    return True
            except FileNotFoundError:
                pass
            self.close()  # the file was unlinked (evicted) while we waited: lock the new one

    def unlock(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the flock
            self.fd = -1


def writer_lock_path(path: "str | os.PathLike") -> Path:
    """The hidden lock file :func:`single_writer` holds for ``path``.

    >>> writer_lock_path("runs/agent.jsonl")
    PosixPath('runs/.agent.jsonl.lock')
    """
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def single_writer(path: "str | os.PathLike", what: str = "run") -> Iterator[None]:
    """Hold ``path``'s writer lock (:func:`writer_lock_path`, an exclusive ``flock``) for the block: a second ``what``
    on the same output, in another process or thread, fails at once with one line naming the holder's pid, before it
    reads or writes anything, instead of both streaming into one resume file. The lock file holds the holder's pid
    and is removed when the block ends. Where the folder may not be written (permission, read-only file system) no
    lock is taken: the block runs as before (reading stored rows works; a write fails naming its file).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     out = Path(d) / "r.jsonl"
    ...     with single_writer(out, "evaluation"):
    ...         try:
    ...             with single_writer(out, "evaluation"):
    ...                 pass
    ...         except UserError as exc:
    ...             print(str(exc).split(": ", 1)[1])
    ...     writer_lock_path(out).exists()
    another evaluation (pid ...) is writing it; wait for it to end, or write elsewhere
    False
    """
    path = Path(path)
    lock_path = writer_lock_path(path)
    lock = Flock(lock_path)
    made = _missing_dirs(path.parent)  # removed again at the end where nothing was written into them
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        taken = lock.lock(fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        lock.close()
        _remove_dirs(made)
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not path.parent.is_dir():
            raise _write_error(path, exc) from None
        taken = None  # a folder this process may not write: no run of its can write there either
    if taken is None:  # (one that only reuses stored rows still reads them; one that writes fails naming the file)
        yield
        return
    if not taken:
        try:
            pid = os.pread(lock.fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
        finally:
            lock.close()
        raise UserError(f"{path}: another {what} (pid {pid}) is writing it; wait for it to end, or write elsewhere")
    try:
        os.ftruncate(lock.fd, 0)
        os.pwrite(lock.fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        try:
            lock_path.unlink()  # while held: a process waiting on the old file re-checks the inode (Flock.lock)
        except OSError:
            pass
        lock.close()
        _remove_dirs(made)  # only those still empty (a failed run's): one holding outputs stays
