"""Real downstream agents up to what this machine allows: configs loaded by the real packages, real
recorded outputs parsed, and mini-swe-agent's real agent loop run end to end against a local
OpenAI-compatible server that replays a scripted conversation (no LLM, no Docker)."""
from __future__ import annotations

import gzip
import json
import subprocess
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from codegrep.data.swebench_report import load_report, resolved
from codegrep.data.tasks import Task
from codegrep.downstream.agents import candidate_hint, hinted_problem_statement
from codegrep.mining.inputs import embedded_dir

EMBEDDED = embedded_dir() / "mini-swe-agent"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


def _load(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def _embedded_runs():
    files = sorted(EMBEDDED.glob("*.traj.json.gz"))
    if not files:
        pytest.fail(f"shipped package data missing: no mini-swe-agent trajectories in {EMBEDDED}")
    return [(f, _load(f), _load(f.with_name(f.name.replace(".traj.json", ".report.json")))) for f in files]


def test_swebench_reports_resolve_with_the_harness_grading():
    runs = _embedded_runs()
    verdicts = {traj["instance_id"]: resolved(rep, traj["instance_id"]) for _, traj, rep in runs}
    assert len(verdicts) == 15 and set(verdicts.values()) == {True, False}
    assert verdicts["django__django-15280"] is False and verdicts["django__django-13023"] is True
    bad = dict(runs[0][2], resolved=not runs[0][2]["resolved"])
    with pytest.raises(ValueError, match="disagrees"):
        resolved(bad, runs[0][1]["instance_id"])


def test_mini_swe_agent_parses_every_real_trajectory():
    from codegrep.downstream.mini_swe_agent import result_from_trajectory
    from codegrep.mining.formats.minisweagent import read

    for path, traj, report in _embedded_runs():
        res = result_from_trajectory(traj, report, path=str(path))
        usage = read(traj).usage
        assert res.rounds == traj["info"]["model_stats"]["api_calls"] == len(usage)
        assert res.prompt_tokens == sum(p for p, _ in usage) > 0
        assert res.resolved is report["resolved"]
        assert res.extra["viewed_files"] and res.extra["patch"].startswith("diff --git")


def test_mini_swe_agent_config_loads_in_the_package_classes(tmp_path):
    from codegrep.downstream.mini_swe_agent import MiniSweAgentConfig, build_config, validate_config

    task = Task("o__r-1", "o/r", "c" * 40, "The bug.", gold_files=["pkg/a.py"])
    cfg = MiniSweAgentConfig(api_base="http://127.0.0.1:9/v1", step_limit=7)
    config = build_config(task, ["pkg/a.py", "pkg/b.py"], tmp_path, cfg)
    agent, env, model = validate_config(config)
    assert agent.step_limit == 7 and env.cwd == str(tmp_path) and model.model_kwargs["api_base"].endswith("/v1")
    assert config["task"] == hinted_problem_statement("The bug.", ["pkg/a.py", "pkg/b.py"])
    assert "/testbed" not in agent.instance_template and "```bash" in agent.system_template
    assert build_config(task, None, tmp_path, cfg)["task"] == "The bug."


class _Scripted(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint answering with the next scripted assistant message."""

    script: list[str] = []
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        n = len(type(self).requests)
        text = type(self).script[min(n, len(type(self).script)) - 1]
        reply = {"id": f"r{n}", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": 100 * n, "completion_tokens": 10, "total_tokens": 100 * n + 10}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class _Resolver:
    def __init__(self, git_dir: Path):
        self.git_dir = git_dir

    def resolve(self, repo: str, commit: str) -> Path:
        return self.git_dir


def test_mini_swe_agent_runs_end_to_end_against_a_local_endpoint(tmp_path, monkeypatch):
    from codegrep.downstream.mini_swe_agent import MiniSweAgent, MiniSweAgentConfig

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    commit = git("rev-parse", "HEAD").stdout.strip()
    _Scripted.requests = []
    _Scripted.script = ["THOUGHT: read it\n\n```bash\ncat pkg/a.py\n```",
                        "THOUGHT: fix\n\n```bash\nsed -i 's/return 1/return 2/' pkg/a.py\n```",
                        "THOUGHT: done\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```"]
    server = HTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    try:
        cfg = MiniSweAgentConfig(api_base=f"http://127.0.0.1:{server.server_port}/v1", step_limit=6,
                                 output_dir=str(tmp_path / "out"))
        task = Task("o__r-1", "o/r", commit, "f() should return 2.", gold_files=["pkg/a.py"])
        res = MiniSweAgent(cfg, resolver=_Resolver(repo)).run(task, ["pkg/a.py"])
    finally:
        server.shutdown()
    assert res.rounds == 3 and res.prompt_tokens == 600 and res.completion_tokens == 30
    assert res.extra["exit_status"] == "Submitted" and "return 2" in res.extra["patch"]
    assert res.extra["viewed_files"] == ["pkg/a.py"] and res.resolved is None  # no harness here
    first_user = _Scripted.requests[0]["messages"][1]["content"]
    assert candidate_hint(["pkg/a.py"]) in first_user
    pred = json.loads((tmp_path / "out" / "hint" / "predictions.jsonl").read_text())
    assert pred["instance_id"] == "o__r-1" and "return 2" in pred["model_patch"]
    assert (repo / "pkg" / "a.py").read_text().endswith("return 1\n")  # the agent worked in its own worktree


def _openhands_rows() -> list[dict]:
    """The real SWE-Gym OpenHands trajectories (messages form) converted to ``output.jsonl`` rows with
    OpenHands' documented event schema (one action event per tool call, one observation per result)."""
    src = embedded_dir() / "format-samples" / "adp_SWE-Gym_OpenHands-Sampled-Trajectories.sample_raw.json.gz"
    if not src.is_file():
        pytest.fail(f"shipped package data missing: {src}")
    out = []
    for raw in _load(src):
        history, eid = [], 0
        for turn, m in enumerate(raw["messages"]):
            if m["role"] == "user" and not history:
                history.append({"id": eid, "source": "user", "action": "message", "args": {"content": m["content"]}})
            for call in (m.get("tool_calls") or []) if m["role"] == "assistant" else []:
                eid += 1
                name, args = call["function"]["name"], json.loads(call["function"]["arguments"] or "{}")
                kind = {"execute_bash": "run", "finish": "finish"}.get(name) or (
                    "read" if args.get("command") == "view" else "edit")
                history.append({"id": eid, "source": "agent", "action": kind, "args": args,
                                "tool_call_metadata": {"function_name": name, "tool_call_id": call["id"],
                                                       "model_response": {"id": f"resp-{turn}"}}})
            if m["role"] == "tool":
                eid += 1
                history.append({"id": eid, "source": "agent", "observation": "run", "content": m["content"]})
        out.append({"instance_id": raw["instance_id"], "history": history, "metrics": None,
                    "instance": {"instance_id": raw["instance_id"], "repo": "x/y"},
                    "test_result": {"git_patch": raw["test_result"].get("git_patch", "")}, "_resolved": raw["resolved"],
                    "_turns": sum(1 for m in raw["messages"] if m["role"] == "assistant" and m.get("tool_calls"))})
    return out


def test_openhands_output_rows_from_real_trajectories(tmp_path):
    from codegrep.downstream.openhands import predictions, results_from_output

    rows = _openhands_rows()
    out = tmp_path / "output.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = {"resolved_ids": [r["instance_id"].rsplit("_", 1)[0] for r in rows if r["_resolved"]],
              "unresolved_ids": [r["instance_id"].rsplit("_", 1)[0] for r in rows if not r["_resolved"]]}
    results = results_from_output(out, report)
    assert [r.rounds for r in results] == [r["_turns"] for r in rows]
    assert all(r.resolved is True for r in results)  # all five sample rows were accepted by the harness
    assert all(r.extra["viewed_files"] for r in results) and not any(r.extra["tokens_known"] for r in results)
    assert predictions(rows)[0]["model_patch"].startswith("diff --git")


def test_openhands_token_metrics_follow_the_documented_schema():
    from codegrep.downstream.openhands import result_from_output_row

    row = {"instance_id": "a__b-1", "history": [], "metrics": {"accumulated_token_usage": {
        "prompt_tokens": 1200, "completion_tokens": 80}, "token_usages": [{"prompt_tokens": 1, "completion_tokens": 1}]}}
    res = result_from_output_row(row)
    assert (res.prompt_tokens, res.completion_tokens, res.extra["tokens_known"]) == (1200, 80, True)


def test_openhands_run_layout(tmp_path):
    from codegrep.downstream.openhands import OpenHandsConfig, write_openhands_run

    full = {"version": "3.0", "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "environment_setup_commit": "e" * 40,
            "test_patch": "diff"}
    task = Task("o__r-1", "o/r", "c" * 40, "The bug.", gold_files=["a.py"], extra=full)
    cfg = OpenHandsConfig(run_dir=str(tmp_path), base_url="http://127.0.0.1:8000/v1", max_iterations=30)
    run = write_openhands_run([task], {"o__r-1": ["a.py"]}, cfg, "hint")
    row = json.loads(run.dataset_file.read_text())
    assert row["problem_statement"] == hinted_problem_statement("The bug.", ["a.py"]) and row["version"] == "3.0"
    toml = tomllib.loads(run.config_file.read_text())
    assert toml["llm"]["codegrep_eval"]["base_url"].endswith("/v1") and toml["core"]["max_iterations"] == 30
    assert "--max-iterations" in run.infer_command and run.script.read_text().startswith("#!/usr/bin/env bash")
    with pytest.raises(ValueError, match="missing"):
        write_openhands_run([Task("o__r-2", "o/r", "c" * 40, "x", gold_files=["a.py"])], None, cfg, "base")


def test_shared_reports_match_embedded_copies():
    shared = SHARED / "mini-swe-agent"
    if not shared.is_dir():
        pytest.skip("../shared is absent")
    for f in sorted(shared.glob("*.report.json")):
        iid = f.name.split(".report")[0]
        assert resolved(load_report(f), iid) == _load(EMBEDDED / f"{f.name}.gz")["resolved"]


def test_importing_litellm_through_codegrep_never_fetches_the_price_list():
    """litellm downloads its model price list at import unless LITELLM_LOCAL_MODEL_COST_MAP is set; ``import
    codegrep`` sets it, so a worker that reaches mini-swe-agent's litellm model first still stays offline (a CI run
    in two processes showed the download being tried, and failing, when only one code path set it)."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    code = ("import os, codegrep, minisweagent.models.litellm_textbased_model; "
            "print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True"
    assert "cost map" not in done.stderr + done.stdout, done.stderr[-2000:]  # offline: a try logs its failure
