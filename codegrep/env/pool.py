"""A pool of git worktrees, one per ``(repository, commit)``, shared by every concurrent rollout.

Layout under ``root`` (default ``cache_dir()/worktrees``), for a key ``<mirror-hash>-<sha>``:
``<key>/`` the detached worktree, ``<key>.ready`` a marker (JSON; its mtime is the LRU clock),
``<key>.lock`` the key's lock file, ``<mirror-hash>.gitlock`` serialising ``git worktree`` on one
mirror, ``pool.lock`` serialising eviction and recovery, ``mirrors/<hash>`` the registry of mirrors.

Holding a worktree means holding a *shared* ``flock`` on its lock file; creating or evicting it needs
the *exclusive* lock. Because the kernel drops a dead process's flocks, a crash cannot leave a stale
hold: the next :meth:`WorktreePool.recover` removes half-made worktrees, orphan directories, lock
files nobody holds and prunes git's worktree list. Threads work the same way (each acquire opens its
own file description), so one mechanism covers threads and processes.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from codegrep.data.gitcmd import git, resolve_commit
from codegrep.files import Flock as _Flock, tree_usage, write_atomic

logger = logging.getLogger(__name__)


class WorktreePool:
    """Shared, ref-counted, LRU-capped detached worktrees; safe across threads and processes."""

    def __init__(self, root: Path | str | None = None, max_worktrees: int = 32, max_bytes: float = 20e9,
                 recover: bool = True) -> None:
        from codegrep.config import cache_dir

        self.root = Path(root) if root else cache_dir() / "worktrees"
        (self.root / "mirrors").mkdir(parents=True, exist_ok=True)
        self.max_worktrees, self.max_bytes = int(max_worktrees), float(max_bytes)
        self._refs: dict[str, int] = {}
        self._shas: dict[tuple[str, str], str] = {}
        self._checked: set[str] = set()  # worktrees found whole (first use in this process)
        self._lock = threading.Lock()
        if recover:
            self.recover()

    @classmethod
    def from_config(cls, env: dict[str, Any] | None) -> "WorktreePool":
        """From a profile's ``env`` section: ``pool_root``, ``max_worktrees``, ``max_disk_gb``."""
        env = env or {}
        return cls(env.get("pool_root"), int(env.get("max_worktrees", 32)), float(env.get("max_disk_gb", 20)) * 1e9)

    # --- naming ------------------------------------------------------------------------------------
    @staticmethod
    def mirror_id(git_dir: Path) -> str:
        return hashlib.sha1(str(Path(git_dir).resolve()).encode()).hexdigest()[:10]

    def key(self, git_dir: Path | str, commit: str) -> str:
        """The pool key of ``(git_dir, commit)`` (the worktree's directory name)."""
        return f"{self.mirror_id(Path(git_dir))}-{self._sha(Path(git_dir).resolve(), commit)}"

    def _sha(self, git_dir: Path, commit: str) -> str:
        cache_key = (str(git_dir), commit)
        if cache_key not in self._shas:
            self._shas[cache_key] = resolve_commit(git_dir, commit)
        return self._shas[cache_key]

    # --- acquire / release -------------------------------------------------------------------------
    @contextmanager
    def acquire(self, git_dir: Path | str, commit: str) -> Iterator[Path]:
        """Yield the worktree of ``commit``; created once, shared by all holders, pinned while held."""
        git_dir = Path(git_dir).resolve()
        key = self.key(git_dir, commit)
        hold = self._hold(key, git_dir, self._sha(git_dir, commit))
        with self._lock:
            self._refs[key] = self._refs.get(key, 0) + 1
        try:
            yield self.root / key
        finally:
            with self._lock:
                self._refs[key] -= 1
                if not self._refs[key]:
                    del self._refs[key]
            hold.close()

    def refcount(self, git_dir: Path | str, commit: str) -> int:
        """How many holders in this process use that worktree now."""
        return self._refs.get(self.key(git_dir, commit), 0)

    def _hold(self, key: str, git_dir: Path, sha: str) -> _Flock:
        hold, ready = _Flock(self.root / f"{key}.lock"), self.root / f"{key}.ready"
        created = False
        while True:
            hold.lock(fcntl.LOCK_SH)
            if ready.exists() and key not in self._checked and self._damage(key) is not None:
                hold.unlock()
                hold.lock(fcntl.LOCK_EX)  # waits until no one holds it: then rebuild it from git
                damage = self._damage(key) if ready.exists() else None
                if damage is not None:
                    print(f"codegrep: worktree pool: {self.root / key} {damage}: rebuilt from git", file=sys.stderr)
                    ready.unlink()
                    self._create(key, git_dir, sha, hold.fd)
                    self._checked.add(key)  # just made from git: whole
                    created = True
                hold.unlock()
                continue
            if ready.exists():
                self._checked.add(key)
                os.utime(ready)  # the LRU clock
                break
            hold.unlock()
            hold.lock(fcntl.LOCK_EX)  # one creator; everyone else waits here
            if not ready.exists():
                self._create(key, git_dir, sha, hold.fd)
                self._checked.add(key)  # just made from git: whole
                created = True
            hold.unlock()  # flock cannot downgrade atomically: loop and re-check under LOCK_SH
        if created:
            self.evict(keep=key)
        return hold

    def _damage(self, key: str) -> str | None:
        """Why a ready worktree is not its commit's files any more, or None. The cheap signal, checked on its
        first use in a process: the bytes of its files against the total recorded when it was made."""
        try:
            marker = json.loads((self.root / f"{key}.ready").read_text())
            expected = marker.get("bytes") if isinstance(marker, dict) else None
        except (OSError, ValueError):
            return "has an unreadable .ready marker"
        if not isinstance(expected, int):
            return None  # a marker from before sizes were recorded: nothing to compare
        if not (self.root / key).is_dir():
            return "is missing"
        try:
            have = tree_usage(self.root / key)[0]
        except OSError:
            return "is unreadable"
        return None if have == expected else f"holds {have} bytes of files, {expected} when made (changed or truncated)"

    def _create(self, key: str, git_dir: Path, sha: str, hold_fd: int) -> None:
        path = self.root / key
        write_atomic(self.root / "mirrors" / self.mirror_id(git_dir), str(git_dir))
        with self._gitlock(git_dir) as gitlock_fd:
            if path.exists() or os.path.lexists(path):
                self._remove_worktree(git_dir, path)
            # git inherits both locks: if this process is killed, an orphaned `git worktree add` still holds
            # them, so nobody removes or recreates the directory it is filling until it exits
            git(git_dir, "worktree", "add", "--detach", "--force", str(path), sha, pass_fds=(hold_fd, gitlock_fd))
        marker = {"git_dir": str(git_dir), "commit": sha, "bytes": tree_usage(path)[0], "pid": os.getpid()}
        tmp = self.root / f"{key}.ready.tmp{os.getpid()}.{threading.get_ident()}"
        tmp.write_text(json.dumps(marker))
        os.replace(tmp, self.root / f"{key}.ready")

    @contextmanager
    def _gitlock(self, git_dir: Path) -> Iterator[int]:
        lock = _Flock(self.root / f"{self.mirror_id(git_dir)}.gitlock")
        lock.lock(fcntl.LOCK_EX)
        try:
            yield lock.fd
        finally:
            lock.close()

    def _remove_worktree(self, git_dir: Path, path: Path) -> None:
        try:  # twice --force also removes a worktree git left locked ("initializing") after a kill
            git(git_dir, "worktree", "remove", "--force", "--force", str(path))
        except RuntimeError:
            pass
        _remove_path(path)
        git(git_dir, "worktree", "prune")

    # --- eviction, recovery, inspection ------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Ready worktrees, least recently used first: key, git_dir, commit, bytes, last_used."""
        out = []
        for marker in self.root.glob("*.ready"):
            try:
                info = json.loads(marker.read_text())
                info.update(key=marker.stem, last_used=marker.stat().st_mtime)
            except (OSError, ValueError):
                continue
            out.append(info)
        return sorted(out, key=lambda e: e["last_used"])

    def evict(self, keep: str | None = None, max_worktrees: int | None = None, max_bytes: float | None = None) -> int:
        """Remove least-recently-used worktrees nobody holds until under the caps; returns how many."""
        cap_n = self.max_worktrees if max_worktrees is None else max_worktrees
        cap_b = self.max_bytes if max_bytes is None else max_bytes
        removed = 0
        with self._global():
            entries = self.entries()
            count, size = len(entries), sum(e.get("bytes", 0) for e in entries)
            for entry in entries:
                if count <= cap_n and size <= cap_b:
                    break
                if entry["key"] != keep and self._try_remove(entry["key"], Path(entry["git_dir"])):
                    count, size, removed = count - 1, size - entry.get("bytes", 0), removed + 1
        return removed

    def clear(self) -> int:
        """Remove every worktree nobody holds (held ones stay)."""
        return self.evict(max_worktrees=0, max_bytes=0)

    def remove(self, key: str) -> bool:
        """Remove one worktree unless someone holds it; True when it is gone (``codegrep cache prune``)."""
        with self._global():
            entry = next((e for e in self.entries() if e["key"] == key), None)
            if entry is None:
                return not (self.root / key).exists()
            return self._try_remove(key, Path(entry["git_dir"]))

    def _try_remove(self, key: str, git_dir: Path | None) -> bool:
        lock = _Flock(self.root / f"{key}.lock")
        if not lock.lock(fcntl.LOCK_EX | fcntl.LOCK_NB):
            lock.close()
            return False  # held (or being created) by someone: not ours to remove
        try:
            (self.root / f"{key}.ready").unlink(missing_ok=True)
            if git_dir is not None and git_dir.exists():
                with self._gitlock(git_dir):
                    self._remove_worktree(git_dir, self.root / key)
            else:
                _remove_path(self.root / key)
            (self.root / f"{key}.lock").unlink(missing_ok=True)
        finally:
            lock.close()
        return True

    @contextmanager
    def _global(self) -> Iterator[None]:
        lock = _Flock(self.root / "pool.lock")
        lock.lock(fcntl.LOCK_EX)
        try:
            yield
        finally:
            lock.close()

    def mirrors(self) -> list[Path]:
        """Every git dir this pool has made worktrees for (that still exists)."""
        out = []
        for reg in (self.root / "mirrors").iterdir():
            if reg.name.startswith("."):  # another process's registration being written (files.atomic_write)
                continue
            try:
                git_dir = Path(reg.read_text())
            except FileNotFoundError:  # unregistered by a concurrent recovery
                continue
            out.append(git_dir) if git_dir.exists() else reg.unlink(missing_ok=True)
        return out

    def recover(self) -> dict[str, int]:
        """Clean what killed processes left: half-made or orphan worktrees, stale lock files, git's list.

        Never raises into the (healthy) caller: anything held by a live process, including an orphaned
        ``git worktree add`` that inherited its killed parent's lock, is skipped and left to a later
        recovery; any other failure on one entry is logged, counted under ``skipped`` and passed over.
        """
        stats = {"worktrees": 0, "orphans": 0, "locks": 0, "skipped": 0}

        def attempt(kind: str, fn: Any, *args: Any) -> None:
            try:
                stats[kind] += int(fn(*args))
            except (OSError, RuntimeError) as exc:
                stats["skipped"] += 1
                logger.warning("worktree pool recovery skipped an entry: %s", exc)

        with self._global():
            for git_dir in self.mirrors():
                try:
                    listed = self._git_worktrees(git_dir)
                except RuntimeError as exc:
                    stats["skipped"] += 1
                    logger.warning("worktree pool recovery skipped %s: %s", git_dir, exc)
                    continue
                for path in listed:
                    if not (self.root / f"{path.name}.ready").exists() or not path.is_dir():
                        attempt("worktrees", self._try_remove, path.name, git_dir)
                attempt("worktrees", self._prune, git_dir)
            for path in list(self.root.iterdir()):
                name = path.name
                if path.is_dir() and name != "mirrors" and not (self.root / f"{name}.ready").exists():
                    attempt("orphans", self._try_remove, name, None)
                elif name.endswith(".ready") and not (self.root / path.stem).is_dir():
                    attempt("orphans", self._try_remove, path.stem, None)
                elif ".ready.tmp" in name:  # a creator died between writing and renaming its marker
                    attempt("locks", self._try_unlink, self.root / f"{name.split('.ready.tmp')[0]}.lock", path)
                elif name.endswith(".lock") and name != "pool.lock" and not (self.root / name[:-5]).exists():
                    attempt("locks", self._try_unlink, path, path)
        return stats

    def _prune(self, git_dir: Path) -> int:
        with self._gitlock(git_dir):
            git(git_dir, "worktree", "prune")
        return 0

    @staticmethod
    def _try_unlink(lock_path: Path, path: Path) -> int:
        """Unlink ``path`` if nobody holds ``lock_path`` (a live holder's flock protects it)."""
        lock = _Flock(lock_path)
        if not lock.lock(fcntl.LOCK_EX | fcntl.LOCK_NB):
            lock.close()
            return 0
        path.unlink(missing_ok=True)
        if lock_path != path and not (lock_path.with_suffix("")).exists():
            lock_path.unlink(missing_ok=True)
        lock.close()
        return 1

    def _git_worktrees(self, git_dir: Path) -> list[Path]:
        """Worktrees of ``git_dir`` that live under this pool's root (by ``git worktree list``)."""
        text = git(git_dir, "worktree", "list", "--porcelain").decode("utf-8", "replace")
        paths = [Path(line[len("worktree "):]) for line in text.splitlines() if line.startswith("worktree ")]
        root = self.root.resolve()
        return [p for p in paths if p.parent == root]

    def leaked(self) -> list[str]:
        """Worktrees git lists for our mirrors that are not live pool entries (should always be empty)."""
        live = {e["key"] for e in self.entries()}
        return [str(p) for g in self.mirrors() for p in self._git_worktrees(g)
                if p.name not in live or not p.is_dir()]


def _remove_path(path: Path) -> None:
    """Remove a file, link or directory tree; tolerant of entries vanishing (or appearing) meanwhile."""
    for _ in range(5):
        if not os.path.lexists(path):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return
    if os.path.lexists(path):
        raise OSError(f"could not remove {path}: it keeps changing (a process still writing into it?)")


_DEFAULT_POOLS: dict[str, WorktreePool] = {}
_DEFAULT_LOCK = threading.Lock()


def default_pool(env: dict[str, Any] | None = None) -> WorktreePool:
    """The process's pool of the root ``env`` names (``pool_root``, else the cache directory as it is now:
    ``CODEGREP_CACHE``), built from ``env`` on first use of that root (recovery runs then, once); every later call
    for the same root shares it (one reference count per root). A process that moves its cache gets the new root's
    pool, never a pool left on the old one."""
    from codegrep.config import cache_dir

    env = env or {}
    root = str(Path(env.get("pool_root") or cache_dir() / "worktrees").resolve())
    with _DEFAULT_LOCK:
        if root not in _DEFAULT_POOLS:
            _DEFAULT_POOLS[root] = WorktreePool.from_config({**env, "pool_root": root})
        return _DEFAULT_POOLS[root]
