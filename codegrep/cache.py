"""What the cache directory holds, and freeing it: ``codegrep cache info`` and ``codegrep cache prune``.

Everything under ``cache_dir()`` (``CODEGREP_CACHE``, default ``~/.cache/codegrep``) is rebuilt on demand, but
only the worktree pool caps itself; blob stores, retriever indexes, converted models and verdicts grow with every
repository and commit a machine has seen (a reviewer's paper-scale run, or a test suite's throw-away repositories).
An *entry* is one directory (or file) of a kind: one worktree, one repository's blob store, one index of one
snapshot, one model. ``prune`` removes whole entries, least recently modified first, and never one in use:

* worktrees go through :class:`codegrep.env.pool.WorktreePool`, which skips any worktree a process holds;
* an entry with a lock file (``<entry>/.lock`` of a blob store, ``<entry>.lock`` beside a converted model) is
  removed only while its lock can be taken exclusively;
* an entry is first renamed to a hidden name in the same directory, then deleted, so a reader sees the whole entry
  or none (and rebuilds it). Kinds without a lock (indexes, snapshots, task sets, verdicts) are not known to be in
  use: a run that is opening one at that moment can fail and need a rerun, so prune those between runs;
* kinds that cannot be rebuilt offline or are records rather than caches (``PROTECTED``: git mirrors, the MCP
  server's episodes) and directories this module does not know are pruned only when named with ``--kind``.

"Modified" is the newest modification time inside an entry (a worktree: its last hold), the only use clock every
kind has; reading an index does not move it.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from codegrep.argtypes import byte_size, non_negative_float
from codegrep.config import cache_dir
from codegrep.errors import UserError
from codegrep.files import json_text, tree_usage

KINDS: dict[str, str] = {
    "worktrees": "detached git worktrees of (repository, commit), capped by the pool",
    "blobs": "file contents of each repository the checkout-free tools searched",
    "indexes/bm25": "BM25 indexes, one per snapshot",
    "indexes/dense": "dense-retriever chunk embeddings, one per snapshot and model",
    "snapshots": "the shipped snapshot repositories, unpacked",
    "models": "converted models (SmolLM2 from its GGUF, tiny test policies)",
    "default_set": "the offline default task set, per build version",
    "bench": "repositories the benchmarks build",
    "verify": "gold/base verdicts of the Docker-free verifier, per instance",
    "verify-envs": "per-repository site directories of the verifier (rebuilding may need the network)",
    "mirrors": "bare git mirrors cloned from GitHub (rebuilding needs the network)",
    "mcp": "the MCP server's agent episodes (records, not rebuilt)",
}
"""Every kind of entry this module knows: its directory under the cache and what it holds."""
PROTECTED = frozenset({"mirrors", "mcp"})
"""Kinds pruned only when named with ``--kind``: they cannot be rebuilt offline, or are records."""
_TRASH_PREFIX = ".pruning-"


@dataclass
class Entry:
    """One removable unit of the cache."""

    kind: str
    """Its kind (a key of :data:`KINDS`, or an unknown directory's name)."""
    name: str
    """Its name inside the kind's directory."""
    path: str
    """Where it is."""
    bytes: int
    """Bytes of its files (links not followed)."""
    modified: float
    """Newest modification time inside it (seconds since the epoch)."""
    orphan: bool = False
    """A blob store whose repository no longer exists (its ``repository`` file names a missing git dir)."""


def _kind_dirs(root: Path) -> dict[str, Path]:
    """Kind -> directory, for every directory under ``root`` (``indexes`` split by retriever)."""
    out: dict[str, Path] = {}
    if not root.is_dir():
        return out
    for child in sorted(root.iterdir()):
        if child.name.startswith(".") or not child.is_dir():
            continue
        if child.name == "indexes":
            out.update({f"indexes/{sub.name}": sub for sub in sorted(child.iterdir())
                        if sub.is_dir() and not sub.name.startswith(".")})
        else:
            out[child.name] = child
    return out


def _orphan_store(store: Path) -> bool:
    from codegrep.env.blobstore import SOURCE_FILE

    try:
        return not Path((store / SOURCE_FILE).read_text(encoding="utf-8")).exists()
    except (OSError, UnicodeDecodeError):
        return False  # a store from before stores named their repository: its source is unknown, not gone


def entries(root: Path | None = None) -> list[Entry]:
    """Every entry under ``root`` (default ``cache_dir()``), least recently modified first."""
    from codegrep.env.pool import WorktreePool

    root = Path(root) if root is not None else cache_dir()
    out: list[Entry] = []
    for kind, directory in _kind_dirs(root).items():
        if kind == "worktrees":
            for e in WorktreePool(directory, max_worktrees=1 << 30, max_bytes=float("inf")).entries():
                out.append(Entry(kind, e["key"], str(directory / e["key"]), int(e.get("bytes", 0)), e["last_used"]))
            continue
        for child in sorted(directory.iterdir()):
            if child.name.startswith(".") or child.name.endswith(".lock"):
                continue  # hidden work files and lock files are not entries
            size, modified = tree_usage(child)
            orphan = kind == "blobs" and child.is_dir() and _orphan_store(child)
            out.append(Entry(kind, child.name, str(child), size, modified, orphan))
    return sorted(out, key=lambda e: (e.modified, e.kind, e.name))


def summary(items: Iterable[Entry]) -> dict[str, dict[str, Any]]:
    """Per kind: entries, bytes, oldest and newest modification, orphans, whether ``prune`` skips it unnamed.

    >>> summary([Entry("blobs", "a", "/c/blobs/a", 10, 5.0, True), Entry("blobs", "b", "/c/blobs/b", 5, 9.0)])
    {'blobs': {'entries': 2, 'bytes': 15, 'oldest': 5.0, 'newest': 9.0, 'orphans': 1, 'protected': False}}
    """
    out: dict[str, dict[str, Any]] = {}
    for e in items:
        row = out.setdefault(e.kind, {"entries": 0, "bytes": 0, "oldest": e.modified, "newest": e.modified,
                                      "orphans": 0, "protected": e.kind in PROTECTED or e.kind not in KINDS})
        row["entries"] += 1
        row["bytes"] += e.bytes
        row["oldest"], row["newest"] = min(row["oldest"], e.modified), max(row["newest"], e.modified)
        row["orphans"] += int(e.orphan)
    return out


def select(items: list[Entry], kinds: list[str] | None = None, older_than_days: float | None = None,
           max_bytes: int | None = None, orphans: bool = False, now: float | None = None) -> list[Entry]:
    """The entries ``prune`` removes, in removal order: orphans, then those older than ``older_than_days``, then the
    least recently modified until what stays of the considered kinds is at most ``max_bytes``.

    Only ``kinds`` are considered (default: every known kind but :data:`PROTECTED`).

    >>> day = 86400.0
    >>> es = [Entry("blobs", "old", "b/old", 100, 0.0), Entry("indexes/bm25", "mid", "i/mid", 50, 5 * day),
    ...       Entry("models", "new", "m/new", 500, 9 * day), Entry("mirrors", "m", "r/m", 900, 0.0)]
    >>> [e.name for e in select(es, older_than_days=3, now=10 * day)]
    ['old', 'mid']
    >>> [e.name for e in select(es, max_bytes=520, now=10 * day)]
    ['old', 'mid']
    >>> [e.name for e in select(es, kinds=["mirrors"], older_than_days=1, now=10 * day)]
    ['m']
    """
    now = time.time() if now is None else now
    pool = [e for e in items if (e.kind in kinds if kinds else e.kind in KINDS and e.kind not in PROTECTED)]
    chosen: dict[str, Entry] = {e.path: e for e in pool if orphans and e.orphan}  # insertion order = removal order
    if older_than_days is not None:
        chosen |= {e.path: e for e in pool if e.path not in chosen and now - e.modified > older_than_days * 86400}
    if max_bytes is not None:
        left = sum(e.bytes for e in pool if e.path not in chosen)
        for e in pool:  # least recently modified first
            if left <= max_bytes:
                break
            if e.path not in chosen:
                chosen[e.path] = e
                left -= e.bytes
    return list(chosen.values())


@contextmanager
def _unused(path: Path) -> Iterator[bool]:
    """Hold every lock of ``path`` (``<path>/.lock``, ``<path>.lock``) exclusively for the block; False when a process
    holds one (nothing is held then)."""
    fds: list[int] = []
    try:
        for lock in (path / ".lock", path.with_name(path.name + ".lock")):
            if lock.is_file():
                fds.append(os.open(lock, os.O_RDWR))
                try:
                    fcntl.flock(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield False
                    return
        yield True
    finally:
        for fd in fds:
            os.close(fd)  # closing drops the lock


def remove(entry: Entry) -> bool:
    """Remove one entry unless a process uses it; True when it is gone."""
    path = Path(entry.path)
    if entry.kind == "worktrees":
        from codegrep.env.pool import WorktreePool

        return WorktreePool(path.parent).remove(entry.name)
    if not os.path.lexists(path):
        return True
    trash = path.with_name(f"{_TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
    with _unused(path) as unused:
        if not unused:
            return False
        try:
            os.rename(path, trash)  # readers see the whole entry or nothing; renamed while its locks are held
        except FileNotFoundError:
            return True
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)
    return True


def _clear_trash(root: Path) -> None:
    """Finish deleting what an interrupted prune renamed away."""
    for directory in _kind_dirs(root).values():
        for trash in directory.glob(f"{_TRASH_PREFIX}*"):
            if trash.is_dir() and not trash.is_symlink():
                shutil.rmtree(trash, ignore_errors=True)
            else:
                trash.unlink(missing_ok=True)


def human(n: float) -> str:
    """Bytes as a short decimal size.

    >>> human(0), human(1234), human(5_600_000_000)
    ('0 B', '1.2 kB', '5.6 GB')
    """
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


# ------------------------------------------------------------------------------------------------ commands


def _root(args: argparse.Namespace) -> Path:
    root = Path(args.cache) if args.cache else cache_dir()
    if root.exists() and not root.is_dir():
        raise UserError(f"cache {root}: is a file, not a directory")
    return root


def cmd_info(args: argparse.Namespace) -> int:
    root = _root(args)
    rows = summary(entries(root))
    if args.json:
        print(json_text({"cache": str(root), "kinds": rows,
                          "bytes": sum(r["bytes"] for r in rows.values())}, indent=1))
        return 0
    print(f"cache: {root}" + ("" if root.exists() else " (does not exist yet)"))
    print(f"{'kind':<15} {'entries':>7} {'size':>9}  {'modified':<23} note")
    for kind, r in sorted(rows.items(), key=lambda kv: (list(KINDS).index(kv[0]) if kv[0] in KINDS else len(KINDS),
                                                         kv[0])):
        notes = [KINDS.get(kind, "unknown to this version of codegrep")]
        if r["orphans"]:
            notes.insert(0, f"{r['orphans']} orphaned (repository gone)")
        if r["protected"]:
            notes.append("pruned only with --kind")
        span = _day(r["oldest"]) + (f" .. {_day(r['newest'])}" if _day(r["newest"]) != _day(r["oldest"]) else "")
        print(f"{kind:<15} {r['entries']:>7} {human(r['bytes']):>9}  {span:<23} {'; '.join(notes)}")
    print(f"{'total':<15} {sum(r['entries'] for r in rows.values()):>7} "
          f"{human(sum(r['bytes'] for r in rows.values())):>9}")
    return 0


def _refuse_other_directories(root: Path, given: bool) -> None:
    """Before ``prune`` removes anything: a ``--cache`` that does not exist is a typo, not an empty cache (it freed
    0 B, exit 0), and a directory that is no codegrep cache is not pruned: codegrep writes only directories at the
    cache's top level, so a file there (a project's README, setup.py) or a ``.git`` says it is someone's project,
    whose ``models/``, ``bench/`` or ``snapshots/`` folders prune removed as cache kinds.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / "README.md").write_text("x")
    >>> _refuse_other_directories(d, True)
    Traceback (most recent call last):
    ...
    codegrep.errors.UserError: --cache .../: not a codegrep cache (it holds README.md, and codegrep writes only directories there); refusing to prune: name the cache directory itself (default ~/.cache/codegrep)
    """
    what = "--cache" if given else "cache"
    if not root.exists():
        if given:
            raise UserError(f"--cache {root}: no such directory")
        return
    foreign = sorted(p.name for p in root.iterdir() if p.name == ".git" or not p.name.startswith(".") and not p.is_dir())
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise UserError(f"{what} {root}/: not a codegrep cache (it holds {shown}, and codegrep writes only "
                        "directories there); refusing to prune: name the cache directory itself (default "
                        "~/.cache/codegrep)")


def cmd_prune(args: argparse.Namespace) -> int:
    if args.older_than is None and args.max_size is None and not args.orphans:
        raise UserError("say what to remove: --older-than DAYS, --max-size SIZE and/or --orphans")
    root = _root(args)
    _refuse_other_directories(root, bool(args.cache))
    found = entries(root)
    known = {e.kind for e in found} | set(KINDS)
    for kind in args.kind or []:
        if kind not in known:
            raise UserError(f"--kind {kind}: no such kind (kinds: {', '.join(sorted(known))})")
    chosen = select(found, args.kind, args.older_than, args.max_size, args.orphans)
    freed, skipped = 0, 0
    if not args.dry_run:
        _clear_trash(root)
    for e in chosen:
        why = "orphaned" if e.orphan else f"modified {_day(e.modified)}"
        if args.dry_run:
            print(f"would remove {e.kind}/{e.name} ({human(e.bytes)}, {why})")
            freed += e.bytes
        elif remove(e):
            print(f"removed {e.kind}/{e.name} ({human(e.bytes)}, {why})")
            freed += e.bytes
        else:
            print(f"skipped {e.kind}/{e.name}: in use by a running process", file=sys.stderr)
            skipped += 1
    verb = "would free" if args.dry_run else "freed"
    print(f"{verb} {human(freed)} in {len(chosen) - skipped} entries"
          + (f"; {skipped} in use, kept" if skipped else "") + f" (cache: {root})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="what the cache directory holds, and freeing it (info, prune)")
    csub = p.add_subparsers(dest="cache_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", help="the cache directory (default: $CODEGREP_CACHE or ~/.cache/codegrep)")
    info = csub.add_parser("info", parents=[common], help="entries and size per kind")
    info.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    info.set_defaults(func=cmd_info)
    prune = csub.add_parser("prune", parents=[common],
                            help="remove entries no process uses: orphaned, older than N days, or down to a size")
    prune.add_argument("--older-than", type=non_negative_float, metavar="DAYS",
                       help="remove entries not modified for this many days")
    prune.add_argument("--max-size", type=byte_size, metavar="SIZE",
                       help="then remove the least recently modified until the pruned kinds hold at most SIZE "
                            "(500M, 5G, ...)")
    prune.add_argument("--orphans", action="store_true",
                       help="remove blob stores whose repository no longer exists")
    prune.add_argument("--kind", action="append", metavar="KIND",
                       help="only this kind (repeatable; default every kind but " + ", ".join(sorted(PROTECTED))
                            + "; see 'codegrep cache info')")
    prune.add_argument("--dry-run", action="store_true", help="print what would be removed, remove nothing")
    prune.set_defaults(func=cmd_prune)

