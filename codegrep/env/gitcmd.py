"""Running git: one helper for every git command the environment issues (no other env module spawns git
for plumbing), and the commit resolution both modes share."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence


def git(git_dir: Path | str, *args: str, input: bytes | None = None, pass_fds: Sequence[int] = ()) -> bytes:
    """Run one git command against ``git_dir`` and return stdout (raises RuntimeError naming the command).

    ``pass_fds``: descriptors the child inherits; the worktree pool passes its lock files so that a
    ``git worktree add`` orphaned by a killed parent keeps holding them until it exits.
    """
    proc = subprocess.run(["git", "-C", str(git_dir), *args], input=input, capture_output=True,
                          pass_fds=tuple(pass_fds))
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} in {git_dir} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def resolve_commit(git_dir: Path | str, commit: str) -> str:
    """Full SHA of ``commit`` in ``git_dir`` (raises RuntimeError when it is not there)."""
    return git(git_dir, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").decode().strip()
