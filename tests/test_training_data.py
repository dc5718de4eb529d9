"""Training data for issue 20: recorded runs -> demonstrations (conversion, fidelity), manifests vs the
evaluation split, episode limits from the profile. Real shipped runs, real snapshots; no model is trained."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from codegrep.agent.protocol import AgentConfig, parse_tool_calls
from codegrep.env.tools import ToolCall, ToolConfig
from codegrep.mining import run_converter

OBS = "<returncode>{rc}</returncode>\n<output>\n{out}\n</output>"


def obs(out: str, rc: int = 0) -> str:
    return OBS.format(rc=rc, out=out)


def test_grep_output_is_reshaped_like_the_live_tool():
    call, out, cut = run_converter.convert_command(
        "cd /testbed && grep -rn 'class Foo' pkg/",
        obs("/testbed/pkg/z.py:3:class Foo2:\n./pkg/a/b.py:10:class Foo:\npkg/a.py:1:class FooBar:"))
    assert call == ToolCall("grep", {"pattern": "class Foo", "path": "pkg"})
    # ripgrep's --sort=path walks directories in name order: pkg/a/ before pkg/a.py
    assert out.splitlines() == ["pkg/a/b.py:10:class Foo:", "pkg/a.py:1:class FooBar:", "pkg/z.py:3:class Foo2:"]
    assert not cut
    # a single-file grep has no path column: the live tool's has one
    _, out, _ = run_converter.convert_command("grep -n 'def f' pkg/a.py", obs("4:def f():"))
    assert out == "pkg/a.py:4:def f():"
    # grep exit status 1 = no match
    assert run_converter.convert_command("grep -rn nothing pkg", obs("", rc=1))[1] == "No matches found."


def test_grep_caps_and_notes_like_the_live_tool():
    lines = "\n".join(f"pkg/m.py:{i}:x" for i in range(1, 301))
    _, out, cut = run_converter.convert_command("grep -rn x pkg", obs(lines), tools=ToolConfig(max_output_lines=5))
    assert cut and out.splitlines()[:5] == [f"pkg/m.py:{i}:x" for i in range(1, 6)]
    assert out.splitlines()[-1].startswith("[... truncated: showing 5 of 300 lines")
    _, out, cut = run_converter.convert_command("grep -rn x pkg | head -3", obs("a.py:1:x\na.py:2:x\na.py:3:x"))
    assert cut and "more than 3" in out  # head stopped it: the count is a lower bound


def test_grep_flags_become_arguments():
    call, _, _ = run_converter.convert_command("grep -rni --include=*.py 'def f(' pkg", obs("pkg/a.py:1:def f():"))
    assert call.arguments == {"pattern": "def f\\(", "path": "pkg", "include": "*.py", "ignore_case": True}
    call, _, _ = run_converter.convert_command("grep -rnF 'a.b(' pkg", obs("pkg/a.py:1:a.b("))
    assert call.arguments["pattern"] == "a\\.b\\("
    call, _, _ = run_converter.convert_command("grep -rnE 'x|y' pkg", obs("pkg/a.py:1:x"))
    assert call.arguments["pattern"] == "x|y"


def test_reads_are_numbered_from_their_start_line_and_keep_nl_numbers():
    call, out, cut = run_converter.convert_command("nl -ba pkg/a.py | sed -n '7,8p'", obs("     7\tx = 1\n     8\ty = 2"))
    assert call.arguments == {"path": "pkg/a.py", "start_line": 7, "end_line": 8}
    assert out.splitlines() == ["     7\tx = 1", "     8\ty = 2"] and not cut
    call, out, _ = run_converter.convert_command("cat pkg/a.py", obs("a\nb"))
    assert call.arguments == {"path": "pkg/a.py"} and out.splitlines() == ["     1\ta", "     2\tb"]
    long = "\n".join(f"line {i}" for i in range(300))
    _, out, cut = run_converter.convert_command("cat pkg/a.py", obs(long), tools=ToolConfig(max_read_lines=10))
    assert cut and "showing lines 1-10 of 300 in pkg/a.py" in out.splitlines()[-1]


@pytest.mark.parametrize("command,reason", [
    ("python reproduce.py", "not-exploration"),
    ("sed -i 's/a/b/' pkg/a.py", "edit-not-converted"),
    ("grep -rn x pkg | wc -l", "filtered-output"),
    ("nl -ba pkg/a.py | grep -C 3 foo", "view-filtered"),
    ("sed -n '/def f/,/return/p' pkg/a.py", "view-filtered"),
    ("grep -l foo pkg/a.py", "grep-output-flags"),
    ("grep -n foo pkg/*.py", "shell-glob-path"),
    ("grep -rn -C 3 foo pkg", "grep-context"),
    ("grep -r foo pkg", "grep-without-line-numbers"),
    ("find . -type f -not -path '*/.git/*'", "find-not-a-name-glob"),
    ("cat a.py > b.py", "compound-command"),
    ("ls pkg", "list-not-converted"),
])
def test_what_is_not_pure_exploration_is_not_converted(command, reason):
    call, why, _ = run_converter.convert_command(command, obs("pkg/a.py:1:foo"))
    assert call is None and why == reason


def test_turns_group_in_parallel_and_split_on_dependencies():
    g = run_converter.Converted(0, "", ToolCall("grep", {"pattern": "x"}), "pkg/a.py:1:x", False)
    h = run_converter.Converted(1, "", ToolCall("glob", {"pattern": "**/b.py"}), "pkg/b.py", False)
    r = run_converter.Converted(2, "", ToolCall("read", {"path": "pkg/a.py"}), "     1\tx", False)
    turns = run_converter.group_turns([g, h, r], max_turns=3, per_turn=8)
    assert [[c.call.name for c in t] for t in turns] == [["grep", "glob"], ["read"]]
    many = [run_converter.Converted(i, "", ToolCall("grep", {"pattern": f"p{i}"}), "", False) for i in range(30)]
    turns = run_converter.group_turns(many, max_turns=3, per_turn=4)
    assert len(turns) <= 3 and all(len(t) <= 4 for t in turns)


def test_shipped_runs_become_parseable_demonstrations_without_evaluation_instances():
    from codegrep.data.shipped import trajectory_dirs

    agent = AgentConfig(max_turns=4, max_calls_per_turn=8, max_observation_tokens=256)
    small = trajectory_dirs()[0]  # the 15-run folder: fast
    everything, _ = run_converter.recorded_demonstrations([small], agent)
    assert everything, "no demonstration from the shipped runs"
    banned = {everything[0]["instance_id"]}
    demos, stats = run_converter.recorded_demonstrations([small], agent, exclude=banned)
    assert stats.runs_excluded_eval == 1 and banned.isdisjoint(d["instance_id"] for d in demos)
    assert len(demos) == len(everything) - 1
    for d in demos:
        msgs = d["messages"]
        assert [m["role"] for m in msgs[:2]] == ["system", "user"] and msgs[-1]["role"] == "assistant"
        assert parse_tool_calls(msgs[-1]["content"]).submit == d["targets"][: agent.max_submit_files]
        turns = [m for m in msgs[2:-1] if m["role"] == "assistant"]
        assert 1 <= len(turns) <= agent.max_turns - 1
        for t in turns:
            parsed = parse_tool_calls(t["content"])
            assert not parsed.errors and 1 <= len(parsed.calls) <= agent.max_calls_per_turn
        budget = agent.max_observation_tokens * 4
        for m in msgs[3:-1:2]:  # observations: each call's share of the budget plus its header and note
            assert m["content"].count("<tool_response>") >= 1 and len(m["content"]) < budget + 2000
    assert stats.to_dict()["commands_converted"] > 0


def test_replayed_conversions_match_the_live_tools_on_real_snapshots():
    """Fidelity, measured: sympy runs replayed on the shipped snapshot at their base commit."""
    from codegrep.data.repos import RepoResolver
    from codegrep.data.shipped import snapshot_repos_dir, trajectory_dirs, verified_rows_path
    from codegrep.data.tasks import read_tasks

    tasks, _ = read_tasks(str(verified_rows_path()))
    sympy = [p for p in run_converter.run_files(trajectory_dirs()) if p.name.startswith("sympy__")][:10]
    frame = run_converter.replay_fidelity(sympy, RepoResolver(repos_dir=snapshot_repos_dir(), offline=True),
                                    {t.instance_id: t for t in tasks})
    summary = run_converter.fidelity_summary(frame).set_index("tool")
    assert summary.loc["all", "calls"] >= 5
    assert summary.loc["all", "recall"] > 0.7, summary  # most recorded lines are what the live tool shows


def test_episode_limits_come_from_the_profile_and_overrides_are_reported():
    from codegrep.config import load_profile
    from codegrep.rl.training_run import episode_config

    cfg = load_profile("smoke")
    cg = SimpleNamespace(max_turns=None, max_calls_per_turn=None, max_observation_tokens=None, max_issue_chars=None)
    agent, record = episode_config(cfg, cg)
    assert agent.max_turns == cfg["agent"]["max_turns"] and agent.max_calls_per_turn == cfg["agent"]["max_calls_per_turn"]
    assert agent.max_observation_tokens == cfg["agent"]["max_observation_tokens"] and record["training_overrides"] == {}
    cg.max_turns = 2
    agent, record = episode_config(cfg, cg)
    assert agent.max_turns == 2 and record["training_overrides"] == {"max_turns": 2}
    assert record["profile"]["max_turns"] == cfg["agent"]["max_turns"]


def test_manifest_refuses_an_evaluation_instance(tmp_path):
    from codegrep.rl.training_run import write_manifest

    demos = [{"source": "recorded", "instance_id": "a__b-1"}]
    path = write_manifest(tmp_path, demos, ["t-1"], {"e-1"})
    assert json.loads(path.read_text())["overlap"] == []
    with pytest.raises(ValueError, match="evaluation instance"):
        write_manifest(tmp_path, demos, ["e-1"], {"e-1"})
    with pytest.raises(ValueError, match="evaluation instance"):
        write_manifest(tmp_path, demos, ["t-1"], {"a__b-1"})


@pytest.mark.parametrize("profile", ["ci", "smoke"])
def test_training_inputs_never_hold_an_evaluation_instance(profile):
    """The ids a run would train on (recorded demonstrations + GRPO prompts) against the evaluation split."""
    from codegrep.config import load_profile
    from codegrep.data.tasks import evaluation_instance_ids, profile_tasks
    from codegrep.rl.training_run import episode_config, train_arguments
    from codegrep.rl.demos import recorded_demonstrations

    cfg = load_profile(profile)
    cg, _ = train_arguments(cfg)
    evaluation = set(evaluation_instance_ids(cfg))
    assert evaluation, "the evaluation split is empty"
    train, _ = profile_tasks(cfg, split="train", limit=cg.train_tasks)
    agent, _ = episode_config(cfg, cg)
    demos = recorded_demonstrations(cg, cfg, agent, evaluation)
    assert demos and train
    assert evaluation.isdisjoint(t.instance_id for t in train)
    assert evaluation.isdisjoint(d["instance_id"] for d in demos)
