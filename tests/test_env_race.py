"""A checkout that changes under the tools never shows content from outside it.

A live checkout's listing is reused for ``LIVE_LISTING_TTL_S`` and grep hands the listed files to ripgrep as
explicit paths, which ripgrep follows when they are symlinks; ``read`` resolved a path, then opened it following
every directory on it. Here the swap is made deterministic: after the listing (grep) or after the path's check
(read), a listed file or a directory on its path is replaced by a symlink to outside the checkout.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codegrep.agent.protocol import shape_result
from codegrep.env import repo_view, workdir
from codegrep.env.gitobjects import GitObjectEnvironment
from codegrep.env.tools import RepoToolEnvironment, ToolCall, ToolConfig
from conftest import commit_all

SECRET = "TOPSECRET-race"
CHANGED = "[not shown (changed during the search: edited, or a symlink now on its path): pkg/core.py]"


def make_checkout(base: Path) -> tuple[Path, Path]:
    """``work/pkg/{core,util}.py`` and ``outside/`` holding a ``core.py`` full of secrets (so a followed link finds
    a file of the listed name)."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "core.py").write_text(f"{SECRET} = 'def core():'\n")
    work = base / "work"
    commit_all(work, {"pkg/core.py": "def core():\n    return 1\n", "pkg/util.py": "from pkg.core import core\n",
                      "top.py": "import pkg\n"})
    return work, outside


def swap(work: Path, outside: Path, what: str) -> None:
    """Replace the listed ``pkg/core.py`` (``file``) or its directory ``pkg`` (``dir``) by a link to outside."""
    if what == "file":
        (work / "pkg" / "core.py").unlink()
        (work / "pkg" / "core.py").symlink_to(outside / "core.py")
    else:
        shutil.move(work / "pkg", work.parent / "pkg.moved")
        (work / "pkg").symlink_to(outside)


def unswap(work: Path, what: str) -> None:
    (work / ("pkg/core.py" if what == "file" else "pkg")).unlink()
    if what == "file":
        (work / "pkg" / "core.py").write_text("def core():\n    return 1\n")
    else:
        shutil.move(work.parent / "pkg.moved", work / "pkg")


def run(env, name, **arguments):
    return env.call(ToolCall(name, arguments))


@pytest.mark.parametrize("snapshot", [False, True], ids=["live", "pooled"])
@pytest.mark.parametrize("what", ["file", "dir", "file-and-back", "dir-and-back"])
def test_grep_never_follows_a_listed_path_swapped_for_an_outside_symlink(tmp_path, monkeypatch, what, snapshot):
    """The listing is taken, then ``pkg/core.py`` or ``pkg/`` becomes a link to outside (``-and-back``: only while
    ripgrep runs, restored before the tool looks again: a check of the path after the search would pass). ripgrep
    followed the link and grep printed ``pkg/core.py:1:TOPSECRET-race = ...``; now the file's hits are left out and
    one line says so."""
    monkeypatch.setattr(workdir, "LIVE_LISTING_TTL_S", 3600.0)  # the swap lands inside the reuse window, always
    work, outside = make_checkout(tmp_path)
    env = RepoToolEnvironment(work, snapshot=snapshot)
    assert run(env, "grep", pattern="def core").output == "pkg/core.py:1:def core():"  # listed, unchanged
    kind, back = what.split("-")[0], what.endswith("back")
    if back:
        real = repo_view.run_capped

        def swapped_while_searching(cmd, *args):
            swap(work, outside, kind)
            try:
                return real(cmd, *args)
            finally:
                unswap(work, kind)

        monkeypatch.setattr(repo_view, "run_capped", swapped_while_searching)
    else:
        swap(work, outside, kind)
    result = run(env, "grep", pattern="core", context=1)
    assert result.ok and SECRET not in result.text()
    if kind == "file":
        assert result.output == "pkg/util.py:1:from pkg.core import core\n" + CHANGED
        assert result.files == ("pkg/util.py",)
        files_view = shape_result(ToolCall("grep", {"pattern": "core"}), result, "files").output
        assert files_view == "pkg/util.py (1 hit)\n" + CHANGED  # the note stays in the files view
    else:  # pkg/util.py was not there while ripgrep ran
        assert result.output == "No matches found.\n" + CHANGED
    listed = run(env, "glob", pattern="**/*.py").output  # names from the listing: none from outside
    assert listed == "pkg/core.py\npkg/util.py\ntop.py"
    env.close()


