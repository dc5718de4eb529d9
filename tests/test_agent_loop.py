"""The episode loop with the scripted policy on a real temporary git repository and the real tool environment."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codegrep import TRAJECTORY_FORMAT
from codegrep.agent.loop import load_episode, run_episode, run_episodes
from codegrep.agent.policies import ScriptedPolicy, make_policy
from codegrep.agent.protocol import AgentConfig
from codegrep.env.tools import RepoToolEnvironment
from conftest import commit_all


def block(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    commit_all(root, {"pkg/config.py": "def parse_config(text):\n    return text.strip()\n",
                          "pkg/cli.py": "from pkg.config import parse_config\n\nprint(parse_config(' x '))\n",
                          "README.md": "# demo\n" + "filler line\n" * 400})
    return root


@pytest.fixture()
def env(repo: Path):
    environment = RepoToolEnvironment(repo)
    yield environment
    environment.close()


SCRIPT = [
    "Searching.\n" + block("grep", pattern="parse_config") + "\n" + block("glob", pattern="**/*.py"),
    "not a tool call",
    block("read", path="pkg/config.py") + block("submit", files=["./pkg/config.py", "pkg/cli.py", "pkg/config.py"]),
]


def test_scripted_episode_runs_real_tools_and_saves_a_versioned_record(env, tmp_path):
    out = tmp_path / "ep.json"
    ep = run_episode("parse_config crashes on None", env, ScriptedPolicy(SCRIPT), AgentConfig(), save_to=out)
    assert ep.files == ["pkg/config.py", "pkg/cli.py"] and ep.submitted and ep.error is None
    assert ep.rounds == 3 and ep.tool_calls == 2 and ep.format_errors == 1
    observation = ep.messages[3]["content"]
    assert "pkg/config.py:1:def parse_config(text):" in observation and "pkg/cli.py" in observation
    assert observation.endswith("Turn 2 of 4.")
    assert "Format error: no <tool_call> found" in ep.messages[5]["content"]
    assert all(c["ok"] and c["latency_ms"] > 0 for c in ep.turns[0].calls)
    record = load_episode(out)
    assert record["format"] == TRAJECTORY_FORMAT and record["files"] == ep.files
    assert record["config"]["max_turns"] == 4 and record["policy"]["kind"] == "scripted"
    assert record["tokens"] == sum(t["prompt_tokens"] + t["completion_tokens"] for t in record["turns"]) > 0
    timings = record["timings"]
    assert timings["total_s"] >= timings["model_s"] + timings["tool_s"]


def test_never_submitting_returns_no_files_and_stops_at_the_turn_cap(env):
    policy = ScriptedPolicy([block("glob", pattern="*.md")] * 10)
    ep = run_episode("issue", env, policy, AgentConfig(max_turns=3))
    assert ep.files == [] and not ep.submitted and ep.rounds == 3
    assert ep.tool_calls == 2  # the last turn's calls are not run: it was the turn to answer
    assert ep.messages[-1]["role"] == "assistant"
    assert "last turn, call submit now" in ep.messages[-2]["content"]


def test_calls_over_the_cap_are_dropped_and_counted(env):
    many = "".join(block("glob", pattern=f"*{i}*") for i in range(5))
    ep = run_episode("issue", env, ScriptedPolicy([many, block("submit", files=["a.py"])]),
                     AgentConfig(max_calls_per_turn=2))
    assert ep.tool_calls == 2 and ep.format_errors == 1
    assert "3 calls over the limit of 2" in ep.messages[3]["content"]


def test_observations_are_truncated_to_the_budget(env):
    ep = run_episode("issue", env, ScriptedPolicy([block("read", path="README.md", end_line=400), ""]),
                     AgentConfig(max_observation_tokens=50))
    observation = ep.messages[3]["content"]
    assert "more lines truncated" in observation and len(observation) < 50 * 4 + 200  # cut after a whole line
    assert ep.turns[0].calls[0]["ok"]


def test_bad_tool_arguments_reach_the_model_as_errors(env):
    ep = run_episode("issue", env, ScriptedPolicy([block("read", path="../../etc/passwd"), ""]))
    assert ep.turns[0].calls[0]["ok"] is False
    assert "ERROR:" in ep.messages[3]["content"]


class ExplodingPolicy(ScriptedPolicy):
    def generate(self, batch):
        if any(m["role"] == "assistant" for m in batch[0]):
            raise RuntimeError("GPU fell off the bus")
        return super().generate(batch)


def test_a_crash_mid_episode_still_leaves_the_record(env, tmp_path):
    out = tmp_path / "crash.json"
    with pytest.raises(RuntimeError, match="fell off"):
        run_episode("issue", env, ExplodingPolicy([block("glob", pattern="*.py")]), save_to=out)
    record = load_episode(out)
    assert record["error"] == "RuntimeError: GPU fell off the bus"
    assert record["rounds"] == 1 and record["tool_calls"] == 1 and record["files"] == []


def test_batched_episodes_share_generate_calls_and_keep_their_own_scripts(repo, tmp_path):
    class CountingPolicy(ScriptedPolicy):
        batch_sizes: list[int] = []

        def generate(self, batch):
            self.batch_sizes.append(len(batch))
            return super().generate(batch)

    scripts = [[block("submit", files=["pkg/cli.py"])],
               [block("grep", pattern="strip"), block("submit", files=["pkg/config.py"])],
               ["junk", "junk", "junk", "junk"]]
    envs = [RepoToolEnvironment(repo) for _ in scripts]
    policy = CountingPolicy(scripts)
    episodes = run_episodes([("same issue", e) for e in envs], policy, AgentConfig(), save_dir=tmp_path / "eps",
                            ids=["a", "b", "c"])
    for e in envs:
        e.close()
    assert [ep.files for ep in episodes] == [["pkg/cli.py"], ["pkg/config.py"], []]
    assert policy.batch_sizes == [3, 2, 1, 1]
    assert sorted(p.name for p in (tmp_path / "eps").iterdir()) == ["a.json", "b.json", "c.json"]
    assert load_episode(tmp_path / "eps" / "c.json")["format_errors"] == 4


def test_make_policy_reads_the_profile_section():
    from codegrep.config import load_profile, section

    spec = section(load_profile("ci"), "agent")
    assert spec["policy"] == "hf" and spec["model"] == "smollm2"
    assert AgentConfig.from_dict(spec).max_turns == spec["max_turns"]
    assert make_policy({"policy": "scripted", "outputs": ["x"]}).generate([[]]) == ["x"]
    with pytest.raises(ValueError, match="endpoint"):
        make_policy({"policy": "openai"})
