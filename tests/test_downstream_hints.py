"""The randomized hint experiment: hint construction, plan, resume, failure records, analysis, and one end-to-end
run of the real command against a real local ``transformers serve`` process with the offline SmolLM2 model on two
real sympy snapshots. SmolLM2-135M resolves nothing: the live test proves the plumbing, not the model."""
from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from codegrep.data.tasks import Task
from codegrep.downstream.agents import DownstreamResult, candidate_hint
from codegrep.downstream.hints import (HintExperimentConfig, build_hint, make_plan, read_jsonl, run_experiment,
                                       summarize_hint_experiment)

from test_agent_endpoint import server  # noqa: E402,F401  (the live ``transformers serve`` fixture, one copy)

GOLD = ["pkg/a.py", "pkg/b.py"]
BAD = [f"pkg/d{i}.py" for i in range(10)]


@pytest.mark.parametrize("p,k", [(0.0, 4), (0.5, 4), (1.0, 4), (0.33, 3), (0.67, 3), (1.0, 1)])
def test_hint_has_the_asked_precision_and_no_duplicate(p, k):
    for seed in range(20):
        hint = build_hint(GOLD, BAD + GOLD, p, k, random.Random(seed))  # a gold file in the distractors is dropped
        n_gold = sum(f in GOLD for f in hint)
        assert len(set(hint)) == len(hint)
        assert n_gold == min(round(p * k), len(GOLD)) and len(hint) - n_gold == k - round(p * k)


def test_hint_assignment_is_random_but_recorded():
    tasks = [Task(f"o__r-{i}", "o/r", "c" * 40, "bug", gold_files=GOLD) for i in range(3)]
    cfg = HintExperimentConfig(precisions=[0.0, 0.5, 1.0], set_size=4, runs=2, seed=7)
    plan = make_plan(tasks, {t.instance_id: BAD for t in tasks}, cfg, "test")
    assert len(plan) == 3 * 2 * 4 and plan == make_plan(tasks, {t.instance_id: BAD for t in tasks}, cfg, "test")
    for row in plan:  # the recorded seed rebuilds the hint exactly
        if row["hint"] is not None:
            assert row["hint"] == build_hint(GOLD, BAD, row["precision"], 4, random.Random(row["seed"]))
    halves = [tuple(r["hint"]) for r in plan if r["arm"] == "p0.50"]
    assert len(set(halves)) > 1  # not the same files for every instance / run
    other = make_plan(tasks, {t.instance_id: BAD for t in tasks}, HintExperimentConfig(
        precisions=[0.0, 0.5, 1.0], set_size=4, runs=2, seed=8), "test")
    assert [r["hint"] for r in other] != [r["hint"] for r in plan]


class _Agent:
    """A stand-in agent whose cost depends on the hint (for the bookkeeping tests only)."""

    name = "stub"

    def __init__(self, fail_on: set[str] = frozenset()):
        self.calls, self.fail_on = [], set(fail_on)

    def run(self, task, files, label=None):
        self.calls.append((task.instance_id, label))
        if label in self.fail_on:
            raise RuntimeError("endpoint answered 500\ndetails")
        good = sum(f in task.gold_files for f in files or [])
        rounds = 10 - 3 * good + (2 if files and not good else 0)
        return DownstreamResult(task.instance_id, "stub", None, rounds, 100 * rounds, 5 * rounds,
                                extra={"patch": "", "viewed_files": list(files or [])[:1]})


def test_failed_runs_are_recorded_and_resume_skips_done_keys(tmp_path):
    tasks = [Task(f"o__r-{i}", "o/r", "c" * 40, "bug", gold_files=GOLD) for i in range(2)]
    cfg = HintExperimentConfig(precisions=[0.0, 1.0], set_size=2, verify=False)
    agent = _Agent(fail_on={"p0.00-r0"})
    rows = run_experiment(tasks, agent, cfg, tmp_path, {t.instance_id: BAD for t in tasks}, "test", progress=False)
    assert len(rows) == 6 and len(agent.calls) == 6
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) == 2 and failed[0]["reason"] == "RuntimeError: endpoint answered 500"
    again = _Agent()
    assert len(run_experiment(tasks, again, cfg, tmp_path, {}, "test", progress=False)) == 6 and not again.calls
    cfg.retry_failed = True
    rows = run_experiment(tasks, again, cfg, tmp_path, {}, "test", progress=False)
    assert sorted(again.calls) == [("o__r-0", "p0.00-r0"), ("o__r-1", "p0.00-r0")] and len(rows) == 8
    s = summarize_hint_experiment(tmp_path, n_boot=100)
    assert s["n_runs"] == 6 and s["n_failed"] == 0  # the latest attempt of each key counts
    with pytest.raises(ValueError, match="other settings"):
        run_experiment(tasks, _Agent(), HintExperimentConfig(precisions=[0.5], verify=False), tmp_path, {}, "test",
                       progress=False)


