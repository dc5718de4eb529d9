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

from codegrep.env import workdir
from codegrep.env.tools import RepoToolEnvironment, ToolCall
from conftest import commit_all

SECRET = "TOPSECRET-race"


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
    """Replace ``pkg/core.py`` (``file``) or its directory ``pkg`` (``dir``) by a link to outside."""
    if what == "file":
        (work / "pkg" / "core.py").unlink()
        (work / "pkg" / "core.py").symlink_to(outside / "core.py")
    else:
        shutil.move(work / "pkg", work.parent / "pkg.moved")
        (work / "pkg").symlink_to(outside)


def run(env, name, **arguments):
    return env.call(ToolCall(name, arguments))


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
