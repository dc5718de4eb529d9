"""The observational estimator, the threshold bracket, and the per-retriever table on the same instances."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from codegrep.downstream.observational import (fit_effects, run_features, validate_by_repository, window_features)
from codegrep.downstream.replay import ReplayParams, Step, Trace
from codegrep.downstream.threshold import (ThresholdConfig, binomial_weights, bracket, bracket_verdict, hint_grid,
                                           retriever_outcomes, retriever_summary, threshold_of)

PARAMS = ReplayParams(read_completion=7, read_added=40, chars_per_token=4.0)


def _synthetic_feats(n: int, w_effect: float, h_effect: float, seed: int = 0) -> pd.DataFrame:
    """Run features with planted effects of W and H on the after-window outcomes (a known truth to recover)."""
    rng = np.random.default_rng(seed)
    repo = rng.choice(["a/a", "b/b", "c/c", "d/d"], n)
    W = rng.poisson(0.8, n)
    H = (rng.random(n) < 0.6).astype(int)
    n_gold = rng.integers(1, 3, n)
    issue = rng.normal(7, 0.5, n)
    rounds_after = 20 + w_effect * W + h_effect * H + 2 * n_gold + rng.normal(0, 2, n)
    logit = 1.0 - 0.5 * W + 0.8 * H
    return pd.DataFrame({"instance_id": [f"i{i}" for i in range(n)], "repo": repo, "W": W, "H": H,
                         "n_gold": n_gold, "log_issue_chars": issue, "rounds_after": np.maximum(rounds_after, 1),
                         "log_tokens_after": 12 + 0.1 * W - 0.2 * H + rng.normal(0, 0.3, n),
                         "resolved": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)})


def test_fit_recovers_planted_effects():
    f = _synthetic_feats(3000, 4.0, -6.0)
    eff = fit_effects(f, min_repo_runs=5)
    assert eff.effect("rounds_after", "W") == pytest.approx(4.0, abs=0.3)
    assert eff.effect("rounds_after", "H") == pytest.approx(-6.0, abs=0.3)
    assert eff.effect("log_tokens_after", "H") == pytest.approx(-0.2, abs=0.05)
    assert eff.effect("resolved", "W") == pytest.approx(-0.5, abs=0.15)
    assert eff.effect("resolved", "H") == pytest.approx(0.8, abs=0.2)


def test_held_out_validation_sees_skill_only_where_there_is_some():
    skilled = validate_by_repository(_synthetic_feats(800, 8.0, -10.0), min_repo_runs=5)
    noise = validate_by_repository(_synthetic_feats(800, 0.0, 0.0).assign(
        rounds_after=lambda d: np.random.default_rng(1).normal(20, 5, len(d))), min_repo_runs=5)
    rounds = lambda v: v[v.outcome == "rounds_after"]  # noqa: E731
    assert (rounds(skilled)["skill"] > 0.3).all()
    assert (rounds(noise)["skill"] < 0.05).all()  # no signal: no better than the mean


def test_window_is_capped_and_outcomes_are_after_it():
    steps = [Step(100, 5, 10, (f"x{i}.py",)) for i in range(6)] + [Step(200, 5, 10, ("a.py",)), Step(210, 5, 0, ())]
    t = Trace("o__r-1", "o/r", False, ["a.py"], steps, issue_chars=100)
    f = window_features(t, 4)
    assert (f["window"], f["W"], f["H"], f["rounds_after"], f["reached"]) == (4, 4, 0, 4, False)
    f = window_features(t, 10)
    assert (f["window"], f["W"], f["rounds_after"], f["reached"]) == (6, 6, 2, True)
    assert f["tokens_after"] == 205 + 215


def test_binomial_expectation_and_threshold_direction():
    assert binomial_weights([0.0, 1.0], 3).tolist() == [[1, 0, 0, 0], [0, 0, 0, 1]]
    p = [0.0, 0.5, 1.0]
    assert threshold_of(p, [0.2, 0.0, -0.2], "tokens") == pytest.approx(0.5)
    assert threshold_of(p, [-0.2, 0.0, 0.2], "resolve") == pytest.approx(0.5)  # resolve: favourable when rising
    assert math.isnan(threshold_of(p, [0.0, 0.0, 0.0], "resolve"))
    assert bracket_verdict(float("nan"), 0.3, 0.7) == "not measured"


def _toy_traces(n: int = 24) -> list[Trace]:
    """Runs that search 3 steps (viewing wrong files) before the gold file, then work 4 steps."""
    out = []
    for i in range(n):
        wander = i % 3
        steps = ([Step(100 + 30 * j, 5, 30, (f"pkg/w{j}.py",), True) for j in range(wander)]
                 + [Step(200, 5, 20, (), True), Step(220, 5, 60, ("pkg/gold.py",))]
                 + [Step(300 + 10 * j, 8, 10, (), False, True) for j in range(4 + 3 * wander)])
        out.append(Trace(f"o__r-{i}", "o/r" if i % 2 else "p/q", i % 3 != 2, ["pkg/gold.py"], steps,
                         observed_paths=["pkg/d1.py", "pkg/d2.py", "pkg/d3.py"], issue_chars=300 + 10 * i))
    return out


def test_bracket_on_toy_runs_orders_the_two_thresholds():
    traces = _toy_traces()
    br = bracket(traces, PARAMS, ThresholdConfig(grid=11, draws=2, n_boot=40, window_cap=10, min_repo_runs=2))
    rep, obs = br.threshold("replay"), br.threshold("observational")
    assert 0 < rep["threshold"] < 1 and rep["low"] <= rep["threshold"] <= rep["high"]
    assert math.isnan(obs["threshold"]) or 0 < obs["threshold"] <= 1
    c = br.curves[(br.curves.model == "replay") & (br.curves.metric == "tokens")]
    o = br.curves[(br.curves.model == "observational") & (br.curves.metric == "tokens")]
    assert c.change.iloc[0] > 0 > c.change.iloc[-1]  # all wrong costs, all right saves
    # in these runs wandering goes with longer work afterwards: the fit charges wrong files more than their read
    assert br.effects.effect("log_tokens_after", "W") > 0
    assert o.change.iloc[0] > c.change.iloc[0] and o.change.iloc[-1] < c.change.iloc[-1]
    assert (br.curves.low <= br.curves.change + 1e-9).all() or br.curves.low.isna().any()
    res = br.curves[(br.curves.model == "replay") & (br.curves.metric == "resolve")]
    assert (res.change == 0).all()  # the replay keeps every recorded verdict


def test_hint_grid_rows_and_deltas():
    traces = _toy_traces(6)
    feats = run_features(traces, 10)
    rows = hint_grid(traces, feats, PARAMS, 3, 1, seed=0)
    assert len(rows) == 6 * 4
    full = rows[rows.h == 3]
    assert (full.n_hits == 1).all() and (full.n_candidates == 1).all()  # hits capped at the single gold file
    assert (full.dW == -feats["W"].to_numpy()).all()  # a clean hint ends the wandering
    none = rows[rows.h == 0]
    assert (none.dW >= 0).all() and (none.n_hits == 0).all()


def test_retriever_table_uses_only_its_own_instances():
    traces = _toy_traces()
    br = bracket(traces, PARAMS, ThresholdConfig(grid=5, draws=1, n_boot=20, min_repo_runs=2))
    gold = {t.instance_id: ["pkg/gold.py"] for t in traces[:8]}
    gold["not__replayed-1"] = ["x.py"]  # an instance without a recorded run is not transplanted anywhere
    rows = retriever_outcomes(traces, br.feats, PARAMS, gold)
    assert len(rows) == 8 and set(rows.instance_id) == {t.instance_id for t in traces[:8]}
    good = retriever_summary(rows, br)
    bad = retriever_summary(retriever_outcomes(traces, br.feats, PARAMS,
                                               {t.instance_id: ["pkg/zz1.py", "pkg/zz2.py"] for t in traces[:8]}), br)
    assert good["n"] == 8 and good["precision"] == 1.0 and good["tokens_change"] < 0 < bad["tokens_change"]
    assert good["rounds_change_lo"] <= good["rounds_change"] <= good["rounds_change_hi"]
    assert retriever_summary(rows.iloc[:0], br)["n"] == 0


def test_threshold_config_rejects_unknown_keys():
    assert ThresholdConfig.from_section({"set_size": 2}, seed=3).seed == 3
    with pytest.raises(ValueError, match="window_cp"):
        ThresholdConfig.from_section({"window_cp": 3})


def test_shipped_runs_give_a_bracket():
    """On the 400 real runs shipped in data/: both thresholds inside [0, 1] with ordered intervals."""
    from codegrep.data.shipped import trajectory_dirs
    from codegrep.downstream.replay import measure_params
    from codegrep.downstream.traces import load_traces

    if not all(d.is_dir() for d in trajectory_dirs()):
        pytest.skip("data/trajectories not present")
    traces = load_traces({"trajectories": ["shipped"], "gold_tasks": ["verified"]})
    assert len(traces) == 400 and len({t.instance_id for t in traces}) == 400
    br = bracket(traces, measure_params(traces), ThresholdConfig(grid=11, draws=1, n_boot=30))
    rep = br.threshold("replay")
    assert 0 < rep["threshold"] < 1 and rep["low"] <= rep["threshold"] <= rep["high"]
    obs = br.threshold("observational")
    if not math.isnan(obs["threshold"]):
        assert obs["threshold"] > rep["threshold"]


def test_headlines_hold_the_bracket_and_say_why_a_number_is_empty(tmp_path):
    from codegrep.artifacts import Outputs
    from codegrep.downstream import stages

    traces = _toy_traces()
    out = Outputs(tmp_path / "a", tmp_path / "f")
    setup = stages.ReplaySetup(traces, PARAMS, PARAMS)
    cfg = {"seed": 0, "downstream": {"threshold": {"grid": 5, "draws": 1, "n_boot": 20, "min_repo_runs": 2},
                                     "primary": "agent"}}
    st = stages.bracket_stage(cfg, out, setup)
    results = {"oracle": pd.DataFrame([{"instance_id": t.instance_id, "files": ["pkg/gold.py"]} for t in traces[:6]])}
    table = stages.retriever_table(cfg, out, setup, st["bracket"], results, "05")
    n05 = stages.threshold_headline(st, table, None)
    assert n05["paper_threshold_interval"] == [0.445, 0.677]
    for key in ("threshold_replay", "threshold_replay_lo", "threshold_replay_hi", "threshold_observational",
                "threshold_observational_lo", "threshold_observational_hi", "precision_oracle", "p_at_1_bm25"):
        assert key in n05
    n06 = stages.downstream_headline(cfg, table, st)
    assert n06["n_instances"] == 6 and n06["instance_source"] == "other"  # toy ids are not SWE-bench Verified
    for numbers in (n05, n06):
        sources, reasons = stages.headline_labels(numbers)
        empty = [k for k, v in numbers.items() if v is None or (isinstance(v, float) and v != v)]
        assert empty and all(k in reasons for k in empty)  # e.g. the dense retriever was not evaluated here
        assert sources["threshold_replay"] == "model" and sources["threshold_observational"] == "fit"
    assert "oracle" in stages.bracket_conclusion(st, table) and "Token threshold bracket" in stages.bracket_conclusion(st, table)


def test_instance_effects_absorb_what_repeated_runs_share():
    """Several runs per instance: an instance-level confounder that drives both W and the outcome is absorbed."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(150):
        hard = rng.normal(0, 3)  # unobserved difficulty: more wandering and a longer run afterwards
        for r in range(3):
            W = max(int(round(1 + 0.5 * hard + rng.normal(0, 1))), 0)
            rows.append({"instance_id": f"i{i}", "repo": "a/a", "W": W, "H": int(rng.random() < 0.5), "n_gold": 1,
                         "log_issue_chars": 7.0, "rounds_after": 30 + 1.0 * W + 4 * hard + rng.normal(0, 1),
                         "log_tokens_after": 12.0, "resolved": int(rng.random() < 0.7)})
    f = pd.DataFrame(rows)
    eff = fit_effects(f, min_repo_runs=1)
    assert len(eff.instances) == 150
    assert eff.effect("rounds_after", "W") == pytest.approx(1.0, abs=0.2)  # pooled OLS would give ~5
