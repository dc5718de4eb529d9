"""The tools over a directory: a pooled worktree (a committed snapshot) or a user's live checkout.

The listing is ``rg --files --null`` (``.git`` skipped, symlinks not followed while walking). A pooled
worktree is a committed snapshot, so every committed file is listed (``--no-ignore``: the agent sees the
same files as in checkout-free mode, including committed files that match ``.gitignore``); a live
checkout (``snapshot=False``, the MCP server) applies its ignore files so virtualenvs and build outputs
stay out (files git tracks stay listed though an ignore file matches them), and is re-listed when its listing is older than ``LIVE_LISTING_TTL_S`` because it changes (one
listing serves all the lookups of one tool call, not one listing per file, and the parallel calls of a turn wait
for one listing instead of each starting its own). An explicit path is checked with
:func:`codegrep.env.sandbox.resolve_inside` first.

The directory may change under the tools (a live checkout: between the listing and a grep, or a path's check and
its read), and ripgrep follows a symlink given on its command line: so ``read`` opens its file with
:func:`codegrep.env.sandbox.open_inside` (no symlink followed on the whole path), and grep shows a file's hits only
when they are lines of the regular file now at its path, opened the same way (:meth:`RepoToolEnvironment._changed`);
otherwise one line names the file and no outside content is shown.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from codegrep.env import textops
from codegrep.env.repo_view import ROW_HEAD, Listing, ToolEnvironmentBase
from codegrep.env.config import ToolConfig
from codegrep.env.contract import ToolError
from codegrep.env.procs import find_rg, run_capped
from codegrep.env.sandbox import InsideFiles, SandboxError, open_inside, resolve_inside

LIVE_LISTING_TTL_S = 2.0
"""How long a live checkout's listing is reused (a tool call's per-file lookups share one listing)."""


def is_pool_worktree(root: Path) -> bool:
    """Whether ``root`` is a ready worktree of a :class:`codegrep.env.pool.WorktreePool` (its marker sits beside it)."""
    return (root.parent / f"{root.name}.ready").is_file()


class RepoToolEnvironment(ToolEnvironmentBase):
    """grep/glob/read over the files under ``root``; ``snapshot``: the directory does not change (a pooled
    worktree: list once, every committed file); False: a live checkout (re-listed, ignore files applied);
    None: decide by :func:`is_pool_worktree`, so a retriever handed a pool checkout sees what objects mode sees."""

    def __init__(self, root: Path | str, config: ToolConfig | None = None, snapshot: bool | None = None) -> None:
        super().__init__(config)
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"repository directory not found: {self.root}")
        self.rg = find_rg()
        self.snapshot = is_pool_worktree(self.root) if snapshot is None else snapshot
        self._cached: Listing | None = None
        self._listed_at = 0.0
        self._lock = threading.Lock()
        self._listing_lock = threading.Lock()
        self._failed: tuple[float, str] | None = None  # when the last listing failed, and why

    def snapshot_id(self) -> tuple | None:
        """A pooled worktree's root at its checked-out commit (a live checkout changes: not shared)."""
        if not self.snapshot:
            return None
        from codegrep.retrievers.corpus import checkout_sha

        sha = checkout_sha(self.root)
        return None if sha is None else ("worktree", str(self.root), sha)

    def _fresh(self) -> Listing | None:
        with self._lock:
            if self._cached is not None and (self.snapshot or
                                             time.monotonic() - self._listed_at < LIVE_LISTING_TTL_S):
                return self._cached
        return None

    def _listing(self) -> Listing:
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        asked = time.monotonic()
        with self._listing_lock:  # one listing at a time: the parallel calls of a turn share it
            fresh = self._fresh()
            if fresh is not None:
                return fresh
            if self._failed is not None and self._failed[0] >= asked:  # the listing this call waited for failed:
                raise ToolError(self._failed[1])                      # its answer, not a second wait
            try:
                return self._list()
            except ToolError as exc:
                self._failed = (time.monotonic(), str(exc))
                raise

    def _list(self) -> Listing:
        cmd = [self.rg, "--no-config", "--files", "--null", "--hidden", "--glob=!.git"]
        cmd += ["--no-ignore"] if self.snapshot else []
        cap = run_capped(cmd, self.root, self.config.timeout_s, 1 << 62)
        if cap.timed_out:
            raise ToolError(f"listing the repository timed out after {self.config.timeout_s:g}s")
        raws = [p[2:] if p.startswith(b"./") else p for p in cap.stdout.split(b"\0") if p]
        raws += [] if self.snapshot else self._tracked_ignored(set(raws))
        listing = Listing({textops.display_path(raw): raw for raw in raws})
        with self._lock:
            self._cached, self._listed_at = listing, time.monotonic()
        return listing

    def _tracked_ignored(self, listed: set[bytes]) -> list[bytes]:
        """Files of a live git checkout that git tracks but its ignore files match (a committed ``build/gen.py``
        under ``build/`` in ``.gitignore``): ripgrep's walk hides them, while ``read`` served them and objects mode
        lists them. Only regular files reached without a symlink (a tracked path under a directory since replaced
        by a link would lead outside)."""
        cap = run_capped(["git", "ls-files", "-z", "--cached"], self.root, self.config.timeout_s, 1 << 62)
        if cap.timed_out or cap.returncode:  # not a git checkout (or git refused it): the walk is the listing
            return []
        out = []
        for raw in dict.fromkeys(cap.stdout.split(b"\0")):
            full = os.path.join(os.fsencode(self.root), raw)
            if raw and raw not in listed and os.path.realpath(full) == full and os.path.isfile(full):
                out.append(raw)
        return out

    def _size(self, name: str) -> int:
        listing = self._listing()
        if listing.sizes is None:
            listing.sizes = {}
        if name not in listing.sizes:
            try:
                listing.sizes[name] = os.lstat(self.root / os.fsdecode(listing.disk[name])).st_size
            except OSError:
                listing.sizes[name] = 0  # vanished from a live checkout: ripgrep will say nothing
        return listing.sizes[name]

    def _search_cwd(self) -> str:
        return str(self.root)

    def _fs(self, rel: str) -> Path:
        listing = self._listing()
        raw = listing.disk.get(rel)
        return resolve_inside(self.root, os.fsdecode(raw) if raw is not None else rel)

    def _canonical(self, rel: str) -> str:
        target = self._fs(rel)
        return textops.display_path(os.fsencode(target.relative_to(self.root.resolve()).as_posix()))

    def _exists(self, rel: str) -> bool:
        return self._fs(rel).exists()

    def _read_bytes(self, rel: str) -> bytes:
        target = self._fs(rel)
        if not target.exists():
            raise ToolError(f"{rel} does not exist in the repository")
        if target.is_dir():
            raise ToolError(f"{rel} is a directory; use glob to list its files")
        if not target.is_file():
            raise ToolError(f"{rel} is not a regular file")
        try:  # opened without following a symlink that appeared on the path since it was resolved
            fd = open_inside(self.root, target.relative_to(self.root).as_posix())
        except FileNotFoundError:
            raise ToolError(f"{rel} does not exist in the repository") from None
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fd).st_size
            if size > self.config.max_file_bytes:
                raise ToolError(f"{rel} is too large to read ({size} bytes > {self.config.max_file_bytes})")
            return fh.read(self.config.max_file_bytes + 1)

    @contextmanager
    def _changes(self) -> Iterator[Callable[[bytes, list[bytes], bool], bool]]:
        with InsideFiles(self.root) as files:  # the files of one grep share the directories opened
            yield lambda disk, rows, shown: self._changed(files, disk, rows, shown)

    def _changed(self, files: InsideFiles, disk: bytes, rows: list[bytes], shown: bool) -> bool:
        """Whether the rows ripgrep printed for the listed file ``disk`` are not lines of the regular file now at
        that path, opened without following a symlink. ripgrep follows a symlink given on its command line, so a
        listed file replaced by a link to ``/etc/passwd`` since the listing (reused for ``LIVE_LISTING_TTL_S``), or a
        directory on its path replaced by one, was searched outside the repository; only text that is in the file
        inside it is shown, whatever the timing. Rows past the output cap (not ``shown``, only counted) are not
        compared: the file is only opened that way, which a broad grep's thousand files afford."""
        try:
            fd = files.open(os.fsdecode(disk))
        except (OSError, SandboxError):
            return True
        if not shown:
            os.close(fd)
            return False
        wanted = []  # (line number, text) of each row; b"" is a gap between context groups
        for row in filter(None, rows):
            head = ROW_HEAD.match(row)
            wanted.append((int(head.group(1)), row[head.end():]))
        with os.fdopen(fd, "rb") as fh:  # split only as far as the last line asked for
            lines = textops.rg_text(fh.read(self.config.max_file_bytes + 1)).split(b"\n", max(n for n, _ in wanted))
        for n, text in wanted:
            line = lines[n - 1] if 0 < n <= len(lines) else None
            cut = text.endswith(textops.RG_CLIPPED)
            if line is None or not (line.startswith(text[:-len(textops.RG_CLIPPED)]) if cut else line == text):
                return True
        return False
