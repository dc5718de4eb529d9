"""Checkout-free mode: the same tools served straight from git objects, so an environment costs one
``git ls-tree`` to create. ``read`` goes through one long-lived ``git cat-file --batch``; ``grep`` is
``git grep <commit>`` (PCRE when git has it, so the syntax matches ripgrep's closely); ``glob`` filters
the tree listing. Symlinks are followed inside the tree only.
"""
from __future__ import annotations

import posixpath
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from codegrep.env import textops
from codegrep.env.base import ToolEnvironmentBase
from codegrep.env.procs import run_capped
from codegrep.env.sandbox import SandboxError
from codegrep.env.tools import ToolConfig, ToolError

_LINK = "120000"


def git(git_dir: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run one git command against ``git_dir`` and return stdout (raises RuntimeError naming the command)."""
    proc = subprocess.run(["git", "-C", str(git_dir), *args], input=input, capture_output=True)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {git_dir} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def resolve_commit(git_dir: Path, commit: str) -> str:
    """Full SHA of ``commit`` in ``git_dir`` (raises RuntimeError when it is not there)."""
    return git(git_dir, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()


@lru_cache(maxsize=1)
def _has_pcre() -> bool:
    proc = subprocess.run(["git", "grep", "--no-index", "-P", "-q", "-e", "x", "--", "/dev/null"],
                          capture_output=True, cwd="/")
    return proc.returncode in (0, 1)


class GitObjectEnvironment(ToolEnvironmentBase):
    """grep/glob/read over ``commit`` of the repository at ``git_dir`` (bare or not), with no checkout."""

    def __init__(self, git_dir: Path | str, commit: str, config: ToolConfig | None = None) -> None:
        super().__init__(config)
        self.git_dir = Path(git_dir)
        self.commit = resolve_commit(self.git_dir, commit)
        self.entries: dict[str, tuple[str, str, int]] = {}  # path -> (mode, blob sha, size)
        for record in git(self.git_dir, "ls-tree", "-r", "-z", "-l", self.commit).split(b"\0"):
            if record:
                meta, path = record.split(b"\t", 1)
                mode, kind, sha, size = meta.decode().split()
                if kind == "blob":
                    self.entries[path.decode("utf-8", "replace")] = (mode, sha, int(size))
        # listed like ripgrep walks a checkout: symlinks are not listed (``read`` still follows in-tree ones)
        self.paths = sorted(p for p, (mode, _, _) in self.entries.items() if mode != _LINK)
        self._batch: subprocess.Popen | None = None
        self._batch_lock = threading.Lock()

    def _follow(self, rel: str, depth: int = 0) -> str:
        """``rel`` with in-tree symlinks resolved; a link leaving the tree is refused."""
        entry = self.entries.get(rel)
        if entry is None or entry[0] != _LINK:
            return rel
        target = self._cat(entry[1]).decode("utf-8", "replace")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../") or depth > 8:
            raise SandboxError(f"path {rel!r} resolves outside the repository (symlink); refused")
        return self._follow(resolved, depth + 1)

    def _files(self, rel: str) -> list[str]:
        if not rel:
            return self.paths
        rel = self._follow(rel)
        if rel in self.entries:
            return [rel]
        prefix = rel + "/"
        hits = [p for p in self.paths if p.startswith(prefix)]
        if not hits:
            raise ToolError(f"{rel} does not exist in the repository")
        return hits

    def _cat(self, sha: str) -> bytes:
        with self._batch_lock:
            if self._batch is None:
                self._batch = subprocess.Popen(["git", "-C", str(self.git_dir), "cat-file", "--batch"],
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self._batch.stdin.write(sha.encode() + b"\n")
            self._batch.stdin.flush()
            header = self._batch.stdout.readline().split()
            if len(header) != 3:
                raise RuntimeError(f"git cat-file --batch answered {header!r} for {sha}")
            data = self._batch.stdout.read(int(header[2]) + 1)
        return data[:-1]

    def _read_bytes(self, rel: str) -> bytes:
        rel = self._follow(rel)
        if rel not in self.entries:
            if any(p.startswith(rel + "/") for p in self.paths):
                raise ToolError(f"{rel} is a directory; use glob to list its files")
            raise ToolError(f"{rel} does not exist in the repository")
        _, sha, size = self.entries[rel]
        if size > self.config.max_file_bytes:
            raise ToolError(f"{rel} is too large to read ({size} bytes > {self.config.max_file_bytes})")
        return self._cat(sha)

    def _grep_lines(self, pattern, rel, include, ignore_case, context):
        files = self._files(rel)
        if include:
            keep = textops.glob_to_regex(include.lstrip("!"))
            files = [f for f in files if bool(keep.match(f)) != include.startswith("!")]
            if not files:
                return [], False
        specs = [f":(literal){f}" for f in files] if include else [f":(literal){rel}"] if rel else []
        cmd = ["git", "-C", str(self.git_dir), "grep", "--no-color", "-n", "-I", "--full-name",
               "-P" if _has_pcre() else "-E"]
        cmd += ["-i"] if ignore_case else []
        cmd += [f"-C{context}"] if context else []
        cmd += ["-e", pattern, self.commit, "--", *specs]
        cap = run_capped(cmd, None, self.config.timeout_s, self.config.capture_bytes)
        if cap.timed_out:
            raise ToolError(f"timed out after {self.config.timeout_s:g}s; use a simpler pattern or a narrower path")
        if cap.returncode not in (0, 1, None) and not cap.stdout:
            raise ToolError(cap.stderr.decode("utf-8", "replace").strip()[:1000] or "git grep failed")
        prefix = self.commit + ":"
        lines = cap.stdout.decode("utf-8", "replace").split("\n")[:-1]
        return [line[len(prefix):] if line.startswith(prefix) else line for line in lines], cap.capped

    def close(self) -> None:
        with self._batch_lock:
            if self._batch is not None:
                self._batch.stdin.close()
                self._batch.wait()
                self._batch = None
        super().close()
