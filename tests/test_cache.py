"""``codegrep cache info|prune`` on a real cache layout: a worktree pool, blob stores, indexes, a locked model."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from codegrep.cache import entries
from codegrep.cli import main
from codegrep.env.bench import synthetic_repo
from codegrep.env.blobstore import store_for
from codegrep.env.pool import WorktreePool

DAY = 86400.0


def _age(path: Path, days: float) -> None:
    """Set every mtime under ``path`` ``days`` back."""
    t = time.time() - days * DAY
    for p in [path, *path.rglob("*")]:
        os.utime(p, (t, t), follow_symlinks=False)


@pytest.fixture()
def cache(tmp_path):
    """A cache with two repositories' blob stores (one repository then deleted), an old and a new BM25 index, a
    model, a mirror, and one worktree."""
    root = tmp_path / "cache"
    repos = {}
    for name in ("kept", "gone"):
        git_dir, head = synthetic_repo(tmp_path / f"{name}.git", n_files=6, commits=1)
        files = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", head], capture_output=True,
                               text=True, check=True).stdout.split()
        store_for(git_dir, root / "blobs").ensure([w for w in files if len(w) == 40 and w != head][:3])
        repos[name] = (git_dir, head)
    shutil.rmtree(repos["gone"][0])
    for name, days in (("old@1", 40), ("new@2", 1)):
        index = root / "indexes" / "bm25" / name
        index.mkdir(parents=True)
        (index / "index.bin").write_bytes(b"x" * 1000)
        _age(index, days)
    model = root / "models" / "smollm2"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"w" * 5000)
    (root / "models" / "smollm2.lock").touch()
    _age(model, 60)
    mirror = root / "mirrors" / "org__repo.git"
    mirror.mkdir(parents=True)
    (mirror / "HEAD").write_text("ref: refs/heads/main\n")
    _age(mirror, 90)
    pool = WorktreePool(root / "worktrees")
    with pool.acquire(*repos["kept"]):
        pass
    return root, repos, pool


def _run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_info_lists_each_kind_and_the_orphaned_store(cache, capsys):
    root, _, _ = cache
    rc, out, _ = _run(capsys, "cache", "info", "--cache", str(root), "--json")
    kinds = json.loads(out)["kinds"]
    assert rc == 0
    assert {k: kinds[k]["entries"] for k in kinds} == {"blobs": 2, "indexes/bm25": 2, "models": 1, "mirrors": 1,
                                                       "worktrees": 1}
    assert kinds["blobs"]["orphans"] == 1 and kinds["mirrors"]["protected"] and not kinds["blobs"]["protected"]
    rc, out, _ = _run(capsys, "cache", "info", "--cache", str(root))
    assert rc == 0 and "1 orphaned (repository gone)" in out and "pruned only with --kind" in out


def test_prune_removes_orphans_and_old_entries_but_no_protected_or_locked_one(cache, capsys):
    root, repos, _ = cache
    before = {(e.kind, e.name) for e in entries(root)}
    rc, out, _ = _run(capsys, "cache", "prune", "--cache", str(root), "--orphans", "--older-than", "30", "--dry-run")
    assert rc == 0 and "would remove indexes/bm25/old@1" in out and "would remove models/smollm2" in out
    assert {(e.kind, e.name) for e in entries(root)} == before  # a dry run removes nothing

    lock = os.open(root / "models" / "smollm2.lock", os.O_RDWR)  # a process converting the model holds its lock
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        rc, out, err = _run(capsys, "cache", "prune", "--cache", str(root), "--orphans", "--older-than", "30")
    finally:
        os.close(lock)
    after = {(e.kind, e.name) for e in entries(root)}
    gone = store_for(repos["gone"][0], root / "blobs").dir.name
    assert rc == 0 and before - after == {("blobs", gone), ("indexes/bm25", "old@1")}
    assert "skipped models/smollm2: in use" in err
    assert (root / "mirrors" / "org__repo.git" / "HEAD").exists()  # 90 days old, but protected
    assert not list((root / "indexes" / "bm25").glob(".*"))  # nothing half-deleted left behind

    rc, out, _ = _run(capsys, "cache", "prune", "--cache", str(root), "--kind", "mirrors", "--older-than", "30")
    assert rc == 0 and not (root / "mirrors" / "org__repo.git").exists()


def test_prune_to_a_size_keeps_held_worktrees_and_tells_git(cache, capsys):
    root, repos, pool = cache
    git_dir, head = repos["kept"]
    with pool.acquire(git_dir, head) as held:
        rc, _, err = _run(capsys, "cache", "prune", "--cache", str(root), "--kind", "worktrees", "--max-size", "0")
        assert rc == 0 and held.is_dir() and "in use" in err
    rc, out, _ = _run(capsys, "cache", "prune", "--cache", str(root), "--kind", "worktrees", "--max-size", "0")
    listed = subprocess.run(["git", f"--git-dir={git_dir}", "worktree", "list", "--porcelain"], capture_output=True,
                            text=True, check=True).stdout
    assert rc == 0 and "removed worktrees/" in out and not pool.entries() and str(root) not in listed


@pytest.mark.parametrize("argv, message", [
    (["cache", "prune"], "say what to remove"),
    (["cache", "prune", "--older-than", "3", "--kind", "nope"], "--kind nope: no such kind"),
    (["cache", "prune", "--max-size", "5 parsecs"], "--max-size: must be a size"),
    (["cache", "prune", "--older-than", "-1"], "--older-than: must be a finite number >= 0"),
])
def test_bad_prune_arguments_are_one_line(cache, capsys, argv, message):
    root, _, _ = cache
    before = {(e.kind, e.name) for e in entries(root)}
    try:
        rc = main([*argv, "--cache", str(root)])
    except SystemExit as exc:  # argparse's own refusal
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert {(e.kind, e.name) for e in entries(root)} == before


@pytest.mark.parametrize("layout, message", [
    ({"README.md": "x", "models/resnet/w.bin": "w", "snapshots/s1": "s"}, "not a codegrep cache (it holds README.md"),
    ({".git/HEAD": "ref: refs/heads/main", "models/resnet/w.bin": "w"}, "not a codegrep cache (it holds .git"),
    (None, "no such directory"),
])
def test_prune_refuses_a_directory_that_is_no_cache(tmp_path, capsys, layout, message):
    """``--cache`` naming a project (a typo, or the wrong folder): its models/ and snapshots/ were removed as cache
    kinds; a --cache that does not exist freed 0 B with exit 0."""
    root = tmp_path / "proj"
    for rel, text in (layout or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        _age(root / rel, 400)
    before = sorted(p for p in tmp_path.rglob("*"))
    rc, out, err = _run(capsys, "cache", "prune", "--cache", str(root), "--older-than", "30")
    assert rc == 2 and message in err and "--cache" in err and len(err.strip().splitlines()) == 1 and not out
    assert sorted(p for p in tmp_path.rglob("*")) == before
