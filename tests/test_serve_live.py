"""Request checks and snapshots of the MCP server, in process, on real temporary git repositories."""
from __future__ import annotations

from pathlib import Path

import pytest

from codegrep.cli import main
from codegrep.serve.live import RequestError, adhoc_task, open_snapshot, resolve_commit, resolve_repo
from codegrep.serve.mcp_server import FileFinder, ServeConfig
from conftest import git_out as git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("CODEGREP_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "parser.py").write_text("def parse_header_line(line):\n    return line.split(':')\n")
    (root / "pkg" / "render.py").write_text("def render_table(rows):\n    return '\\n'.join(rows)\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "one")
    return root


def test_resolve_repo_keeps_requests_inside_the_served_root(repo: Path, tmp_path: Path):
    assert resolve_repo(None, repo) == repo.resolve()
    assert resolve_repo("pkg", repo) == (repo / "pkg").resolve()
    assert resolve_repo(str(repo / "pkg"), repo) == (repo / "pkg").resolve()
    (repo / "escape").symlink_to(tmp_path)  # a symlink inside the repository pointing out of it
    with pytest.raises(RequestError, match="outside the served repository"):
        resolve_repo("escape", repo)
    with pytest.raises(RequestError, match="not a directory"):
        resolve_repo("pkg/parser.py", repo)
    with pytest.raises(RequestError, match="does not exist"):
        resolve_repo("nope", repo)
    with pytest.raises(RequestError, match="inside a .git directory"):
        resolve_repo(".git/refs", repo)
    with pytest.raises(RequestError, match="repo_path is required"):
        resolve_repo("", None)
    assert resolve_repo(str(repo), None) == repo.resolve()


def test_resolve_commit_accepts_revisions_and_refuses_options(repo: Path):
    top, sha = resolve_commit(repo / "pkg", "HEAD")
    assert top == repo.resolve() and sha == git(repo, "rev-parse", "HEAD")
    for bad in ("-p", "--output=x", "HEAD;rm", ""):
        with pytest.raises(RequestError, match="not a revision"):
            resolve_commit(repo, bad)
    with pytest.raises(RequestError, match="not a commit"):
        resolve_commit(repo, "deadbeef")


def test_live_snapshot_is_the_tree_itself(repo: Path):
    with open_snapshot(repo, None) as snap:
        assert snap.path == repo and snap.commit == "WORKTREE" and snap.head == git(repo, "rev-parse", "HEAD")
    task = adhoc_task("q", repo, "WORKTREE")
    assert task.base_commit == "" and task.repo == "proj" and task.problem_statement == "q"
    assert adhoc_task("q", repo, "WORKTREE").instance_id == task.instance_id != adhoc_task("r", repo, "x").instance_id


def test_finder_sees_uncommitted_edits_with_a_real_retriever(repo: Path):
    finder = FileFinder(ServeConfig(repo=repo, retriever="bm25"))
    before = finder.find("render_table drops the last row", max_files=1)
    assert [f["path"] for f in before["files"]] == ["pkg/render.py"]
    (repo / "pkg" / "tables.py").write_text("def render_table_footer(rows):\n    return rows[-1]\n" * 3)
    after = finder.find("render_table_footer drops the last row")
    assert after["files"][0]["path"] == "pkg/tables.py"  # an untracked file: only the live tree has it
    assert after["cost"]["seconds"] >= after["cost"]["retriever_seconds"] > 0


def test_cli_one_shot_query_and_argument_errors(repo: Path, capsys):
    assert main(["mcp", "--repo", str(repo), "--retriever", "bm25", "--query", "parse_header_line",
                 "--max-files", "1"]) == 0
    assert '"path": "pkg/parser.py"' in capsys.readouterr().out
    assert main(["mcp", "--retriever", "bm25", "--endpoint", "http://localhost:1", "--query", "x"]) == 2
    assert "only apply to --retriever agent" in capsys.readouterr().err
    assert main(["mcp", "--repo", str(repo / "missing"), "--query", "x"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_a_bare_repository_is_searched_at_a_commit_and_refused_without_one(repo: Path, tmp_path: Path):
    """A bare clone (what --repos folders and mirrors hold): at a commit it was 'not inside a git repository', and
    without one the server searched its git directory and answered no files, as if nothing matched."""
    bare = tmp_path / "o__proj.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    finder = FileFinder(ServeConfig(repo=bare, retriever="grep-heuristic"))
    answer = finder.find("parse_header_line splits on every colon", commit="HEAD")
    assert answer["commit"] == answer["head"] == git(repo, "rev-parse", "HEAD")
    assert answer["files"][0]["path"] == "pkg/parser.py"
    with pytest.raises(RequestError, match="bare git repository .* pass a commit"):
        finder.find("parse_header_line splits on every colon")


def test_commit_requests_search_that_commit_not_the_live_tree(repo: Path):
    first = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "render.py").write_text("def render_table(rows):\n    return rows\n\n\ndef render_chart_svg():\n"
                                            "    pass\n")
    git(repo, "commit", "-qam", "two")
    (repo / "pkg" / "render.py").unlink()  # uncommitted deletion: the live tree lacks the file
    finder = FileFinder(ServeConfig(repo=repo, retriever="grep-heuristic"))
    at_head = finder.find("render_chart_svg is slow", commit="HEAD")
    assert at_head["commit"] == git(repo, "rev-parse", "HEAD") and at_head["files"][0]["path"] == "pkg/render.py"
    assert "render_chart_svg" in at_head["files"][0]["reason"]
    at_first = finder.find("render_chart_svg is slow", commit=first[:10])
    assert at_first["commit"] == first and "pkg/render.py" not in [f["path"] for f in at_first["files"]]
    live = finder.find("render_chart_svg is slow")
    assert "pkg/render.py" not in [f["path"] for f in live["files"]]
    in_sub = finder.find("render_chart_svg is slow", repo_path="pkg", commit="HEAD")
    assert in_sub["files"][0]["path"] == "render.py"
    assert (repo / "pkg").is_dir() and not (repo / "pkg" / "render.py").exists()  # the live tree was not touched
