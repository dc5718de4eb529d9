"""Repository resolution: --repos layouts, mirrors cloned/fetched from a (local) remote, offline errors."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codegrep.data.repos import FIXED_IDENTITY, RepoResolver, commit_snapshot, has_commit


def _git(cwd, *args) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), **FIXED_IDENTITY}
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def _commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", name)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def upstream(tmp_path) -> tuple[Path, str]:
    """A work-tree repository laid out as <root>/acme/widget, with one commit."""
    repo = tmp_path / "remote" / "acme" / "widget"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    return repo, _commit(repo, "a.py", "x = 1\n")


def test_commit_snapshot_is_reproducible(tmp_path):
    files = {"pkg/a.py": "a = 1\n", "pkg/sub/b.py": "b = 2\n"}
    sha1 = commit_snapshot(tmp_path / "one", files, "msg")
    sha2 = commit_snapshot(tmp_path / "two", dict(reversed(list(files.items()))), "msg")
    assert sha1 == sha2 and len(sha1) == 40


@pytest.mark.parametrize("layout", ["acme__widget", "acme__widget.git", "bare"])
def test_repos_dir_layouts(tmp_path, upstream, layout):
    src, sha = upstream
    repos = tmp_path / "repos"
    repos.mkdir()
    if layout == "bare":
        _git(tmp_path, "clone", "-q", "--bare", str(src), str(repos / "acme__widget.git"))
    else:
        _git(tmp_path, "clone", "-q", str(src), str(repos / layout))
    resolver = RepoResolver(repos_dir=repos, mirror_dir=tmp_path / "mirrors", offline=True)
    path = resolver.resolve("acme/widget", sha)
    assert path.parent == repos and has_commit(path, sha)


def test_offline_errors_name_repo_and_commit(tmp_path, upstream):
    src, sha = upstream
    repos = tmp_path / "repos"
    _git(tmp_path, "clone", "-q", str(src), str(repos / "acme__widget"))
    resolver = RepoResolver(repos_dir=repos, mirror_dir=tmp_path / "mirrors", offline=True)
    with pytest.raises(FileNotFoundError, match=r"acme/widget at commit deadbeef.*not available offline"):
        resolver.resolve("acme/widget", "deadbeef" * 5)
    with pytest.raises(FileNotFoundError, match=r"other/thing at commit " + sha):
        resolver.resolve("other/thing", sha)


def test_env_offline_is_respected(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert RepoResolver(mirror_dir=tmp_path).offline


def test_mirror_is_cloned_once_and_fetched_when_a_commit_is_missing(tmp_path, upstream):
    src, sha1 = upstream
    template = str(tmp_path / "remote") + "/{repo}"
    resolver = RepoResolver(mirror_dir=tmp_path / "mirrors", offline=False, url_template=template)
    mirror = resolver.resolve("acme/widget", sha1)
    assert mirror == tmp_path / "mirrors" / "acme__widget.git" and has_commit(mirror, sha1)
    sha2 = _commit(src, "b.py", "y = 2\n")
    assert not has_commit(mirror, sha2)
    assert RepoResolver(mirror_dir=tmp_path / "mirrors", offline=False, url_template=template).resolve(
        "acme/widget", sha2) == mirror
    assert has_commit(mirror, sha2)
    # A mirror already on disk serves offline too.
    assert RepoResolver(mirror_dir=tmp_path / "mirrors", offline=True).resolve("acme/widget", sha1) == mirror


def test_unreachable_remote_and_unknown_commit_are_clear(tmp_path, upstream):
    resolver = RepoResolver(mirror_dir=tmp_path / "mirrors", offline=False,
                            url_template=str(tmp_path / "nowhere") + "/{repo}")
    with pytest.raises(RuntimeError, match=r"acme/widget at commit abc.*could not clone"):
        resolver.resolve("acme/widget", "abc" * 10)
    src, _ = upstream
    ok = RepoResolver(mirror_dir=tmp_path / "m2", offline=False, url_template=str(tmp_path / "remote") + "/{repo}")
    with pytest.raises(FileNotFoundError, match=r"acme/widget has no commit " + "0" * 40):
        ok.resolve("acme/widget", "0" * 40)


def test_default_set_repositories_are_never_mirrored(tmp_path):
    resolver = RepoResolver(mirror_dir=tmp_path, offline=False)
    with pytest.raises(FileNotFoundError, match="codegrep-default/tqdm"):
        resolver.resolve("codegrep-default/tqdm", "1" * 40)
