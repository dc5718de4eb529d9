"""A content-addressed store of blob files, shared by every commit, process and epoch of a repository.

Checkout-free mode answers ``read`` and ``glob`` from git objects directly; ``grep`` runs ripgrep over the
blob files of this store (``<root>/<mirror-id>/<sha[:2]>/<sha[2:]>``). A blob is written once, by whoever
needs it first (``git cat-file --batch``, a temp file, then an atomic rename), and never changes, so a
killed writer leaves at most a temp file and readers never see half a blob. Commits of one repository share
most blobs, so a new commit costs only its changed files. Writers of one store take its ``.lock`` (threads
via a lock, processes via ``flock``) so that concurrent rollouts do not write the same blobs twice.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterable, Mapping

from codegrep.data.gitcmd import cat_file_batch
from codegrep.files import write_atomic

_STORES: dict[tuple[str, str], "BlobStore"] = {}
_STORES_LOCK = threading.Lock()
_BACKGROUND: list[threading.Thread] = []
WRITE_BATCH = 256
"""Blobs written per hold of a store's lock (one ``git cat-file --batch`` each)."""
SOURCE_FILE = "repository"
"""A store's file naming the git dir it copies (blobs live in two-hex-digit directories beside it)."""


def wait_background() -> None:
    """Join every background filling started in this process (before deleting a store, or at exit)."""
    while _BACKGROUND:
        _BACKGROUND.pop().join()


def store_for(git_dir: Path | str, root: Path | str | None = None) -> "BlobStore":
    """The process-wide store of ``git_dir`` under ``root`` (default ``cache_dir()/blobs``)."""
    if root is None:
        from codegrep.config import cache_dir

        root = cache_dir() / "blobs"
    key = (str(Path(git_dir).resolve()), str(Path(root).resolve()))
    with _STORES_LOCK:
        if key not in _STORES:
            _STORES[key] = BlobStore(Path(key[1]), Path(key[0]))
        return _STORES[key]


