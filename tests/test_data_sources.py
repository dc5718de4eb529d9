"""The shipped real task sources (data/), the per-split profile sources, and train/eval disjointness (issue 12)."""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from codegrep.config import load_profile
from codegrep.data import evaluation_instance_ids, profile_tasks
from codegrep.data.repos import has_commit
from codegrep.data.shipped import lite_rows_path, snapshot_archives, verified_rows_path
from codegrep.data.sources import shipped_rows, shipped_tags
from codegrep.data.tasks import load_tasks, patch_files

pytestmark = pytest.mark.skipif(not snapshot_archives(), reason="no shipped snapshots under data/verified-repos")


def test_verified_source_is_the_86_shipped_instances_with_gold_files():
    tasks = load_tasks("verified")
    assert len(tasks) == 86 and Counter(t.repo for t in tasks) == {"sympy/sympy": 75, "astropy/astropy": 11}
    rows = {json.loads(line)["instance_id"]: json.loads(line) for line in gzip.open(verified_rows_path(), "rt")}
    for t in tasks:
        assert t.gold_files and t.gold_files == [f for f in patch_files(rows[t.instance_id]["patch"])
                                                   if f in t.gold_files]
        assert t.base_commit == rows[t.instance_id]["base_commit"] and t.problem_statement
    tags = shipped_tags()
    assert all(tags[t.repo][t.instance_id] == t.base_commit for t in tasks)


def test_lite_train_source_is_disjoint_from_verified():
    train = load_tasks("lite-train")
    verified_ids = {json.loads(line)["instance_id"] for line in gzip.open(verified_rows_path(), "rt")}
    lite_ids = {json.loads(line)["instance_id"] for line in gzip.open(lite_rows_path(), "rt")}
    assert len(train) == 55 and {t.repo for t in train} == {"sympy/sympy"}
    assert all(t.instance_id in lite_ids and t.instance_id not in verified_ids for t in train)
    assert len(shipped_rows("verified")) + len(train) == sum(map(len, shipped_tags().values()))


@pytest.mark.parametrize("profile", ["ci", "smoke"])
def test_train_and_eval_splits_share_no_instance(profile):
    cfg = load_profile(profile)
    train, _ = profile_tasks(cfg, "train")
    evals, resolver = profile_tasks(cfg, "eval")
    held_out = evaluation_instance_ids(cfg)
    assert train and evals and {t.instance_id for t in evals} <= held_out
    assert not {t.instance_id for t in train} & held_out
    assert not {t.problem_statement for t in train} & {t.problem_statement for t in evals}
    assert all(t.repo in ("sympy/sympy", "astropy/astropy") for t in evals)
    # the eval repositories resolve offline to the extracted snapshots in the cache, never to data/
    for t in evals[:3]:
        git_dir = resolver.resolve(t.repo, t.base_commit)
        assert has_commit(git_dir, t.base_commit) and "verified-repos" not in str(git_dir)


def test_smoke_eval_is_all_86_and_ci_eval_a_handful():
    assert len(profile_tasks(load_profile("smoke"), "eval")[0]) == 86
    assert 4 <= len(profile_tasks(load_profile("ci"), "eval")[0]) <= 6


def test_train_drops_an_evaluation_instance_that_a_source_repeats(tmp_path, capsys):
    rows = shipped_rows("verified")[:3]
    path = tmp_path / "leaky.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {"seed": 0, "tasks": {"splits": {"train": {"source": [str(path), "lite-train"]},
                                           "eval": {"source": "verified"}}}}
    train, _ = profile_tasks(cfg, "train")
    assert len(train) == 55 and not {r["instance_id"] for r in rows} & {t.instance_id for t in train}
    assert "3 train task(s) are evaluation instances and were dropped" in capsys.readouterr().err


def test_a_list_source_naming_one_instance_twice_is_an_error():
    cfg = {"tasks": {"source": ["verified", "verified"]}}
    with pytest.raises(ValueError, match="is in both 'verified' and 'verified'"):
        profile_tasks(cfg, "eval")
