"""Kill loop: SIGKILL a process while its worktree is being created, start others at once; nobody else crashes,
nothing leaks. The killed process's ``git worktree add`` keeps running as an orphan (only the parent is
killed), which is the case that used to crash the next process in ``recover()``."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from codegrep.env.bench import synthetic_repo
from codegrep.data.gitcmd import git
from codegrep.env.pool import WorktreePool


_HOLDER = """
import sys, time
from codegrep.env.pool import WorktreePool
pool = WorktreePool(sys.argv[1])
print("start", flush=True)
with pool.acquire(sys.argv[2], sys.argv[3]):
    time.sleep(60)
"""

_NEIGHBOUR = """
import sys
from codegrep.env.pool import WorktreePool
from codegrep.env.tools import ToolCall, open_snapshot
pool = WorktreePool(sys.argv[1])
with open_snapshot(sys.argv[2], sys.argv[3], "worktree", pool) as env:
    result = env.call(ToolCall("grep", {"pattern": "def func_1_1\\\\b"}))
assert result.ok and result.output == "pkg1/mod_1.py:7:def func_1_1(x):", result.text()
"""


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    # big enough that `git worktree add` takes a while (the kill must land inside it), small enough for CI
    git_dir, head = synthetic_repo(tmp_path_factory.mktemp("crash") / "repo.git", n_files=300, commits=2)
    return git_dir, head


def _spawn(script: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("rounds", [3, pytest.param(20, marks=pytest.mark.slow)])
def test_kill_during_creation_never_crashes_a_neighbour_or_leaks(tmp_path, mirror, rounds):
    git_dir, sha = mirror
    root = tmp_path / "pool"
    key = WorktreePool(root).key(git_dir, sha)
    rng = random.Random(0)
    mid_creation, failures = 0, []
    for round_ in range(rounds):
        victim = _spawn(_HOLDER, root, git_dir, sha)
        assert victim.stdout.readline().strip() == "start", victim.stderr.read()
        deadline = time.monotonic() + 20
        while not (root / key).exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.03))
        mid_creation += (root / key).exists() and not (root / f"{key}.ready").exists()
        os.kill(victim.pid, signal.SIGKILL)  # the parent only: its `git worktree add` may live on
        neighbours = [_spawn(_NEIGHBOUR, root, git_dir, sha) for _ in range(2)]  # started at once
        for proc in neighbours:
            _, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                failures.append(f"round {round_}: rc={proc.returncode}: {err.strip()[-500:]}")
        victim.wait()
        victim.stdout.close()
        victim.stderr.close()
        WorktreePool(root, recover=False).clear()  # the next round creates the worktree again
    print(f"kill loop: {rounds} rounds, {mid_creation} kills inside worktree creation, {len(failures)} crashed neighbours")
    assert failures == [], failures
    assert mid_creation >= 1, "no kill landed inside worktree creation: the test did not test the race"
    pool = WorktreePool(root)  # recovery
    assert pool.leaked() == [] and pool.entries() == []
    ours = [line for line in git(git_dir, "worktree", "list", "--porcelain").decode().splitlines()
            if line.startswith("worktree ") and str(root.resolve()) in line]
    assert ours == []
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["mirrors"]