def test_resume_after_a_run_killed_mid_row_keeps_every_row(tmp_path):
    """A run killed while writing a row leaves a partial last line: the resumed run glued its first row to it, so
    that row was lost (ignored as the torn last line) or, with more rows after it, the file could not be read."""
    tasks = [Task(f"o__r-{i}", "o/r", "c" * 40, "bug", gold_files=GOLD) for i in range(2)]
    cfg = HintExperimentConfig(precisions=[1.0], set_size=2, verify=False)
    rows = run_experiment(tasks, _Agent(), cfg, tmp_path, {t.instance_id: BAD for t in tasks}, "test", progress=False)
    results = tmp_path / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:2]) + lines[2][:40])  # killed while writing the third row
    again = _Agent()
    rows = run_experiment(tasks, again, cfg, tmp_path, {}, "test", progress=False)
    assert len(again.calls) == 2 and len(rows) == 4 and len(read_jsonl(results)) == 4
    results.write_text(results.read_text().rstrip("\n"))  # a whole last row without its newline (hand-edited)
    third = _Agent()
    assert len(run_experiment(tasks, third, cfg, tmp_path, {}, "test", progress=False)) == 4 and not third.calls
    assert len(read_jsonl(results)) == 4


def test_summary_pairs_each_hinted_run_with_its_no_hint_run(tmp_path):
    tasks = [Task(f"o__r-{i}", "o/r", "c" * 40, "bug", gold_files=GOLD) for i in range(4)]
    cfg = HintExperimentConfig(precisions=[0.0, 0.5, 1.0], set_size=2, verify=False)
    run_experiment(tasks, _Agent(), cfg, tmp_path, {t.instance_id: BAD for t in tasks}, "test", progress=False)
    s = summarize_hint_experiment(tmp_path / "results.jsonl", n_boot=200)
    by = s["by_precision"].set_index("arm")
    assert list(by.index) == ["none", "p0.00", "p0.50", "p1.00"] and by.loc["none", "mean_rounds"] == 10
    paired = s["paired"].set_index("arm")
    assert list(paired["rounds_diff"]) == [2.0, -3.0, -6.0] and (paired["n_pairs"] == 4).all()
    # tokens change +20% at p=0, -30% at p=0.5: crosses zero at 0.2; every instance is alike, so no spread
    assert s["crossing"]["precision"] == pytest.approx(0.2) and s["crossing"]["low"] == pytest.approx(0.2)
    assert summarize_hint_experiment(tmp_path / "missing") is None and summarize_hint_experiment(None) is None


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    cmd = [sys.executable, "-m", "codegrep", "downstream", "--agent", "mini-swe-agent", "--tasks", "x.jsonl",
           "--out", str(tmp_path / "o"), "--profile", "ci"]
    for extra, needle in ((["--hint-precision", "0,2"], "--hint-precision"),
                          (["--hint-precision", "1", "--endpoint", "http://127.0.0.1:9/v1", "--repos",
                            str(tmp_path / "nope")], "--repos")):
        out = subprocess.run(cmd + extra, capture_output=True, text=True)
        assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------------------- live, real server

def _two_sympy_tasks(path: Path) -> list[str]:
    from codegrep.data.shipped import verified_rows_path

    src = verified_rows_path()
    if not src.is_file():
        pytest.skip(f"shipped SWE-bench rows absent: {src}")
    want = ["sympy__sympy-11618", "sympy__sympy-12096"]
    with gzip.open(src, "rt") as fh:
        rows = [r for r in map(json.loads, fh) if r["instance_id"] in want]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return want


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_hint_experiment_runs_end_to_end_against_a_live_server(server, tmp_path, monkeypatch):
    """2 sympy instances x (no hint, p=0, p=1), one model call each, BM25 distractors on the real snapshots."""
    from codegrep.data.shipped import snapshot_repos_dir

    base_url, _ = server
    ids = _two_sympy_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "exp"
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    cmd = [sys.executable, "-m", "codegrep", "downstream", "--agent", "mini-swe-agent", "--endpoint", base_url,
           "--tasks", str(tmp_path / "tasks.jsonl"), "--repos", str(snapshot_repos_dir()), "--hint-precision", "0,1",
           "--set-size", "2", "--runs", "1", "--out", str(out), "--profile", "ci", "--no-verify",
           "--set", "downstream.mini_swe_agent.step_limit=1", "--set", "downstream.mini_swe_agent.max_tokens=16"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=1100)
    assert first.returncode == 0, first.stderr[-2000:]
    plan, rows = read_jsonl(out / "plan.jsonl"), read_jsonl(out / "results.jsonl")
    assert len(plan) == len(rows) == 6 and {r["instance_id"] for r in rows} == set(ids)
    assert all(r["status"] == "ok" and r["rounds"] == 1 and r["prompt_tokens"] > 500 for r in rows), rows
    gold = {t["instance_id"]: t for t in map(json.loads, (tmp_path / "tasks.jsonl").read_text().splitlines())}
    for row in rows:
        traj = json.loads(Path(row["trajectory"]).read_text())
        first_user = next(m for m in traj["messages"] if m["role"] == "user")["content"]
        if row["hint"] is None:
            assert "<candidate_files>" not in first_user
        else:  # the hint block reaches the first message; p=1 hints hold gold files only, p=0 none
            assert candidate_hint(row["hint"]) in first_user
            n_gold = sum(f in gold[row["instance_id"]]["patch"] for f in row["hint"])
            assert n_gold == (len(row["hint"]) if row["precision"] == 1.0 else 0)
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["n_runs"] == 6 and summary["n_failed"] == 0
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)  # resumes: nothing left to run
    assert again.returncode == 0 and len(read_jsonl(out / "results.jsonl")) == 6
