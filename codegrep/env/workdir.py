"""The tools over a directory: a pooled worktree, or a user's live (possibly uncommitted) checkout.

grep and the file listing use ripgrep: ``.git`` is skipped, ignore files (``.gitignore``) are respected
so a live checkout's virtualenvs and build outputs stay out, symlinks are not followed while walking,
and an explicit path is checked with :func:`codegrep.env.sandbox.resolve_inside` first.
"""
from __future__ import annotations

import os
from pathlib import Path

from codegrep.env.base import ToolEnvironmentBase
from codegrep.env.procs import find_rg, run_capped
from codegrep.env.sandbox import resolve_inside
from codegrep.env.tools import ToolConfig, ToolError

_RG_COMMON = ["--no-config", "--color=never", "--hidden", "--glob=!.git"]


class RepoToolEnvironment(ToolEnvironmentBase):
    """grep/glob/read over the files under ``root``."""

    def __init__(self, root: Path | str, config: ToolConfig | None = None) -> None:
        super().__init__(config)
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise FileNotFoundError(f"repository directory not found: {self.root}")
        self.rg = find_rg()

    def _target(self, rel: str) -> Path:
        target = resolve_inside(self.root, rel)
        if not target.exists():
            raise ToolError(f"{rel} does not exist in the repository")
        return target

    def _rg(self, args: list[str], rel: str) -> tuple[list[str], bool]:
        if rel:
            self._target(rel)
        cmd = [self.rg, *_RG_COMMON, *args, "--", rel] if rel else [self.rg, *_RG_COMMON, *args]
        cap = run_capped(cmd, self.root, self.config.timeout_s, self.config.capture_bytes)
        if cap.timed_out:
            raise ToolError(f"timed out after {self.config.timeout_s:g}s; use a simpler pattern or a narrower path")
        if cap.returncode not in (0, 1, None) and not cap.stdout:
            msg = cap.stderr.decode("utf-8", "replace").strip()
            if msg.startswith("rg: No files were searched"):  # every file filtered (include, size): no match
                return [], False
            raise ToolError(msg.replace(self.rg, "rg")[:1000] or f"rg failed with status {cap.returncode}")
        lines = cap.stdout.decode("utf-8", "replace").split("\n")
        return lines[:-1], cap.capped  # the last piece is empty, or a partial line when capped

    def _files(self, rel: str) -> list[str]:
        lines, _ = self._rg(["--files", "--sort=path"], rel)
        return lines

    def _read_bytes(self, rel: str) -> bytes:
        target = self._target(rel)
        if target.is_dir():
            raise ToolError(f"{rel} is a directory; use glob to list its files")
        if not target.is_file():
            raise ToolError(f"{rel} is not a regular file")
        size = target.stat().st_size
        if size > self.config.max_file_bytes:
            raise ToolError(f"{rel} is too large to read ({size} bytes > {self.config.max_file_bytes})")
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            return fh.read(self.config.max_file_bytes + 1)

    def _grep_lines(self, pattern, rel, include, ignore_case, context):
        args = ["--no-heading", "--with-filename", "--line-number", "--sort=path",
                f"--max-filesize={self.config.max_file_bytes}",
                f"--max-columns={self.config.max_line_chars}", "--max-columns-preview"]
        args += ["--ignore-case"] if ignore_case else []
        args += [f"--context={context}"] if context else []
        args += [f"--glob={include}"] if include else []
        return self._rg([*args, "-e", pattern], rel)