def test_a_swapped_file_past_the_output_cap_is_left_out_of_the_count(tmp_path, monkeypatch):
    """Rows past ``max_output_lines`` are not shown but counted (``showing 1 of N``): a swapped file there is
    opened without following its link too, and its outside rows are not counted."""
    monkeypatch.setattr(workdir, "LIVE_LISTING_TTL_S", 3600.0)
    work, outside = make_checkout(tmp_path)
    (work / "aaa.py").write_text("core = 1\n")
    env = RepoToolEnvironment(work, ToolConfig(max_output_lines=1), snapshot=False)
    assert run(env, "grep", pattern="core").output.endswith("[... truncated: showing 1 of 3 lines; narrow the "
                                                            "pattern, path or include]")
    swap(work, outside, "file")
    assert run(env, "grep", pattern="core").output == "aaa.py:1:core = 1\n" + CHANGED + \
        "\n[... truncated: showing 1 of 2 lines; narrow the pattern, path or include]"
    env.close()


def test_grep_leaves_out_a_file_edited_during_the_search(tmp_path, monkeypatch):
    """Only lines that are in the file are shown: one rewritten between ripgrep's read and the check is named
    instead of shown with stale lines."""
    work, _ = make_checkout(tmp_path)
    env = RepoToolEnvironment(work, snapshot=False)
    real = repo_view.run_capped

    def edited_after(cmd, *args):
        cap = real(cmd, *args)
        (work / "pkg" / "core.py").write_text("# rewritten\n")
        return cap

    monkeypatch.setattr(repo_view, "run_capped", edited_after)
    assert run(env, "grep", pattern="core").output == "pkg/util.py:1:from pkg.core import core\n" + CHANGED
    env.close()


@pytest.mark.parametrize("what", ["file", "dir"])
def test_read_never_follows_a_path_swapped_after_its_check(tmp_path, monkeypatch, what):
    """``read`` checked the path (``realpath`` inside the checkout), then opened it with ``O_NOFOLLOW``, which guards
    the last component only: ``pkg/`` replaced by a link in between was followed and the outside file served (a
    swapped file failed as ``internal error in read: OSError ...``). Now every component is opened without
    following a link, and the answer is one line."""
    work, outside = make_checkout(tmp_path)
    env = RepoToolEnvironment(work, snapshot=False)
    assert run(env, "read", path="pkg/core.py").output == "     1\tdef core():\n     2\t    return 1"
    real = workdir.resolve_inside

    def swapped_after_check(root, rel):
        target = real(root, rel)
        swap(work, outside, what)
        return target

    monkeypatch.setattr(workdir, "resolve_inside", swapped_after_check)
    result = run(env, "read", path="pkg/core.py")
    assert SECRET not in result.text() and not result.ok
    assert result.error == "pkg/core.py changed while the tool ran (a symlink or a non-regular file is now on its " \
                           "path); not read"
    env.close()


def test_grep_shows_files_ripgrep_transcodes_as_they_are(tmp_path):
    """The check compares ripgrep's rows with the file as ripgrep reads it: a UTF-8 byte-order mark dropped and a
    UTF-16 file transcoded, so such files are shown as before, not reported as changed; both modes agree."""
    work = tmp_path / "bom"
    sha = commit_all(work, {"bom8.py": b"\xef\xbb\xbfMARK = 1\nMARK2 = 2\n",
                            "wide.txt": b"\xff\xfe" + "MARK wide\r\nx\r\n".encode("utf-16-le")})
    expected = "bom8.py:1:MARK = 1\nbom8.py:2:MARK2 = 2\nwide.txt:1:MARK wide"
    for env in (RepoToolEnvironment(work, snapshot=False), GitObjectEnvironment(work / ".git", sha)):
        assert run(env, "grep", pattern="MARK").output == expected
        env.close()


def test_open_inside_refuses_links_and_non_files(tmp_path):
    from codegrep.env.sandbox import SandboxError, open_inside

    work, outside = make_checkout(tmp_path)
    os.mkfifo(work / "pipe")
    fd = open_inside(work, "pkg/core.py")
    assert os.read(fd, 100) == b"def core():\n    return 1\n"
    os.close(fd)
    for rel in ("pipe", "pkg"):
        with pytest.raises(SandboxError, match=f"^{rel} changed while the tool ran"):
            open_inside(work, rel)
    with pytest.raises(FileNotFoundError):
        open_inside(work, "pkg/gone.py")
