"""The package's one git module (``codegrep.data.gitcmd``): the helpers several areas share."""
from __future__ import annotations

import pytest

from codegrep.data.gitcmd import checkout_commit, detached_worktree, resolve_commit, run
from conftest import commit_all, git_out


def test_detached_worktree_is_at_the_commit_and_removed_after(tmp_path):
    sha = commit_all(tmp_path / "work", {"a.py": "x = 1\n"})
    (tmp_path / "work" / "a.py").write_text("x = 2\n")
    with detached_worktree(tmp_path / "work", tmp_path / "wt", sha) as wt:
        assert (wt / "a.py").read_text() == "x = 1\n" and git_out(wt, "rev-parse", "HEAD") == sha
    assert not (tmp_path / "wt").exists()
    assert git_out(tmp_path / "work", "worktree", "list").count("\n") == 0  # only the main work tree is left


def test_checkout_commit_marks_dirty_with_the_callers_mark_and_says_unknown_outside_git(tmp_path):
    sha = commit_all(tmp_path / "work", {"a.py": "x = 1\n"})
    assert checkout_commit(tmp_path / "work", "+dirty") == sha
    (tmp_path / "work" / "a.py").write_text("x = 2\n")
    assert checkout_commit(tmp_path / "work", "+dirty") == sha + "+dirty"
    assert checkout_commit(tmp_path / "work", "-dirty") == sha + "-dirty"
    (tmp_path / "plain").mkdir()
    assert checkout_commit(tmp_path / "plain", "+dirty") == "unknown"


def test_a_failing_command_names_itself_and_its_directory(tmp_path):
    sha = commit_all(tmp_path / "work", {"a.py": "x = 1\n"})
    assert resolve_commit(tmp_path / "work", "HEAD") == sha
    with pytest.raises(RuntimeError, match=r"^git rev-parse --verify --quiet nope\^\{commit\} in .*work failed"):
        resolve_commit(tmp_path / "work", "nope")
    assert run("status", git_dir=tmp_path / "work", check=False, text=True).returncode == 0
