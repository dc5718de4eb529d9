"""The resolved profile is passed down into training as an object (issue 26): a notebook's override of an episode
limit reaches the episodes training plays, the in-process arguments equal the command line's (TrlParser), and
``codegrep train --config PROFILE`` trains that profile whatever its train YAML's ``profile`` key says."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from codegrep.config import load_profile, notebook_profile, project_root
from codegrep.rl import training_run


def _same(a, b) -> bool:
    return asdict(a.codegrep) == asdict(b.codegrep) and a.grpo.to_dict() == b.grpo.to_dict()


@pytest.mark.parametrize("profile", ["ci", "smoke"])
def test_in_process_arguments_equal_the_command_lines(profile):
    cfg = load_profile(profile)
    yaml_path = training_run.profile_train_yaml(cfg)
    assert _same(training_run.train_arguments(cfg), training_run.parse_train_args(yaml_path, {"profile": cfg["profile"]}))
    over = {"seed": 2, "efficiency_layer": "reward", "lambda_grid": [0.1, 0.2], "train_task_ids": ["a", "b"],
            "save_final_model": False, "save_strategy": "no", "kl_probe_every": 2, "max_turns": 2}
    assert _same(training_run.train_arguments(cfg, over), training_run.parse_train_args(yaml_path, {**over, "profile": cfg["profile"]}))
    for other in ("study", "mechanism"):  # the ablation's and the study's train YAMLs, on the profile they name
        path = project_root() / "configs" / "train" / f"{other}.yaml"
        assert _same(training_run.train_arguments(cfg, {}, path), training_run.parse_train_args(path, {"profile": cfg["profile"]}))


def test_a_notebook_override_of_an_episode_limit_reaches_the_training_episode():
    """Notebook-style overrides (``notebook_profile``, as a parameters cell applies them) of ``agent.max_turns`` and
    ``agent.max_calls_per_turn``: the rollouts GRPO plays use them, and config.json's record says so."""
    base = load_profile("smoke")
    cfg = notebook_profile("smoke", {"agent.max_turns": base["agent"]["max_turns"] + 2, "agent.max_calls_per_turn": 3})
    args = training_run.train_arguments(cfg)
    inputs = training_run.training_inputs(cfg, args.codegrep)
    rollout = training_run.rollout_runner(inputs, *args)
    assert rollout.agent.max_turns == base["agent"]["max_turns"] + 2 and rollout.agent.max_calls_per_turn == 3
    assert inputs.episode["used"]["max_turns"] == rollout.agent.max_turns and inputs.episode["training_overrides"] == {}
    assert rollout.cost_scales[0] == rollout.agent.max_turns  # the efficiency budget follows the same limit
    # a training-only override set from the notebook (train.*) wins over agent: for training, and is recorded
    cfg = notebook_profile("smoke", {"agent.max_calls_per_turn": 3, "train.max_turns": 2})
    args = training_run.train_arguments(cfg)
    inputs = training_run.training_inputs(cfg, args.codegrep)
    rollout = training_run.rollout_runner(inputs, *args)
    assert (rollout.agent.max_turns, rollout.agent.max_calls_per_turn) == (2, 3)
    assert inputs.episode["training_overrides"] == {"max_turns": 2}
    assert inputs.episode["profile"]["max_turns"] == base["agent"]["max_turns"]


def test_train_command_trains_the_profile_it_is_given(tmp_path, monkeypatch):
    """A profile YAML whose train.config names configs/train/ci.yaml (which says ``profile: ci``): the run is that
    profile's (its agent section reaches training); a train YAML given directly names its profile."""
    seen = {}
    monkeypatch.setattr(training_run, "train", lambda cfg, args: seen.update(cfg=cfg, args=args) or tmp_path)
    mine = yaml.safe_load((project_root() / "configs" / "ci.yaml").read_text())
    mine["profile"] = "mine"
    mine["agent"]["max_calls_per_turn"] = 5
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(mine))
    training_run.train_command(str(path), {"seed": 4})
    assert Path(seen["cfg"]["_source"]) == path and seen["cfg"]["agent"]["max_calls_per_turn"] == 5
    assert seen["args"].codegrep.profile == "mine" and seen["args"].grpo.seed == 4
    assert seen["args"].codegrep.run_name(4) == "mine-advantage-lam0.1-s4"
    training_run.train_command(str(project_root() / "configs" / "train" / "ci.yaml"))
    assert seen["cfg"]["profile"] == "ci" and seen["cfg"]["agent"]["max_calls_per_turn"] != 5


