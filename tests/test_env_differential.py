"""Both tool modes see one repository: every call of a corpus, run through a pooled worktree and through
git objects, must give the same text. The corpus: the shipped sympy snapshot (real) and a hostile
repository (names with a newline or non-UTF-8 bytes, committed files matching .gitignore, a 5 MB line, a
file over ``max_file_bytes``, duplicate blobs, symlinks, binary and latin-1 files), with hostile calls
(catastrophic regexes, flags, traversal) beside ordinary ones."""
from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from codegrep.env.bench import make_calls
from codegrep.data.gitcmd import git
from codegrep.env.pool import WorktreePool
from codegrep.env.tools import ToolCall, ToolConfig, open_snapshot
from conftest import commit_all

NEWLINE_NAME = b"odd\nname.py"
LATIN1_NAME = b"caf\xe9.py"


def hostile_repo(base: Path) -> tuple[Path, str]:
    work = base / "hostile"
    files = {
        "README.md": b"# hostile\nneedle in README\n",
        ".gitignore": b"*.log\nbuild/\n",
        ".ignore": b"ignored_by_rg.py\n",
        "kept.log": b"needle in a committed file that .gitignore matches\n",
        "build/out.py": b"needle = 'committed under an ignored directory'\n",
        "ignored_by_rg.py": b"needle = 'committed, listed in .ignore'\n",
        "long_line.txt": b"x" * 5_000_000 + b" needle at the end of a 5 MB line\n",
        "huge.txt": b"needle\n" * 1_000_000,  # 7 MB: over the max_file_bytes below
        "dup_a.py": b"def duplicated():\n    return 'needle'\n",
        "dup_b.py": b"def duplicated():\n    return 'needle'\n",
        "bin.dat": b"needle\x00\x01\x02",
        "latin.txt": "caf\xe9 needle\n".encode("latin-1"),
        "empty.py": b"",
        "-rf.py": b"needle = 'a name that looks like a flag'\n",
        "sp ace/na:me.py": b"needle = 'space and colon'\n",
        "deep/a/b/c/d/e.py": b"def needle_deep():\n    pass\n\n\n\nneedle = 1\n",
        "aaa.txt": b"a" * 40 + b"!\n",
    }
    for rel, data in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    (work / os.fsdecode(NEWLINE_NAME)).write_bytes(b"needle = 'newline in my name'\n")
    (work / os.fsdecode(LATIN1_NAME)).write_bytes(b"needle = 'latin-1 name'\n")
    os.symlink("deep/a/b/c/d/e.py", work / "link_in.py")
    os.symlink("/etc/passwd", work / "link_out")
    return work / ".git", commit_all(work, message="hostile", force=True)


HOSTILE_CALLS = [
    ("grep", {"pattern": "needle"}), ("grep", {"pattern": "needle", "context": 2}),
    ("grep", {"pattern": "NEEDLE", "ignore_case": True, "include": "*.py"}),
    ("grep", {"pattern": "needle", "include": "!*.py"}), ("grep", {"pattern": "needle", "path": "deep"}),
    ("grep", {"pattern": "needle", "path": "deep/a/b/c/d/e.py", "context": 1}),
    ("grep", {"pattern": "needle at the end"}), ("grep", {"pattern": "duplicated"}),
    ("grep", {"pattern": "(a+)+$"}), ("grep", {"pattern": "(a|aa)*b"}), ("grep", {"pattern": "(x+x+)+y"}),
    ("grep", {"pattern": "(a{1000}){1000}{1000}"}), ("grep", {"pattern": "(("}), ("grep", {"pattern": "-f/etc/passwd"}),
    ("grep", {"pattern": "\\p{Greek}"}), ("grep", {"pattern": "needle", "path": "../x"}),
    ("grep", {"pattern": "needle", "path": "link_out"}), ("grep", {"pattern": "needle", "path": "missing"}),
    ("glob", {"pattern": "**"}), ("glob", {"pattern": "*.py"}), ("glob", {"pattern": "*.log"}),
    ("glob", {"pattern": "**/e.py", "path": "deep"}), ("glob", {"pattern": "*", "path": "build"}),
    ("glob", {"pattern": "odd*"}), ("glob", {"pattern": "caf*"}),
    ("read", {"path": "odd\\nname.py"}), ("read", {"path": "caf\\xe9.py"}), ("read", {"path": "kept.log"}),
    ("read", {"path": "huge.txt"}), ("read", {"path": "long_line.txt"}), ("read", {"path": "bin.dat"}),
    ("read", {"path": "latin.txt"}), ("read", {"path": "empty.py"}), ("read", {"path": "-rf.py"}),
    ("read", {"path": "sp ace/na:me.py"}), ("read", {"path": "link_in.py"}), ("read", {"path": "link_out"}),
    ("read", {"path": "deep"}), ("read", {"path": ".git/config"}), ("read", {"path": "README.md", "start_line": 9}),
    ("grep", {"pattern": "."}), ("nope", {}),
]


