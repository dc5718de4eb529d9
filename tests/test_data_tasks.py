"""Task schema, gold files and loaders (issue 3)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from codegrep.cli import main as cli_main
from codegrep.data.tasks import (Task, filter_tasks, gold_files_from_patch, load_tasks, patch_changes, patch_files,
                                 profile_tasks, read_tasks, save_tasks)
from conftest import git_out

VERIFIED = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench_verified.jsonl"


@pytest.fixture(scope="module")
def verified() -> dict[str, dict]:
    if not VERIFIED.is_file():
        pytest.skip(f"{VERIFIED} absent (shared data not mounted)")
    return {r["instance_id"]: r for r in map(json.loads, VERIFIED.read_text().splitlines())}


# Hand-checked against the `diff --git` headers of each patch.
HAND_CHECKED = {
    "astropy__astropy-12907": ["astropy/modeling/separable.py"],
    "django__django-11532": ["django/core/mail/message.py", "django/core/mail/utils.py", "django/core/validators.py",
                             "django/utils/encoding.py", "django/utils/html.py"],
    "pylint-dev__pylint-4661": ["pylint/config/__init__.py", "setup.cfg"],
    "astropy__astropy-13398": ["astropy/coordinates/builtin_frames/__init__.py",
                               "astropy/coordinates/builtin_frames/intermediate_rotation_transforms.py",
                               "astropy/coordinates/builtin_frames/itrs.py",
                               "astropy/coordinates/builtin_frames/itrs_observed_transforms.py"],
}


@pytest.mark.shared
def test_patch_files_on_verified_rows(verified):
    for iid, files in HAND_CHECKED.items():
        assert patch_files(verified[iid]["patch"]) == files, iid
    sympy = patch_files(verified["sympy__sympy-13091"]["patch"])
    assert len(sympy) == 21 and sympy[0] == "sympy/core/basic.py" and sympy[-1] == "sympy/utilities/enumerative.py"


@pytest.mark.shared
def test_new_file_is_not_gold_because_it_is_absent_at_base(verified):
    row = verified["astropy__astropy-13398"]
    changes = {c.new: c.status for c in patch_changes(row["patch"])}
    assert changes["astropy/coordinates/builtin_frames/itrs_observed_transforms.py"] == "added"
    assert Task.from_dict(row).gold_files == HAND_CHECKED["astropy__astropy-13398"][:3]


@pytest.mark.shared
def test_verified_file_loads_whole_with_optional_fields_kept():
    if not VERIFIED.is_file():
        pytest.skip(f"{VERIFIED} absent")
    tasks = load_tasks(VERIFIED)
    assert len(tasks) == 500 and all(t.gold_files for t in tasks)
    assert isinstance(tasks[0].extra["FAIL_TO_PASS"], list) and "test_patch" in tasks[0].extra
    assert tasks[0].to_dict()["FAIL_TO_PASS"] == tasks[0].extra["FAIL_TO_PASS"]


def _git(cwd, *args):
    return git_out(cwd, *args, strip=False)


def test_patch_changes_on_a_real_git_diff(tmp_path):
    """Rename, deletion, addition, modification and a path with a space, as `git diff` writes them."""
    _git(tmp_path, "init", "-q")
    body = "".join(f"line {i}\n" for i in range(30))
    for name in ("keep.py", "old name.py", "gone.py"):
        (tmp_path / name).write_text(body + name)
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (tmp_path / "keep.py").write_text(body + "changed")
    (tmp_path / "old name.py").rename(tmp_path / "new name.py")
    (tmp_path / "gone.py").unlink()
    (tmp_path / "added.py").write_text("x = 1\n")
    _git(tmp_path, "add", "-A")
    patch = _git(tmp_path, "diff", "--cached", "-M")
    status = {(c.old, c.new): c.status for c in patch_changes(patch)}
    assert status == {(None, "added.py"): "added", ("gone.py", None): "deleted", ("keep.py", "keep.py"): "modified",
                      ("old name.py", "new name.py"): "renamed"}
    assert sorted(patch_files(patch)) == ["added.py", "gone.py", "keep.py", "new name.py"]
    assert sorted(gold_files_from_patch(patch)) == ["gone.py", "keep.py", "old name.py"]


ROW = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "a" * 40, "problem_statement": "It breaks",
       "patch": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"}


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_jsonl_errors_name_file_and_line(tmp_path):
    bad_json = _write_jsonl(tmp_path / "tasks.jsonl", [ROW, {**ROW, "instance_id": "o__r-2"}, "{not json"])
    with pytest.raises(ValueError, match=r"tasks\.jsonl:3: invalid JSON"):
        load_tasks(bad_json)
    no_repo = _write_jsonl(tmp_path / "t2.jsonl", [ROW, {k: v for k, v in ROW.items() if k != "repo"} | {"instance_id": "x"}])
    with pytest.raises(ValueError, match=r"t2\.jsonl:2: missing field 'repo'"):
        load_tasks(no_repo)
    dup = _write_jsonl(tmp_path / "t3.jsonl", [ROW, ROW])
    with pytest.raises(ValueError, match=r"t3\.jsonl:2: duplicate instance_id 'o__r-1' \(first at .*t3\.jsonl:1\)"):
        load_tasks(dup)
    no_gold = _write_jsonl(tmp_path / "t4.jsonl", [{**ROW, "patch": ""}])
    with pytest.raises(ValueError, match=r"t4\.jsonl:1: .*neither 'patch' nor 'gold_files'"):
        load_tasks(no_gold)


def test_lenient_mode_skips_and_counts(tmp_path, capsys):
    path = _write_jsonl(tmp_path / "tasks.jsonl", [ROW, "[1, 2", {"repo": "o/r"}, {**ROW, "instance_id": "o__r-9"}])
    tasks, report = read_tasks(path, on_error="skip")
    assert [t.instance_id for t in tasks] == ["o__r-1", "o__r-9"]
    assert (report.n_rows, report.n_loaded, len(report.skipped)) == (4, 2, 2)
    assert report.skipped[0].startswith(f"{path}:2: invalid JSON")
    assert len(load_tasks(path, on_error="skip")) == 2
    assert "skipped 2 of 4 rows" in capsys.readouterr().err


def test_json_and_parquet_round_trip(tmp_path):
    rows = [{**ROW, "instance_id": f"o__r-{i}", "FAIL_TO_PASS": ["t1", "t2"]} for i in range(3)]
    (tmp_path / "t.json").write_text(json.dumps(rows))
    import pandas as pd

    pd.DataFrame(rows).to_parquet(tmp_path / "t.parquet")
    for name in ("t.json", "t.parquet"):
        tasks = load_tasks(tmp_path / name)
        assert [t.gold_files for t in tasks] == [["x.py"]] * 3
        assert tasks[1].extra["FAIL_TO_PASS"] == ["t1", "t2"]
    gaps = [{**ROW, "gold_files": ["g.py"]}, {**ROW, "instance_id": "o__r-2", "patch": None, "gold_files": ["h.py"]}]
    pd.DataFrame(gaps).to_parquet(tmp_path / "gaps.parquet")
    assert [t.gold_files for t in load_tasks(tmp_path / "gaps.parquet")] == [["g.py"], ["h.py"]]
    (tmp_path / "bad.json").write_text(json.dumps([ROW, {"repo": "o/r"}]))
    with pytest.raises(ValueError, match=r"bad\.json: item 1: missing field 'instance_id'"):
        load_tasks(tmp_path / "bad.json")
    (tmp_path / "obj.json").write_text("{}")
    with pytest.raises(ValueError, match="expected a JSON list"):
        load_tasks(tmp_path / "obj.json")


def test_missing_and_unsupported_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_tasks(tmp_path / "nope.jsonl")
    (tmp_path / "t.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unsupported task file type"):
        load_tasks(tmp_path / "t.csv")


def test_hf_id_fails_fast_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="pass a local .jsonl"):
        load_tasks("princeton-nlp/SWE-bench_Verified")
    assert time.monotonic() - start < 30  # generous: it must not wait on the network


def test_filters_are_deterministic(tmp_path):
    tasks = [Task.from_dict({**ROW, "instance_id": f"o__r-{i}", "repo": f"o/r{i % 3}", "split": "train" if i < 6
                             else "eval"}) for i in range(10)]
    a = filter_tasks(tasks, limit=4, seed=1)
    assert [t.instance_id for t in a] == [t.instance_id for t in filter_tasks(tasks, limit=4, seed=1)]
    assert [t.instance_id for t in a] == sorted((t.instance_id for t in a), key=lambda s: int(s.split("-")[1]))
    assert {t.repo for t in filter_tasks(tasks, repos=["o/r1"])} == {"o/r1"}
    assert len(filter_tasks(tasks, split="eval")) == 4
    assert [t.instance_id for t in filter_tasks(tasks, instance_ids=["o__r-3"])] == ["o__r-3"]
    with pytest.raises(ValueError, match="o__r-99"):
        filter_tasks(tasks, instance_ids=["o__r-99"])
    # one repository / id as a string (--set tasks.repos=o/r1): one, not the set of its letters (was: no task)
    assert [t.instance_id for t in filter_tasks(tasks, repos="o/r1")] == ["o__r-1", "o__r-4", "o__r-7"]
    assert [t.instance_id for t in filter_tasks(tasks, instance_ids="o__r-3")] == ["o__r-3"]


def test_profile_tasks_reads_split_overrides(tmp_path):
    rows = [{**ROW, "instance_id": f"o__r-{i}", "split": "train" if i % 2 else "eval"} for i in range(20)]
    path = save_tasks([Task.from_dict(r) for r in rows], tmp_path / "t.jsonl")
    cfg = {"seed": 3, "tasks": {"source": str(path), "repos_dir": str(tmp_path), "offline": True,
                                "splits": {"train": {"limit": 4}, "eval": {"limit": 2}}}}
    train, resolver = profile_tasks(cfg, "train")
    assert len(train) == 4 and all(t.extra["split"] == "train" for t in train)
    assert resolver.repos_dir == tmp_path and resolver.offline
    assert len(profile_tasks(cfg, "eval")[0]) == 2 and len(profile_tasks(cfg, "eval", limit=5)[0]) == 5
    assert len(profile_tasks(cfg)[0]) == 20


def test_cli_stats_prints_tables(tmp_path, capsys):
    path = _write_jsonl(tmp_path / "t.jsonl", [ROW, {**ROW, "instance_id": "o__r-2", "repo": "p/q",
                                                      "gold_files": ["a.py", "b.py"], "patch": ""}])
    assert cli_main(["tasks", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 tasks over 2 repositories" in out and "p/q" in out and "multi-file share 0.500" in out
    assert cli_main(["tasks", "stats", str(tmp_path / "missing.jsonl")]) == 2
