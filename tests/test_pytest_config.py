"""The suite's own pytest settings (pyproject.toml): a passing session must not leave its temporary directories behind.

`.ci/run` writes ~6-8 GB under pytest's base temporary directory each session (the ci profile's reproduce fixture);
with pytest's default retention (every session's, the last 3 kept) repeated runs, beside the sessions' caches, filled
this machine's disk once. These tests run a small pytest session under the repository's configuration with its own
temporary root and look at what is left."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TESTS = '''
def test_writes(tmp_path):
    (tmp_path / "big.bin").write_bytes(b"x" * 1000)

def test_session_dir(tmp_path_factory):
    (tmp_path_factory.mktemp("fixture") / "worktree.txt").write_text("x")

def test_maybe_fails(tmp_path):
    (tmp_path / "evidence.txt").write_text("kept for inspection")
    assert {fail}
'''


def _left_behind(tmp_path: Path, fail: bool) -> list[str]:
    """Run the small suite under the repository's pytest configuration; the files left under its temporary root."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_small.py").write_text(_TESTS.format(fail=not fail))
    root = tmp_path / "temproot"
    root.mkdir()
    env = {**os.environ, "PYTEST_DEBUG_TEMPROOT": str(root)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path / "suite"),
                          str(tmp_path / "suite" / "test_small.py")],
                         capture_output=True, text=True, env=env, cwd=tmp_path / "suite", timeout=300)
    assert (run.returncode != 0) == fail, run.stdout[-2000:] + run.stderr[-2000:]
    return sorted(p.name for p in root.rglob("*") if p.is_file())


def test_a_passing_session_removes_its_temporary_directories(tmp_path):
    assert _left_behind(tmp_path, fail=False) == []


def test_a_failing_session_keeps_the_failed_tests_directory_for_inspection(tmp_path):
    left = _left_behind(tmp_path, fail=True)
    assert "evidence.txt" in left and "big.bin" not in left
