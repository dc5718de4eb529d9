"""``agent_rows`` with ``agent.eval_processes``: the same batches dealt out to processes write the same rows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import commit_all

from codegrep.data.repos import RepoResolver
from codegrep.data.tasks import Task
from codegrep.rl.policy_rows import agent_rows


def _tiny_model(tmp_path: Path) -> Path:
    from codegrep.rl.tiny_policy import build_tiny_policy

    try:
        return build_tiny_policy(tmp_path / "models")
    except FileNotFoundError as exc:
        pytest.skip(f"SmolLM2 tokenizer not available: {exc}")


@pytest.fixture()
def setup(tmp_path: Path):
    sha = commit_all(tmp_path / "repos" / "o__r", {
        "pkg/config.py": "def parse_config(text):\n    return text.strip()\n",
        "pkg/cli.py": "from pkg.config import parse_config\nprint(parse_config(' x '))\n",
        "pkg/util.py": "def helper():\n    return 1\n"})
    tasks = [Task(f"o__r-{i}", "o/r", sha, "parse_config fails " + "on input " * (3 * i), gold_files=["pkg/config.py"])
             for i in range(6)]
    resolver = RepoResolver(repos_dir=tmp_path / "repos", mirror_dir=tmp_path / "mirrors", offline=True)
    cfg = {"agent": {"policy": "hf", "model": str(_tiny_model(tmp_path)), "device": "cpu", "batch_size": 2,
                     "cpu_threads": 1, "max_new_tokens": 12, "max_turns": 2, "prefix_cache_mb": 64},
           "env": {"mode": "worktree", "pool_root": str(tmp_path / "pool")}}
    return cfg, tasks, resolver


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_processes_write_the_rows_and_episodes_one_process_writes(setup, tmp_path):
    cfg, tasks, resolver = setup
    one = agent_rows(cfg, cfg["agent"]["model"], tasks, resolver, tmp_path / "one" / "rows.jsonl", progress=False)
    two_cfg = {**cfg, "agent": {**cfg["agent"], "eval_processes": 2}}
    two = agent_rows(two_cfg, cfg["agent"]["model"], tasks, resolver, tmp_path / "two" / "rows.jsonl", progress=False)
    key = lambda r: (r["instance_id"], r["files"], r["extra"]["rounds"] if "rounds" in r["extra"] else None)  # noqa: E731
    assert [key(r) for r in two] == [key(r) for r in one] and len(two) == 6
    # the file holds the rows in the one-process order (batch by batch), the parts are gone, every episode is saved
    assert [r["instance_id"] for r in _lines(tmp_path / "two" / "rows.jsonl")] == \
        [r["instance_id"] for r in _lines(tmp_path / "one" / "rows.jsonl")]
    assert not list((tmp_path / "two").glob("*.part*"))
    episodes = sorted(p.name for p in (tmp_path / "two" / "rows").glob("*.json"))
    assert episodes == sorted(p.name for p in (tmp_path / "one" / "rows").glob("*.json")) and len(episodes) == 6
    for a, b in zip(sorted((tmp_path / "one" / "rows").glob("*.json")), sorted((tmp_path / "two" / "rows").glob("*.json"))):
        assert json.loads(a.read_text())["messages"] == json.loads(b.read_text())["messages"]


def test_rows_a_stopped_parallel_run_left_in_its_parts_are_kept(setup, tmp_path):
    cfg, tasks, resolver = setup
    out = tmp_path / "rows.jsonl"
    row = {"instance_id": tasks[0].instance_id, "files": ["pkg/cli.py"], "extra": {}, "marker": "from the part"}
    (tmp_path / "rows.part1.jsonl").write_text(json.dumps(row) + "\n")
    rows = agent_rows(cfg, cfg["agent"]["model"], tasks[:2], resolver, out, progress=False)
    assert rows[0].get("marker") == "from the part" and "marker" not in rows[1]  # reused, not decoded again
    assert not (tmp_path / "rows.part1.jsonl").exists()
    assert [r["instance_id"] for r in _lines(out)] == [t.instance_id for t in tasks[:2]]


def test_the_train_check_caches_rows_per_env_as_well_as_per_agent(tmp_path, monkeypatch):
    """``bench policies`` / notebook 03's training-task check reuse cached rows only under the settings that made
    them. Its key held the agent section alone, so ``--set env.max_output_lines=1000`` (what the tools show) reused
    rows made at 200; it now keys on what notebook 03's evaluation cache keys on (agent, env, tasks, seed)."""
    from types import SimpleNamespace

    from codegrep.config import cli_profile
    from codegrep.rl import curve, policy_rows

    tasks = [SimpleNamespace(instance_id=f"o__r-{i}") for i in range(2)]
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    monkeypatch.setattr(curve, "run_record", lambda d: ({}, {}, run / "warm", run / "final"))
    monkeypatch.setattr(curve, "real_train_split", lambda cfg, dev, seed: (tasks, [], None))
    monkeypatch.setattr(curve, "expert_p_at_1", lambda tasks, resolver, cfg: [0.0] * len(tasks))
    written = []

    def rows(cfg, model, tasks, resolver, out, progress=True):
        written.append(out.parent)
        return [{"p@1": 0.0, "extra": {}} for _ in tasks]

    monkeypatch.setattr(policy_rows, "agent_rows", rows)
    for sets in ([], ["env.max_output_lines=1000"], [], ["agent.max_turns=2"]):
        curve.unused_train_check(cli_profile("ci", sets), run, tmp_path / "out")
    folders = written[::2]  # the warm start's of each call (the GRPO policy's is beside it)
    assert folders[0] == folders[2] and len({folders[0], folders[1], folders[3]}) == 3