@pytest.mark.parametrize("profile", ["ci", "smoke", "paper"])
def test_every_episode_limit_is_defined_by_the_profile(profile):
    """One place defines each episode limit: every shipped profile's agent: section sets all of them, so
    ``AgentConfig``'s defaults never decide an episode; a train YAML may only override them for training
    (recorded in config.json), and never sets ``demo_max_turns`` (derived by the ablation)."""
    from codegrep.rl.training_run import EPISODE_KEYS

    cfg = load_profile(profile)
    assert set(EPISODE_KEYS) <= set(cfg["agent"]), sorted(set(EPISODE_KEYS) - set(cfg["agent"]))
    for path in (project_root() / "configs" / "train").glob("*.yaml"):
        assert "demo_max_turns" not in yaml.safe_load(path.read_text()), path.name


def _fake_run(run_dir: Path, cfg, args, with_inputs: bool = True) -> Path:
    import json

    run_dir.mkdir(parents=True)
    record = {"codegrep": asdict(args.codegrep), "grpo": args.grpo.to_dict()}
    if with_inputs:
        record["profile_inputs"] = training_run.profile_inputs(cfg, args.codegrep)
    (run_dir / "config.json").write_text(json.dumps(record, default=str))
    (run_dir / "done.json").write_text(json.dumps({"seconds": 1.0, "steps": 2}))
    return run_dir


def test_a_finished_run_is_reused_only_for_the_same_profile_inputs(tmp_path):
    """A notebook's override of the profile (here agent.max_calls_per_turn) must not reuse a run trained without it:
    the main run and the ablation's arms retrain; a changed train setting too; a run recorded before the profile
    inputs were kept is compared on its settings only."""
    cfg = load_profile("ci")
    args = training_run.train_arguments(cfg)
    run = _fake_run(tmp_path / "r", cfg, args)
    assert training_run.finished_with(run, *args, cfg)
    changed = notebook_profile("ci", {"agent.max_calls_per_turn": 3})
    assert not training_run.finished_with(run, *training_run.train_arguments(changed), changed)
    assert not training_run.finished_with(run, *training_run.train_arguments(cfg, {"learning_rate": 1.0}), cfg)
    legacy = _fake_run(tmp_path / "legacy", cfg, args, with_inputs=False)
    assert training_run.finished_with(legacy, *training_run.train_arguments(changed), changed)


def test_cached_evaluation_rows_are_dropped_when_what_they_depend_on_changes(tmp_path):
    from codegrep.rl import training_stage as stage

    cfg = load_profile("ci")
    run = _fake_run(tmp_path / "train" / "ci-run", cfg, training_run.train_arguments(cfg))
    legacy = tmp_path / "train" / "eval" / "ci-run"
    legacy.mkdir(parents=True)
    (legacy / "GRPO.jsonl").write_text("{}\n")
    assert (stage.evaluation_dir(cfg, run, tmp_path) / "GRPO.jsonl").is_file()  # unstamped: stamped and kept
    assert (stage.evaluation_dir(cfg, run, tmp_path) / "GRPO.jsonl").is_file()  # same inputs: kept
    changed = notebook_profile("ci", {"agent.max_turns": 2})
    assert not (stage.evaluation_dir(changed, run, tmp_path) / "GRPO.jsonl").exists()  # the agent changed
    (legacy / "GRPO.jsonl").write_text("{}\n")
    (run / "done.json").write_text('{"seconds": 2.0, "steps": 2}')  # the run was trained again
    assert not (stage.evaluation_dir(changed, run, tmp_path) / "GRPO.jsonl").exists()


