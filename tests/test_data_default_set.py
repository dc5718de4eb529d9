"""The offline default task set: deterministic, real, split by repository, docstrings really removed."""
from __future__ import annotations

import ast
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from codegrep.cli import main as cli_main
from codegrep.data.default_set import SOURCE_PACKAGES, build_default_set, ensure_default_task_set
from codegrep.data.docstrings import find_docstrings, first_paragraph, mask_code_names, strip_docstrings
from codegrep.data.tasks import load_tasks
from conftest import git_out as _git


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Built once through the cache path (a private cache), as stages get it."""
    patch = pytest.MonkeyPatch()
    patch.setenv("CODEGREP_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield ensure_default_task_set()
    patch.undo()


def test_builds_twice_to_identical_bytes(built, tmp_path):
    again = build_default_set(tmp_path / "b")
    assert built.tasks_path.read_bytes() == again.tasks_path.read_bytes()
    names = sorted(p.name for p in built.repos_dir.iterdir())
    assert names == sorted(p.name for p in again.repos_dir.iterdir()) and len(names) == len(SOURCE_PACKAGES)
    for name in names:
        assert _git(built.repos_dir / name, "rev-parse", "HEAD") == _git(again.repos_dir / name, "rev-parse", "HEAD")


def test_size_and_split_by_repository(built):
    tasks = load_tasks(built.tasks_path)
    repos = {t.repo for t in tasks}
    assert len(tasks) >= 300 and len(repos) >= 5
    split_of = {}
    for t in tasks:
        assert split_of.setdefault(t.repo, t.extra["split"]) == t.extra["split"], t.repo
    assert set(split_of.values()) == {"train", "eval"}
    assert sum(t.extra["split"] == "eval" for t in tasks) >= 60


def test_docstrings_are_removed_and_patches_restore_them(built):
    tasks = load_tasks(built.tasks_path)
    by_repo: dict[str, list] = {}
    for t in tasks:
        by_repo.setdefault(t.repo, []).append(t)
    for repo, group in by_repo.items():
        root = built.repos_dir / repo.replace("/", "__")
        assert _git(root, "rev-parse", "HEAD").strip() == group[0].base_commit
        assert not _git(root, "status", "--porcelain").strip()  # the work tree is the commit
        snapshot = " ".join("\n".join(p.read_text() for p in root.rglob("*.py") if ".git" not in p.parts).split())
        for t in group:
            added = "".join(l[1:] + "\n" for l in t.patch.splitlines() if l.startswith("+") and not l.startswith("+++"))
            paragraph = first_paragraph(ast.literal_eval(textwrap.dedent(added).strip()))
            assert paragraph not in snapshot, t.instance_id  # not greppable verbatim, even across lines
            assert t.problem_statement.split("\n\n")[1].strip() == mask_code_names(paragraph), t.instance_id
            assert t.gold_files == [t.patch.split("\n", 1)[0].split(" b/", 1)[1]]
            assert (root / t.gold_files[0]).is_file()
        for t in group[:5]:  # patches are real: they apply to the snapshot
            subprocess.run(["git", "apply", "--check", "-"], cwd=root, input=t.patch, text=True, check=True)
        for p in root.rglob("*.py"):  # stripped sources still parse
            if ".git" not in p.parts:
                ast.parse(p.read_text(), str(p))


def test_lone_docstring_becomes_pass():
    src = "class A:\n    '''Only a docstring here.'''\n\n\ndef f(x):\n    \"\"\"Doc.\n\n    More.\n    \"\"\"\n    return x\n"
    docs = find_docstrings("m.py", src)
    out = strip_docstrings(src, docs)
    assert out == "class A:\n    pass\n\n\ndef f(x):\n    return x\n"
    assert [d.paragraph for d in docs] == ["Only a docstring here.", "Doc."]
    one_line = "def g(): '''same line'''\n"
    assert find_docstrings("m.py", one_line) == []  # shares its line with code: left alone


def test_ensure_reuses_the_cache_entry(monkeypatch, built):
    cache = built.tasks_path.parents[2]
    assert built.tasks_path.parent.parent == cache / "default_set"
    monkeypatch.setenv("CODEGREP_CACHE", str(cache))
    stamp = built.tasks_path.stat().st_mtime_ns
    assert ensure_default_task_set() == built and built.tasks_path.stat().st_mtime_ns == stamp


def test_cli_default_out(tmp_path, capsys, built):
    out_dir = built.tasks_path.parent  # already built with this hash: reused, not rebuilt
    assert cli_main(["tasks", "default", "--out", str(out_dir)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert Path(info["tasks_path"]) == built.tasks_path and info["n_tasks"] >= 300
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("keep me")
    assert cli_main(["tasks", "default", "--out", str(tmp_path / "other")]) == 2
    assert (tmp_path / "other" / "x").read_text() == "keep me"


def test_one_test_path_rule_keeps_the_default_set():
    """Issue 26 unified the default set's test-file rule with the retrievers' (``codegrep.data.paths``). The earlier
    rule, kept here as the oracle, agrees with it on every file the default set reads, so the set is unchanged."""
    from codegrep.data import default_set as ds
    from codegrep.data.paths import is_test_path

    def earlier(rel: str) -> bool:
        parts = rel.split("/")
        return any(p in ("tests", "test", "testing") for p in parts) or parts[-1].startswith(("test_", "conftest"))

    files = [rel for pkg in ds.SOURCE_PACKAGES for rel in ds._read_sources(ds._package_dir(pkg), pkg.module)]
    assert len(files) > 500
    assert [f for f in files if earlier(f) != is_test_path(f)] == []
    assert sum(map(is_test_path, files)) > 0  # the rule does exclude files