def _object_id(data: bytes) -> str:
    """The git (SHA-1) object id of a blob's content.

    >>> _object_id(b"hello\\n")
    'ce013625030ba8dba906f756967f9e9ca394464a'
    """
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class BlobStore:
    """Blob files of one repository; :meth:`ensure` writes the missing ones."""

    def __init__(self, root: Path, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.dir = root / hashlib.sha1(str(git_dir).encode()).hexdigest()[:10]
        self.dir.mkdir(parents=True, exist_ok=True)
        source = self.dir / SOURCE_FILE
        if not source.exists():  # names the repository for ``codegrep cache`` (a store whose repository is gone)
            write_atomic(source, str(git_dir))
        self._have: set[str] = set()
        self._lock = threading.Lock()
        self._started: set[str] = set()
        self._started_lock = threading.Lock()
        self._waiting = 0  # foreground ensure() calls in progress; the background filling yields to them
        self._waiting_lock = threading.Lock()
        self._no_waiting = threading.Event()
        self._no_waiting.set()

    def foreground_waiting(self) -> int:
        """How many foreground :meth:`ensure` calls (a grep waiting for its files) are in progress."""
        return self._waiting

    @staticmethod
    def relpath(sha: str) -> bytes:
        """Path of a blob relative to :attr:`dir` (what ripgrep is given)."""
        return f"{sha[:2]}/{sha[2:]}".encode()

    def _damaged(self, sha: str, size: int | None) -> int | None:
        """The size on disk of a stored blob whose size is not ``size`` (truncated or changed), else None."""
        try:
            have = (self.dir / os.fsdecode(self.relpath(sha))).stat().st_size
        except OSError:
            return None
        return have if size is not None and have != size else None

    def _usable(self, sha: str, size: int | None) -> bool:
        path = self.dir / os.fsdecode(self.relpath(sha))
        return path.exists() and self._damaged(sha, size) is None

    def ensure(self, shas: Iterable[str], sizes: Mapping[str, int] | None = None, background: bool = False) -> int:
        """Write every blob of ``shas`` not yet in the store; returns how many were written.

        ``sizes`` (the tree's blob sizes) is the cheap signal checked on each blob's first use in a process: a
        stored blob of another size (truncated on disk, or changed) is rewritten from git and one line on stderr
        says so. Blobs are written through a temp file and renamed only after their content hashes to ``sha``.
        Blobs are written ``WRITE_BATCH`` at a time, the store's lock taken per batch; a ``background`` call (the
        filling started when an environment opens) waits before each batch while a foreground call is in
        progress, so a grep waits for its own missing files and at most one batch, not for the whole repository.
        """
        sizes = sizes or {}
        todo = [s for s in dict.fromkeys(shas) if s not in self._have]
        if not todo:
            return 0
        if background:
            return sum(self._ensure_batch(todo[i:i + WRITE_BATCH], sizes, wait=True)
                       for i in range(0, len(todo), WRITE_BATCH))
        with self._waiting_lock:
            self._waiting += 1
            self._no_waiting.clear()
        try:
            return sum(self._ensure_batch(todo[i:i + WRITE_BATCH], sizes)
                       for i in range(0, len(todo), WRITE_BATCH))
        finally:
            with self._waiting_lock:
                self._waiting -= 1
                if not self._waiting:
                    self._no_waiting.set()

    def _ensure_batch(self, todo: list[str], sizes: Mapping[str, int], wait: bool = False) -> int:
        if wait:
            self._no_waiting.wait()
        with self._lock:
            todo = [s for s in todo if s not in self._have]
            damaged = {s: d for s in todo if (d := self._damaged(s, sizes.get(s))) is not None}
            missing = [s for s in todo if s in damaged or not (self.dir / os.fsdecode(self.relpath(s))).exists()]
            written = 0
            if missing:
                fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # another process may be writing the same blobs
                    missing = [s for s in missing if not self._usable(s, sizes.get(s))]
                    written = self._write(missing)
                finally:
                    os.close(fd)
            self._have.update(todo)
        repaired = [s for s in damaged if s in missing]
        if repaired:
            first = repaired[0]
            print(f"codegrep: blob store {self.dir}: repaired {len(repaired)} damaged blob(s) from git (e.g. "
                  f"{first[:2]}/{first[2:]}: {damaged[first]} bytes on disk, {sizes[first]} expected)",
                  file=sys.stderr)
        return written

    def ensure_in_background(self, key: str, shas: list[str], sizes: Mapping[str, int] | None = None) -> None:
        """Start :meth:`ensure` on a daemon thread, once per ``key`` (a commit) in this process."""
        with self._started_lock:
            if key in self._started:
                return
            self._started.add(key)
        thread = threading.Thread(target=self._quiet_ensure, args=(shas, sizes), daemon=True, name="codegrep-blobs")
        thread.start()
        _BACKGROUND[:] = [t for t in _BACKGROUND if t.is_alive()] + [thread]

    def _quiet_ensure(self, shas: list[str], sizes: Mapping[str, int] | None) -> None:
        try:
            self.ensure(shas, sizes, background=True)
        except Exception:  # the foreground ensure() of the first grep retries and reports
            pass

    def _write(self, shas: list[str]) -> int:
        if not shas:
            return 0
        proc = cat_file_batch(self.git_dir, quiet=True)
        feeder = threading.Thread(target=self._feed, args=(proc, shas), daemon=True)
        feeder.start()
        suffix = f".tmp{os.getpid()}.{threading.get_ident()}"
        try:
            for sha in shas:
                header = proc.stdout.readline().split()
                if len(header) != 3:
                    raise RuntimeError(f"git cat-file --batch answered {header!r} for {sha} in {self.git_dir}")
                data = proc.stdout.read(int(header[2]) + 1)[:-1]
                if len(data) != int(header[2]) or _object_id(data) != sha:
                    raise RuntimeError(f"git cat-file --batch gave {len(data)} bytes that do not hash to {sha} "
                                       f"in {self.git_dir}: the repository may be damaged (git fsck)")
                dest = self.dir / os.fsdecode(self.relpath(sha))
                dest.parent.mkdir(exist_ok=True)
                tmp = dest.with_name(dest.name + suffix)
                tmp.write_bytes(data)
                os.replace(tmp, dest)
        finally:
            feeder.join()
            proc.stdout.close()
            proc.wait()
        return len(shas)

    @staticmethod
    def _feed(proc: subprocess.Popen, shas: list[str]) -> None:
        try:
            proc.stdin.write("".join(s + "\n" for s in shas).encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
