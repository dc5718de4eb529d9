"""The one module of benchmark repositories (``codegrep.data.bench_repos``): each bench's shape, small."""
from __future__ import annotations

import sysconfig
from pathlib import Path

from codegrep.data.bench_repos import python_files_dir, stdlib_files, synthetic_repo
from codegrep.data.default_set import package_dir
from codegrep.data.gitcmd import git


def test_env_bench_repository_has_successive_commits_that_differ_by_the_revision_file(tmp_path):
    git_dir, head = synthetic_repo(tmp_path / "r.git", n_files=12, commits=3)
    log = git(git_dir, "log", "--format=%an <%ae> %s").decode().splitlines()
    assert log == [f"codegrep-bench <bench@codegrep.invalid> bench {c}" for c in (2, 1, 0)]
    assert git(git_dir, "diff", "--name-only", "HEAD~2", "HEAD").decode().split() == ["BENCH_REVISION"]
    assert git(git_dir, "show", "HEAD:BENCH_REVISION") == b"2\n"
    assert len(git(git_dir, "ls-tree", "-r", "--name-only", head).decode().split()) == 13
    assert synthetic_repo(tmp_path / "r.git", n_files=99)[1] == head  # built once, reused


def test_retrieve_bench_directory_takes_the_first_sorted_python_files_per_module(tmp_path):
    n = python_files_dir(7, tmp_path, ("no_such_module_xyz", "json", "email"))
    root = package_dir("json")
    first_json = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    copied = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert n == 7 and len(copied) == 7
    assert [c for c in copied if c.startswith("json/")] == ["json/" + p for p in first_json]  # all of json first
    assert (tmp_path / "json" / "decoder.py").read_bytes() == (root / "decoder.py").read_bytes()


def test_mcp_bench_files_are_python_first_and_skip_caches():
    src = Path(sysconfig.get_paths()["stdlib"])
    files = stdlib_files(src, 40)
    assert len(files) == 40 and all(p.suffix == ".py" for p in files) and files == sorted(files, key=str)
    assert not any("__pycache__" in p.parts or "site-packages" in p.parts for p in files)