def test_ranked_line_numbers_read_each_policys_episode_records(tmp_path):
    """What bounds the agent (issue 27): shares over the episodes whose records exist, per policy."""
    import json

    from codegrep import TRAJECTORY_FORMAT
    from codegrep.rl.policy_rows import ranked_line_numbers

    def row(i, ranked, files, gold=("a.py",)):
        messages = [{"role": "system", "content": ""}, {"role": "user", "content": "Issue: a.py"},
                    {"role": "assistant", "content": "x"}]
        if ranked:
            messages.append({"role": "user", "content": "Files ranked by this turn's searches: " + ", ".join(ranked)})
        path = tmp_path / f"{i}.json"
        path.write_text(json.dumps({"format": TRAJECTORY_FORMAT, "messages": messages}))
        return {"instance_id": str(i), "gold": list(gold), "files": files, "extra": {"episode_path": str(path)}}

    rows = [row(0, ["a.py", "b.py"], ["a.py"]), row(1, ["b.py", "a.py"], ["b.py"]), row(2, [], ["c.py"]),
            row(3, ["c.py"], ["a.py"])]
    rows.append({"instance_id": "4", "gold": ["a.py"], "files": [], "extra": {}})  # no record: left out
    out = ranked_line_numbers({"GRPO": rows, "untrained": rows, "warm start": rows[1:2]})
    assert out == {"ranked_submit_first_grpo": 0.5, "ranked_gold_first_grpo": 0.25, "ranked_gold_listed_grpo": 0.5,
                   "ranked_held_gold_first_grpo": 0.25,  # held to the last line's first: a.py, b.py, (c.py), c.py
                   "ranked_submit_first_warm_start": 1.0, "ranked_gold_first_warm_start": 0.0,
                   "ranked_gold_listed_warm_start": 1.0, "ranked_held_gold_first_warm_start": 0.0}
    held = ranked_line_numbers({"GRPO": [row(5, ["b.py"], ["a.py"]), row(6, ["a.py"], ["b.py"]),
                                         row(7, [], ["a.py"])]})
    assert held["ranked_held_gold_first_grpo"] == 2 / 3  # lost one (b.py held), won one (a.py), none shown: own a.py
    assert ranked_line_numbers({"GRPO": [rows[-1]]}) == {}


def test_train_check_records_skipped_only_when_no_unused_task_is_left(tmp_path):
    """Notebook 03's training-task check says "skipped" when the run used every real train task, and only then: a
    run record with a part missing still stops the notebook with its one-line refusal (nothing swallowed)."""
    import json

    from codegrep.errors import UserError
    from codegrep.rl.curve import real_train_split
    from codegrep.rl.training_stage import train_check, train_check_note

    cfg = load_profile("ci")
    pool, _, _ = real_train_split(cfg, 0, 0)
    assert pool, "the ci profile has real train tasks"
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (tmp_path / "warm").mkdir()
    (run / "config.json").write_text(json.dumps({"initial_policy": str(tmp_path / "warm")}))
    (run / "manifest.json").write_text(json.dumps({"grpo_prompts": [t.instance_id for t in pool]}))
    check = train_check(cfg, run, tmp_path / "artifacts")
    assert "every real train task" in check["skipped"]
    assert train_check_note(check).startswith("training-task check not run: ")
    assert train_check(cfg, run, tmp_path / "artifacts", tasks=0) is None
    (run / "manifest.json").write_text(json.dumps({"grpo_prompts": [pool[0].instance_id]}))
    (run / "final").rmdir()  # a task is left, but the run has no GRPO policy: a refusal, not "skipped"
    with pytest.raises(UserError, match="no final"):
        train_check(cfg, run, tmp_path / "artifacts")
