"""Retrieval metrics against hand-computed values, including the awkward cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegrep.metrics import (acc_at_k, bootstrap_ci, dedupe, f_beta, instance_metrics, macro_average, mrr,
                              normalize_path, paired_bootstrap_diff, precision_recall, recall_at_k)


def test_empty_prediction_scores_zero_everywhere():
    m = instance_metrics([], ["a.py", "b.py"])
    assert {k: m[k] for k in ("precision", "recall", "f1", "f0.5", "acc@1", "acc@5", "recall@5", "mrr", "n_pred")} == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "f0.5": 0.0, "acc@1": 0.0, "acc@5": 0.0, "recall@5": 0.0,
        "mrr": 0.0, "n_pred": 0}
    assert instance_metrics(["", "  "], ["a.py"])["n_pred"] == 0  # blank paths are not predictions


def test_duplicates_count_once_and_keep_first_rank():
    pred = ["a.py", "./a.py", "/testbed/a.py", "b.py"]
    gold = ["a.py", "b.py", "c.py"]
    m = instance_metrics(pred, gold, beta=0.5)
    # dedupe -> [a.py, b.py]: P = 2/2, R = 2/3, F1 = 2PR/(P+R) = 0.8, F0.5 = 1.25PR/(0.25P+R) = 10/11
    assert m["precision"] == 1.0 and m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(0.8) and m["f0.5"] == pytest.approx(10 / 11)
    assert m["n_pred"] == 2 and m["mrr"] == 1.0 and m["recall@5"] == pytest.approx(2 / 3)
    # A duplicate must not push a later file out of the top k.
    assert acc_at_k(["x.py", "./x.py", "a.py"], ["a.py"], 2) == 1.0
    assert mrr(["x.py", "/testbed/x.py", "a.py"], ["a.py"]) == 0.5


def test_unnormalised_paths_on_both_sides():
    pred = ["/workspace/django__django__3.0/django/db/x.py:10", "/testbed/django/db/y.py", "django\\db\\z.py"]
    gold = ["'django/db/y.py:3'", "./django/db/z.py"]
    assert dedupe(pred) == ["django/db/x.py", "django/db/y.py", "django/db/z.py"]
    assert precision_recall(pred, gold) == (pytest.approx(2 / 3), 1.0)
    assert acc_at_k(pred, gold, 1) == 0.0 and acc_at_k(pred, gold, 2) == 1.0
    assert recall_at_k(pred, gold, 2) == 0.5 and mrr(pred, gold) == 0.5
    assert normalize_path("'/testbed/src/m.py:3:7'") == "src/m.py"
    assert normalize_path("/home/u/p/src/x.py", repo_root="/home/u/p/") == "src/x.py"
    # a '..' climbs over a directory, never over another '..' (it was '../../x.py' -> 'x.py', inside the repository)
    assert normalize_path("../../x.py") == "../../x.py" and normalize_path("pkg/sub/../../../x.py") == "../x.py"
    # a leading a/ or b/ is a directory (git's diff prefixes are the patch parser's business)
    assert dedupe(["a/x.go", "x.go", "b/y.go"]) == ["a/x.go", "x.go", "b/y.go"]


def test_f_beta_formula():
    # (1 + b^2) P R / (b^2 P + R) with P = 0.6, R = 0.3
    assert f_beta(0.6, 0.3, 1.0) == pytest.approx(0.4)
    assert f_beta(0.6, 0.3, 0.5) == pytest.approx(1.25 * 0.18 / (0.25 * 0.6 + 0.3))
    assert f_beta(0.6, 0.3, 2.0) == pytest.approx(5 * 0.18 / (4 * 0.6 + 0.3))
    assert f_beta(0.0, 1.0) == 0.0


def test_k_larger_than_prediction_and_empty_gold():
    assert recall_at_k(["a.py"], ["a.py", "b.py"], 10) == 0.5
    assert acc_at_k(["a.py"], [], 5) == 0.0 and recall_at_k(["a.py"], [], 5) == 0.0
    assert precision_recall(["a.py"], []) == (0.0, 0.0)


def test_bootstrap_interval_matches_the_normal_approximation():
    x = [0.0, 1.0] * 100  # mean 0.5, standard error sqrt(0.25 / 200) ~= 0.0354
    mean, lo, hi = bootstrap_ci(x, n_boot=4000, seed=0)
    assert mean == 0.5
    assert lo == pytest.approx(0.5 - 1.96 * 0.0354, abs=0.012) and hi == pytest.approx(0.5 + 1.96 * 0.0354, abs=0.012)
    assert bootstrap_ci(x, seed=3) == bootstrap_ci(x, seed=3)  # seeded: reproducible
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    assert bootstrap_ci([0.7]) == (0.7, 0.7, 0.7)


def test_paired_bootstrap_diff():
    rng = np.random.default_rng(0)
    a = rng.random(300)
    mean, lo, hi = paired_bootstrap_diff(a, a + 0.1)
    assert (mean, lo, hi) == (pytest.approx(0.1), pytest.approx(0.1), pytest.approx(0.1))
    mean, lo, hi = paired_bootstrap_diff(a, a + rng.normal(0.05, 0.1, 300))
    assert lo < mean < hi and lo > 0
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_diff([1.0], [1.0, 2.0, 3.0])  # must not broadcast silently


def test_macro_average_with_intervals():
    rows = [instance_metrics(["a.py"], ["a.py"]), instance_metrics([], ["a.py"]), instance_metrics(["b.py", "a.py"],
                                                                                                  ["a.py"])]
    avg = macro_average(rows)
    assert avg["n"] == 3 and avg["acc@1"] == pytest.approx(1 / 3) and avg["mrr"] == pytest.approx(0.5)
    assert avg["precision"] == pytest.approx((1 + 0 + 0.5) / 3) and avg["n_pred"] == pytest.approx(1.0)
    ci = macro_average(rows, keys=["mrr"], with_ci=True)
    assert set(ci) == {"n", "mrr", "mrr_lo", "mrr_hi"} and ci["mrr_lo"] <= ci["mrr"] <= ci["mrr_hi"]
    assert macro_average([]) == {"n": 0}