def run_both(git_dir: Path, sha: str, calls: list[ToolCall], tmp_path: Path, config: ToolConfig) -> dict[str, list]:
    pool = WorktreePool(tmp_path / "pool")
    out = {}
    for mode in ("worktree", "objects"):
        with open_snapshot(git_dir, sha, mode, pool, config) as env:
            out[mode] = [env.call(c) for c in calls]
    pool.clear()
    assert pool.leaked() == []
    return out


def assert_same(out: dict[str, list], calls: list[ToolCall]) -> None:
    diffs = [(c, w.text()[:300], o.text()[:300]) for c, w, o in zip(calls, out["worktree"], out["objects"])
             if (w.text(), w.ok, w.truncated) != (o.text(), o.ok, o.truncated)]
    assert diffs == [], f"{len(diffs)} of {len(calls)} calls differ; first: {diffs[0]}"


def test_hostile_repository_same_answers_in_both_modes(tmp_path):
    git_dir, sha = hostile_repo(tmp_path)
    config = ToolConfig(max_file_bytes=6_000_000, timeout_s=5.0, store_root=str(tmp_path / "blobs"))
    calls = [ToolCall(n, a) for n, a in HOSTILE_CALLS]
    out = run_both(git_dir, sha, calls, tmp_path, config)
    assert_same(out, calls)
    got = {(c.name, str(c.arguments)): r for c, r in zip(calls, out["objects"])}
    listing = got[("glob", str({"pattern": "**"}))].output.splitlines()
    # every committed file, once each: ignore files do not hide committed files, a newline does not split a name
    assert {"kept.log", "build/out.py", "ignored_by_rg.py", "odd\\nname.py", "caf\\xe9.py"} <= set(listing)
    assert "odd" not in listing and "name.py" not in listing and "link_in.py" not in listing
    assert got[("read", str({"path": "odd\\nname.py"}))].output == "     1\tneedle = 'newline in my name'"
    assert got[("read", str({"path": "caf\\xe9.py"}))].output == "     1\tneedle = 'latin-1 name'"
    assert "too large" in got[("read", str({"path": "huge.txt"}))].error
    needle = got[("grep", str({"pattern": "needle"}))].output
    assert "huge.txt:" not in needle and "long_line.txt:1:" in needle and "bin.dat" not in needle
    assert "[not searched (over 6000000 bytes): huge.txt]" in needle.splitlines()  # skipped, and it says so
    assert "odd\\nname.py:1:" in needle and "dup_a.py:2:" in needle and "dup_b.py:2:" in needle
    for pattern in ("(a+)+$", "(a|aa)*b", "(x+x+)+y"):  # ripgrep's engine does not backtrack: fast in both
        for mode in ("worktree", "objects"):
            res = out[mode][HOSTILE_CALLS.index(("grep", {"pattern": pattern}))]
            assert res.ok and res.latency_ms < 3000, (mode, pattern, res.latency_ms)


