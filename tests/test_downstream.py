"""The replay cost model, the precision sweep, paired statistics and the ``codegrep downstream`` CLI."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from codegrep.downstream.agents import candidate_hint
from codegrep.downstream.replay import ReplayParams, Step, Trace, replay
from codegrep.downstream.agent_runs import mcnemar, paired_compare, relative_change
from codegrep.downstream.threshold import crossing_point, synthetic_candidates


def _toy() -> Trace:
    # 4 steps: search (adds 50), search (adds 30), view gold (adds 100), edit; prompts grow by what was added
    steps = [Step(100, 5, 50, (), True), Step(150, 5, 30, ("x.py",), True), Step(180, 5, 100, ("a.py",)),
             Step(280, 5, 0, ())]
    return Trace("o__r-1", "o/r", True, ["a.py"], steps, observed_paths=["y.py"], chars_per_token=4.0)


PARAMS = ReplayParams(read_completion=7, read_added=40, chars_per_token=4.0)


def test_replay_without_candidates_is_the_recording():
    t = _toy()
    r = replay(t, None, PARAMS)
    assert (r.rounds, r.prompt_tokens, r.completion_tokens, r.resolved) == (4, 710, 20, True)


def test_a_correct_candidate_removes_the_search_before_the_first_target_view():
    t = _toy()
    r = replay(t, ["a.py"], PARAMS)
    hint = round(len(candidate_hint(["a.py"])) / 4)
    assert r.rounds == 2 and r.extra["steps_removed"] == 2 and r.extra["reads_added"] == 0
    # kept prompts shrink by the 80 tokens the two removed steps had added, and grow by the hint
    assert r.prompt_tokens == (180 - 80 + hint) + (280 - 80 + hint)


def test_wrong_candidates_cost_a_read_unless_viewed_anyway():
    t = _toy()
    unseen = replay(t, ["z.py"], PARAMS)
    assert unseen.rounds == 5 and unseen.extra["reads_added"] == 1 and unseen.extra["precision"] == 0.0
    assert unseen.tokens > replay(t, None, PARAMS).tokens + 4 * 40  # the read stays in every later prompt
    seen = replay(t, ["x.py"], PARAMS)  # no hit, so the step that views x.py is kept: no extra read
    assert seen.rounds == 4 and seen.extra["reads_added"] == 0
    never = replay(t, ["z.py"], ReplayParams(**{**PARAMS.__dict__, "wrong_read_prob": 0.0}))
    assert never.rounds == 4


def test_steps_that_run_code_before_the_target_view_are_kept():
    t = _toy()
    t.steps[1].acted = True  # e.g. it ran a reproduction script while viewing x.py
    r = replay(t, ["a.py"], PARAMS)
    assert r.rounds == 3 and r.extra["steps_removed"] == 1


def test_misleading_hints_flip_resolution_only_when_stated():
    t = _toy()
    assert replay(t, ["z.py"], PARAMS).resolved is True
    flip = ReplayParams(**{**PARAMS.__dict__, "misleading_unresolve_prob": 1.0})
    assert replay(t, ["z.py"], flip).resolved is False and replay(t, ["a.py", "z.py"], flip).resolved is True
    with pytest.raises(ValueError, match="unknown"):
        PARAMS.with_overrides({"nope": 1})


def test_synthetic_candidates_cap_hits_at_the_gold_count():
    t = Trace("i", "o/r", True, ["a.py", "b.py"], [])
    rng = np.random.default_rng(0)
    c = synthetic_candidates(t, 3, 3, ["x.py", "y.py", "z.py"], rng)
    assert sorted(c) == ["a.py", "b.py"]  # 3 correct slots, 2 gold files: the third slot cannot be filled
    c = synthetic_candidates(t, 1, 3, ["x.py", "y.py", "z.py"], rng)
    assert len(c) == 3 and sum(f in t.gold for f in c) == 1


def test_crossing_point_interpolates():
    assert crossing_point([0, 0.5, 1], [0.4, 0.2, -0.2]) == pytest.approx(0.75)
    assert math.isnan(crossing_point([0, 1], [-0.1, -0.2]))


@pytest.fixture(scope="module")
def real_traces():
    from codegrep.downstream.traces import load_traces

    traces = load_traces({"trajectories": ["embedded"], "gold_tasks": ["embedded"]})
    assert len(traces) == 15
    return traces


def test_replay_sources_given_as_one_string_are_one_source(tmp_path, monkeypatch):
    """``--set downstream.replay.trajectories=runs`` (one path: a string, not a list) was iterated character by
    character ('r', 'u', ...; an absolute path began with '/': a walk of the whole file system, /proc included)."""
    import shutil

    from codegrep.downstream.traces import load_traces
    from codegrep.mining.inputs import embedded_dir

    (tmp_path / "runs").mkdir()
    for name in ("psf__requests-5414.traj.json.gz", "psf__requests-5414.report.json.gz"):
        shutil.copy(embedded_dir() / "mini-swe-agent" / name, tmp_path / "runs" / name)
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"instance_id": "psf__requests-5414",
                                                      "gold_files": ["requests/models.py"]}) + "\n")
    monkeypatch.chdir(tmp_path)
    traces = load_traces({"trajectories": "runs", "gold_tasks": "tasks.jsonl"})
    assert [t.instance_id for t in traces] == ["psf__requests-5414"] and traces[0].gold == ["requests/models.py"]


def test_replay_over_two_runs_of_one_instance_is_refused(tmp_path):
    """Two different recorded runs of one instance (run1/, run2/ under one source) were taken silently, the last
    found; a copy of one run in two places (gzipped and not) still counts once."""
    import gzip
    import shutil

    import pytest

    from codegrep.downstream.traces import load_traces
    from codegrep.errors import UserError
    from codegrep.mining.inputs import embedded_dir

    iid = "psf__requests-5414"
    for run in ("run1", "run2"):
        (tmp_path / "runs" / run).mkdir(parents=True)
        shutil.copy(embedded_dir() / "mini-swe-agent" / f"{iid}.report.json.gz", tmp_path / "runs" / run)
    traj = json.loads(gzip.decompress((embedded_dir() / "mini-swe-agent" / f"{iid}.traj.json.gz").read_bytes()))
    traj.pop("instance_id", None)  # the single-run command stores none: the id is the file name's
    (tmp_path / "runs" / "run1" / f"{iid}.traj.json.gz").write_bytes(gzip.compress(json.dumps(traj).encode()))
    (tmp_path / "runs" / "run2" / f"{iid}.traj.json").write_text(json.dumps(traj))
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"instance_id": iid, "gold_files": ["requests/models.py"]}))
    cfg = {"trajectories": [str(tmp_path / "runs")], "gold_tasks": [str(tmp_path / "tasks.jsonl")]}
    assert [t.instance_id for t in load_traces(cfg)] == [iid]
    traj["messages"] = traj["messages"][:-2]  # another run of the same instance
    (tmp_path / "runs" / "run2" / f"{iid}.traj.json").write_text(json.dumps(traj))
    with pytest.raises(UserError, match=f"two recorded runs of {iid} .*run1.*run2"):
        load_traces(cfg)


def test_real_traces_are_measured(real_traces):
    from codegrep.downstream.replay import measure_params

    p = measure_params(real_traces)
    assert 0 < p.read_completion < 1000 and 100 < p.read_added < 5000 and 2 < p.chars_per_token < 6
    for t in real_traces:
        assert replay(t, None, p).tokens == t.tokens  # the recording is reproduced exactly
        first = t.first_target_step()
        removable = sum(s.search_only for s in t.steps[:first])
        assert first is not None and replay(t, t.gold, p).rounds == t.rounds - removable
        assert t.issue_chars and t.issue_chars > 20


def test_paired_statistics():
    from codegrep.downstream.agents import DownstreamResult

    base = [DownstreamResult(f"i{i}", "x", i % 2 == 0, 10, 100, 0) for i in range(6)]
    hint = [DownstreamResult(f"i{i}", "x", True, 8, 80, 0, candidate_files=[]) for i in range(6)]
    c = paired_compare(base, hint)
    assert c["n_pairs"] == 6 and c["mcnemar"] == mcnemar([r.resolved for r in base], [True] * 6)
    assert c["rounds"]["change"] == pytest.approx(-0.2) and c["tokens_resolved"]["n"] == 3
    assert relative_change([], [])["n"] == 0


def test_cli_replay_with_and_without_candidates(tmp_path, capsys):
    from codegrep.cli import main

    base_out, hint_out, cands = tmp_path / "base.jsonl", tmp_path / "hint.jsonl", tmp_path / "c.jsonl"
    assert main(["downstream", "--tasks", "mined", "--candidates", "none", "--agent", "replay",
                 "--out", str(base_out), "--profile", "ci", "--limit", "15"]) == 0
    base = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert base["n"] == 15 and base["source"] == "model" and not base["with_retrieval"]
    rows = [json.loads(x) for x in base_out.read_text().splitlines()]
    cands.write_text("".join(json.dumps({"instance_id": r["instance_id"], "files": ["no/such_file.py"]}) + "\n"
                             for r in rows))
    assert main(["downstream", "--tasks", "mined", "--candidates", str(cands), "--agent", "replay",
                 "--out", str(hint_out), "--profile", "ci", "--compare", str(base_out), "--limit", "15"]) == 0
    hint = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert hint["with_retrieval"] and hint["mean_rounds"] > base["mean_rounds"]  # wrong files only cost
    assert hint["paired"]["n_pairs"] == 15 and hint["paired"]["rounds"]["change"] > 0
    assert main(["downstream", "--tasks", "mined", "--candidates", str(tmp_path / "missing.jsonl"),
                 "--agent", "replay", "--out", str(hint_out), "--profile", "ci"]) == 2
