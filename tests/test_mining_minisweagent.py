"""The one mini-swe-agent reader on both shapes: real 1.x runs (shipped) and 2.x runs made by the installed
mini-swe-agent package itself (its DefaultAgent, LocalEnvironment and tool-call parsing; only the model's
replies are scripted, the way the package's own tests script them)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from codegrep.data.shipped import trajectory_dirs
from codegrep.mining.formats import detect_format, minisweagent as msa, parse_row
from conftest import commit_all


def _shipped() -> list[Path]:
    files = [f for d in trajectory_dirs() for f in sorted(d.glob("*.traj.json.gz"))]
    assert len(files) == 400, "the shipped real runs are missing (data/trajectories)"
    return files


def test_real_1x_runs_usage_and_steps_agree_with_the_recorded_totals():
    files = _shipped()
    for f in files[::20]:
        row = msa.load(f)
        run = msa.read(row, str(f))
        assert run.version == 1 and run.instance_id == f.name.split(".traj")[0]
        assert run.rounds == row["info"]["model_stats"]["api_calls"] == len(run.steps)
        assert run.cost == pytest.approx(row["info"]["model_stats"]["instance_cost"])
        calls = [m for m in row["messages"] if m["role"] == "assistant"]
        assert run.prompt_tokens == sum(m["extra"]["response"]["usage"]["prompt_tokens"] for m in calls)
        assert run.completion_tokens == sum(m["extra"]["response"]["usage"]["completion_tokens"] for m in calls)
        assert run.submission == row["info"]["submission"] and run.problem_statement
        for s in run.steps:  # a step ran a command iff its text has exactly one bash block
            blocks = msa._ACTION.findall(row["messages"][s.message]["content"])
            assert s.commands == ([blocks[0].strip()] if len(blocks) == 1 else [])
            assert s.observation == row["messages"][s.message + 1]["content"]


def test_real_1x_format_error_runs_nothing():
    row = {"trajectory_format": "mini-swe-agent-1", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "```bash\nls\n```\n```bash\npwd\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action"}], "info": {}}
    run = msa.read(row)
    assert run.steps[0].format_error and run.steps[0].commands == [] and run.actions == []
    assert run.steps[0].observation.startswith("Please") and run.tokens is None and run.cost is None


def _toolcall_model():
    """A model with the real LitellmModel's message shapes (tool calls, usage in ``extra.response``,
    ``extra.cost``, the package's FormatError) whose replies are scripted."""
    from minisweagent.exceptions import FormatError
    from minisweagent.models.test_models import DeterministicToolcallModel
    from minisweagent.models.utils.actions_toolcall import parse_toolcall_actions

    class Scripted(DeterministicToolcallModel):
        def query(self, messages, **kwargs):
            self.current_index += 1
            calls = self.config.outputs[self.current_index]["calls"]
            usage = {"prompt_tokens": 100 * (self.current_index + 1), "completion_tokens": 7, "total_tokens": 0}
            response = {"choices": [{"finish_reason": "tool_calls"}], "usage": usage}
            objs = [SimpleNamespace(id=f"call_{self.current_index}_{i}",
                                    function=SimpleNamespace(name="bash", arguments=json.dumps({"command": c})))
                    for i, c in enumerate(calls)]
            try:
                actions = parse_toolcall_actions(objs, format_error_template="{{ error }}")
            except FormatError as e:
                e.messages[0]["extra"].update({"cost": 0.25, "response": response})
                raise
            return {"role": "assistant", "content": "thinking",
                    "tool_calls": [{"id": o.id, "type": "function", "function": {"name": "bash",
                                                                                 "arguments": o.function.arguments}}
                                   for o in objs],
                    "extra": {"actions": actions, "response": response, "cost": 0.25}}

    return Scripted