def test_links_to_directories_submodules_and_link_loops_same_answers_in_both_modes(tmp_path):
    """Checkout-free mode resolved a symlink only when it named the whole path: ``read srclink/main.rs`` through a
    link to a directory was "does not exist" there and the file in a worktree; a dangling link's read named its
    target; a submodule was "does not exist" instead of the worktree's empty directory; a link loop was "resolves
    outside" instead of "does not exist"."""
    work = tmp_path / "links"
    (work / "src").mkdir(parents=True)
    (work / "src" / "main.rs").write_text("fn main() { split_words(); }\n")
    (work / "sub").mkdir()
    commit_all(work / "sub", {"lib.rs": "pub fn inner() {}\n"})
    for target, name in (("src", "srclink"), ("nowhere", "dangling.rs"), ("cyc_b", "cyc_a"), ("cyc_a", "cyc_b"),
                         ("/etc", "etc_link")):
        os.symlink(target, work / name)
    sha = commit_all(work)
    assert "160000" in git(work / ".git", "ls-tree", sha, "sub").decode()  # a gitlink, as a submodule commits
    calls = [ToolCall(n, a) for n, a in [
        ("read", {"path": "srclink/main.rs"}), ("grep", {"pattern": "split", "path": "srclink/main.rs"}),
        ("grep", {"pattern": "split", "path": "srclink"}), ("glob", {"pattern": "*", "path": "srclink"}),
        ("read", {"path": "srclink"}), ("read", {"path": "srclink/nope.rs"}), ("read", {"path": "dangling.rs"}),
        ("grep", {"pattern": "x", "path": "dangling.rs"}), ("read", {"path": "sub"}), ("read", {"path": "sub/lib.rs"}),
        ("grep", {"pattern": "inner", "path": "sub"}), ("glob", {"pattern": "*", "path": "sub"}),
        ("read", {"path": "cyc_a"}), ("grep", {"pattern": "x", "path": "cyc_a/x"}),
        ("read", {"path": "etc_link/passwd"}), ("grep", {"pattern": "root", "path": "etc_link"}),
    ]]
    config = ToolConfig(timeout_s=5.0, store_root=str(tmp_path / "blobs"))
    out = run_both(work / ".git", sha, calls, tmp_path, config)
    assert_same(out, calls)
    assert out["objects"][0].output == "     1\tfn main() { split_words(); }"
    assert "root:" not in "".join(r.text() for r in out["objects"] + out["worktree"])


def test_real_repository_same_answers_in_both_modes(tmp_path):
    from codegrep.data.shipped import snapshot_repos_dir

    try:
        git_dir = snapshot_repos_dir() / "sympy__sympy.git"
    except FileNotFoundError as exc:
        pytest.fail(f"shipped snapshot missing: {exc}")
    tag = sorted(git(git_dir, "tag").decode().split())[0]
    sha = git(git_dir, "rev-parse", f"{tag}^{{commit}}").decode().strip()
    files = [p for p in git(git_dir, "ls-tree", "-r", "--name-only", sha).decode().splitlines() if "." in p]
    calls = make_calls(files, random.Random(7), 60) + [
        ToolCall("grep", {"pattern": "def __init__", "path": "sympy/core", "context": 2}),
        ToolCall("grep", {"pattern": "import"}),  # over the line cap: the truncation notes must agree too
        ToolCall("glob", {"pattern": "**/test_*.py", "path": "sympy/solvers"}),
        ToolCall("read", {"path": "setup.py", "start_line": 5, "end_line": 40})]
    start = time.monotonic()
    out = run_both(git_dir, sha, calls, tmp_path, ToolConfig(store_root=str(tmp_path / "blobs")))
    assert_same(out, calls)
    assert sum(r.ok for r in out["objects"]) >= len(calls) // 2  # the corpus mostly finds things
    assert time.monotonic() - start < 300
