"""Checkout-free mode: the tools served from git objects, so an environment costs one ``git ls-tree``
(cached per commit in the process: later rollouts of a group pay nothing).

``read`` goes through one long-lived ``git cat-file --batch``; ``glob`` filters the tree listing; ``grep``
runs ripgrep over the blob files of the shared content-addressed store (:mod:`codegrep.env.blobstore`),
which a background thread starts filling when the environment opens, so the first grep usually finds its
files written. Symlinks are not listed (as ripgrep walks a checkout) and are followed inside the tree only.
"""
from __future__ import annotations

import posixpath
import subprocess
import threading
from pathlib import Path

from codegrep.env import textops
from codegrep.env.repo_view import Listing, ToolEnvironmentBase
from codegrep.env.blobstore import BlobStore, store_for
from codegrep.env.config import ToolConfig
from codegrep.env.contract import ToolError
from codegrep.data.gitcmd import cat_file_batch, git, resolve_commit
from codegrep.env.sandbox import SandboxError
from codegrep.lru import LRU

_LINK = "120000"
_GITLINK = "160000"  # a submodule: an empty directory in a checkout
_TREES_MAX = 64
_TREES_MAX_FILES = 1_000_000
"""The cache also keeps at most this many files in all (about 0.6 KB of memory each): 64 commits of a
6,861-file repository take 250 MB, of a 50,000-file one 1.8 GB; past this it keeps fewer (at least one)."""


def tree_cache(max_commits: int = _TREES_MAX, max_files: int = _TREES_MAX_FILES) -> LRU:
    """The per-process cache of :func:`_tree` results: ``(git_dir, sha) -> (entries, listing)``."""
    return LRU(max_commits, weight=lambda value: len(value[0]), max_weight=max_files)


_TREES = tree_cache()


def _tree(git_dir: Path, sha: str, store: BlobStore) -> tuple[dict[str, tuple[str, str, int]], Listing]:
    """``path -> (mode, blob sha, size)`` of every blob of ``sha`` and the listing (cached, LRU)."""
    key = (str(git_dir), sha)
    hit = _TREES.get(key)
    if hit is not None:
        return hit
    entries: dict[str, tuple[str, str, int]] = {}
    for record in git(git_dir, "ls-tree", "-r", "-z", "-l", "--full-tree", sha).split(b"\0"):
        if record:
            meta, raw = record.split(b"\t", 1)
            mode, kind, blob, size = meta.decode().split()
            if kind == "blob":
                entries[textops.display_path(raw)] = (mode, blob, int(size))
            elif mode == _GITLINK:
                entries[textops.display_path(raw)] = (mode, blob, 0)
    files = [p for p, (mode, _, _) in entries.items() if mode not in (_LINK, _GITLINK)]
    listing = Listing({p: store.relpath(entries[p][1]) for p in files}, {p: entries[p][2] for p in files})
    _TREES.put(key, (entries, listing))
    return entries, listing


def forget_trees() -> None:
    """Drop the cached tree listings (the benchmark measures cold acquisitions with this)."""
    _TREES.clear()


class GitObjectEnvironment(ToolEnvironmentBase):
    """grep/glob/read over ``commit`` of the repository at ``git_dir`` (bare or not), with no checkout."""

    def __init__(self, git_dir: Path | str, commit: str, config: ToolConfig | None = None) -> None:
        super().__init__(config)
        self.git_dir = Path(git_dir).resolve()
        known = len(commit) == 40 and (str(self.git_dir), commit) in _TREES  # listed before: it exists
        self.commit = commit if known else resolve_commit(self.git_dir, commit)
        self.store = store_for(self.git_dir, self.config.store_root)
        self.entries, self.listing = _tree(self.git_dir, self.commit, self.store)
        self._blob_sizes = {sha: size for _, sha, size in self.entries.values()}
        self.store.ensure_in_background(self.commit, [self.entries[p][1] for p in self.listing.names],
                                        self._blob_sizes)
        self._batch: subprocess.Popen | None = None
        self._batch_lock = threading.Lock()

    def _listing(self) -> Listing:
        return self.listing

    def snapshot_id(self) -> tuple | None:
        return ("objects", str(self.git_dir), self.commit)

    def _size(self, name: str) -> int:
        return self.listing.sizes[name]

    def _search_cwd(self) -> str:
        return str(self.store.dir)

    def _prepare(self, names: list[str]) -> None:
        self.store.ensure((self.entries[n][1] for n in names), self._blob_sizes)  # sizes: a whole-blob check

    def _canonical(self, rel: str, depth: int = 0, asked: str | None = None) -> str:
        """``rel`` with every symlink on it resolved inside the tree, as ``realpath`` does in a checkout: a link
        to a directory serves the files under it (``linkdir/a.py``), not only a link that names a file."""
        asked = rel if asked is None else asked
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            head = "/".join(parts[:i])
            entry = self.entries.get(head)
            if entry is None or entry[0] != _LINK:
                continue
            target = self._cat(entry[1]).decode("utf-8", "replace")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(head), target, *parts[i:]))
            if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
                raise SandboxError(f"path {asked!r} resolves outside the repository (symlink); refused")
            if depth > 40:  # a loop of links: realpath leaves it unresolved, so a checkout finds nothing there
                raise ToolError(f"{asked} does not exist in the repository")
            if resolved == ".git" or resolved.startswith(".git/"):
                raise SandboxError(f"path {asked!r} resolves into .git, which the tools do not serve")
            return self._canonical(resolved, depth + 1, asked)
        return rel

    def _exists(self, rel: str) -> bool:
        """A directory a checkout has with no listed file: a submodule's, or one holding only symlinks."""
        return rel == "." or (rel in self.entries and self.entries[rel][0] == _GITLINK) or \
            any(p.startswith(rel + "/") for p in self.entries)

    def _cat(self, sha: str) -> bytes:
        with self._batch_lock:
            if self._batch is None:
                self._batch = cat_file_batch(self.git_dir)
            self._batch.stdin.write(sha.encode() + b"\n")
            self._batch.stdin.flush()
            header = self._batch.stdout.readline().split()
            if len(header) != 3:
                raise RuntimeError(f"git cat-file --batch answered {header!r} for {sha}")
            data = self._batch.stdout.read(int(header[2]) + 1)
        return data[:-1]

    def _read_bytes(self, rel: str) -> bytes:
        asked, rel = rel, self._canonical(rel)  # messages name the path asked for, as in a checkout
        if rel not in self.entries or self.entries[rel][0] == _GITLINK:
            if self._exists(rel):
                raise ToolError(f"{asked} is a directory; use glob to list its files")
            raise ToolError(f"{asked} does not exist in the repository")
        _, sha, size = self.entries[rel]
        if size > self.config.max_file_bytes:
            raise ToolError(f"{asked} is too large to read ({size} bytes > {self.config.max_file_bytes})")
        return self._cat(sha)

    def close(self) -> None:
        with self._batch_lock:
            if self._batch is not None:
                self._batch.stdin.close()
                self._batch.wait()
                self._batch = None
        super().close()