@pytest.fixture(scope="module")
def run_2x(tmp_path_factory) -> dict:
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_from_spec
    from minisweagent.environments.local import LocalEnvironment

    work = tmp_path_factory.mktemp("repo")
    commit_all(work, {"pkg/a.py": "x = 1\n"}, message="x")
    script = [{"calls": ["grep -rn 'x =' pkg", "cat pkg/a.py"]},  # two tool calls in one turn
              {"calls": []},  # a FormatError: billed, nothing ran
              {"calls": ["sed -i 's/1/2/' pkg/a.py"]},
              {"calls": ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]}]
    cfg = get_config_from_spec("swebench.yaml")["agent"]
    cfg.update(cost_limit=0, step_limit=10)
    agent = DefaultAgent(_toolcall_model()(outputs=script), LocalEnvironment(cwd=str(work)), **cfg)
    agent.run("Fix x in pkg/a.py")
    data = agent.serialize({"instance_id": "demo__demo-1", "info": {"config": {"environment": {"cwd": str(work)}}}})
    return json.loads(json.dumps(data))


def test_real_2x_toolcall_run(run_2x):
    assert run_2x["trajectory_format"] != "mini-swe-agent-1"
    assert detect_format(run_2x) == msa.NAME
    run = msa.read(run_2x)
    assert run.version == 2 and run.instance_id == "demo__demo-1"
    assert [s.commands for s in run.steps] == [["grep -rn 'x =' pkg", "cat pkg/a.py"], [],
                                                ["sed -i 's/1/2/' pkg/a.py"],
                                                ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]]
    assert [s.format_error for s in run.steps] == [False, True, False, False]
    assert run.rounds == run_2x["info"]["model_stats"]["api_calls"] == 4
    assert run.usage == [(100, 7), (200, 7), (300, 7), (400, 7)]
    assert (run.prompt_tokens, run.completion_tokens, run.tokens) == (1000, 28, 1028)
    assert run.cost == pytest.approx(run_2x["info"]["model_stats"]["instance_cost"]) == pytest.approx(1.0)
    assert len(run.steps[0].observations) == 2 and "x = 1" in run.steps[0].observations[1]
    assert run.exit_status == "Submitted" and "pkg/a.py" in run.submission
    assert run.problem_statement == "Fix x in pkg/a.py"
    traj = parse_row(run_2x, source="x.traj.json")
    assert [(e.kind, e.path) for e in traj.events if e.kind != "run"] == [
        ("search", "pkg"), ("view", "pkg/a.py"), ("edit", "pkg/a.py")]
    assert traj.n_steps == 3 and traj.n_tokens == 1028


def test_2x_responses_api_items():
    row = {"trajectory_format": "mini-swe-agent-1.1", "instance_id": "a__b-2", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "task"},
        {"object": "response", "output": [{"type": "message", "content": [{"type": "output_text", "text": "hm"}]}],
         "extra": {"actions": [{"command": "cat a.py", "tool_call_id": "r1"}], "cost": 0.5,
                   "response": {"usage": {"input_tokens": 9, "output_tokens": 2}}}},
        {"type": "function_call_output", "call_id": "r1", "output": "<output>1</output>"}], "info": {}}
    run = msa.read(row)
    assert run.steps[0].commands == ["cat a.py"] and run.steps[0].thought == "hm"
    assert run.steps[0].observation == "<output>1</output>" and run.usage == [(9, 2)] and run.cost == 0.5


def test_wrong_shape_names_the_source():
    with pytest.raises(ValueError, match="x.json: 'messages' must be a list"):
        msa.read({"trajectory_format": "mini-swe-agent-1", "messages": "oops"}, "x.json")



def test_no_second_reader_of_mini_swe_agent_runs():
    """Usage arithmetic (``extra.response.usage``) and the action regex live in the one reader only."""
    import re

    own = Path(msa.__file__).resolve()
    pattern = re.compile(r"""get\(["']response["']\)|\["response"\]|```bash\\\\s""")
    offenders = [str(p) for p in own.parents[2].rglob("*.py") if p != own and pattern.search(p.read_text())]
    assert offenders == []


def test_a_runs_own_action_regex_is_honoured():
    row = {"trajectory_format": "mini-swe-agent-1", "info": {"config": {"agent": {
        "action_regex": r"```mswea_bash_command\s*\n(.*?)\n```"}}}, "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "```mswea_bash_command\ncat pkg/a.py\n```"},
        {"role": "user", "content": "ok"}]}
    assert msa.read(row).steps[0].commands == ["cat pkg/a.py"]
    row["info"] = {}
    assert msa.read(row).steps[0].commands == [] and msa.read(row).steps[0].format_error
