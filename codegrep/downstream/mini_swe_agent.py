"""mini-swe-agent (the pip package ``mini-swe-agent``) as a downstream agent, without Docker.

The run uses the package's own SWE-bench text-based config (``swebench_backticks.yaml``) with the
fence word set to ``bash`` (so trajectories have the ``mini-swe-agent-1`` shape the CATM parser
``codegrep.mining.formats.minisweagent`` reads), the ``local`` environment in a private git
worktree of the task's repository, and any OpenAI-compatible endpoint through litellm.
The agent executes shell commands on this machine inside that worktree: run it in a container or
a throw-away account if the model is untrusted. Resolution: ``codegrep verify`` judges a patch locally where
the instance allows it (``codegrep.downstream.verify``; the hint experiment calls it), else the Docker-based
swebench harness on the predictions file this writes (pass its report as ``report`` to fill ``resolved``).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from codegrep.data.gitcmd import detached_worktree
from codegrep.data.swebench_report import infra_failure, load_report, resolved as report_resolved
from codegrep.data.tasks import Task
from codegrep.downstream.agents import DownstreamResult, config_from_section, hinted_problem_statement
from codegrep.files import open_append

FENCE = "bash"  # the code-fence word the model must use; mini-swe-agent 1.x trajectories used it


@dataclass
class MiniSweAgentConfig:
    """Settings of a mini-swe-agent run (the ``downstream.mini_swe_agent`` block of a profile)."""

    model_name: str = "openai/local-model"
    """litellm model name; ``openai/<name>`` talks to any OpenAI-compatible server."""
    api_base: str | None = None
    """Base URL of the OpenAI-compatible endpoint (``--endpoint`` overrides it)."""
    temperature: float = field(default=0.0, metadata={"range": ">= 0"})
    """Sampling temperature passed to the endpoint."""
    step_limit: int = field(default=100, metadata={"range": ">= 1"})
    """Most model calls per instance (mini-swe-agent reads 0 or less as no limit: refused)."""
    cost_limit: float = field(default=0.0, metadata={"range": ">= 0"})
    """Dollar limit per instance (0 = none: local endpoints have no price)."""
    command_timeout: int = field(default=60, metadata={"range": ">= 1"})
    """Seconds one shell command may run."""
    base_config: str = "swebench_backticks.yaml"
    """mini-swe-agent built-in config whose prompts are used."""
    output_dir: str = "artifacts/downstream/mini-swe-agent"
    """Where trajectories and the swebench predictions file go."""
    max_tokens: int | None = None
    """Most completion tokens per model call (None = the endpoint's default)."""
    report: str | None = None
    """A swebench harness report (run or per-instance) to read resolution from."""
    repos_dir: str | None = None
    """Directory of ``owner__name`` git repositories (None = the data module's default resolver)."""


def _swap_fence(text: str) -> str:
    return text.replace("```mswea_bash_command", f"```{FENCE}")


def build_config(task: Task, candidate_files: Sequence[str] | None, checkout: Path,
                 cfg: MiniSweAgentConfig, output_path: Path | None = None) -> dict[str, Any]:
    """The merged mini-swe-agent config (agent / environment / model) for one run.

    The task text the agent gets is ``hinted_problem_statement`` (the issue, then the hint block);
    ``/testbed`` in the prompts becomes the local checkout.
    """
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    from minisweagent.config import get_config_from_spec

    base = get_config_from_spec(cfg.base_config)
    agent = {k: _swap_fence(v).replace("/testbed", str(checkout)) if isinstance(v, str) else v
             for k, v in base["agent"].items()}
    agent.update(step_limit=cfg.step_limit, cost_limit=cfg.cost_limit, agent_class="default",
                 output_path=str(output_path) if output_path else None)
    env = {k: v for k, v in base["environment"].items() if k != "interpreter"}
    env.update(environment_class="local", cwd=str(checkout), timeout=cfg.command_timeout)
    model = {k: _swap_fence(v) if isinstance(v, str) else v for k, v in base["model"].items()}
    kwargs = {"temperature": cfg.temperature, "drop_params": True}
    if cfg.api_base:
        kwargs["api_base"] = cfg.api_base
    if cfg.max_tokens:
        kwargs["max_tokens"] = int(cfg.max_tokens)
    model.update(model_name=cfg.model_name, model_class="litellm_textbased", cost_tracking="ignore_errors",
                 action_regex=rf"```{FENCE}\s*\n(.*?)\n```", model_kwargs=kwargs)
    return {"agent": agent, "environment": env, "model": model,
            "task": hinted_problem_statement(task.problem_statement, candidate_files)}


def validate_config(config: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Load the config into the package's own pydantic classes (raises on any invalid field)."""
    from minisweagent.agents.default import AgentConfig
    from minisweagent.environments.local import LocalEnvironmentConfig
    from minisweagent.models.litellm_textbased_model import LitellmTextbasedModelConfig

    strip = lambda d, *ks: {k: v for k, v in d.items() if k not in ks}  # noqa: E731
    return (AgentConfig(**strip(config["agent"], "agent_class")),
            LocalEnvironmentConfig(**strip(config["environment"], "environment_class")),
            LitellmTextbasedModelConfig(**strip(config["model"], "model_class")))


def result_from_trajectory(traj: dict[str, Any], report: dict[str, Any] | None = None,
                           candidate_files: Sequence[str] | None = None, path: str | None = None,
                           seconds: float = 0.0, repo: str = "") -> DownstreamResult:
    """A ``DownstreamResult`` from a saved mini-swe-agent trajectory (any 1.x/2.x ``.traj.json``); a file that
    stores no instance id gets its name's (``path``: ``<id>.traj.json``). Without ``candidate_files``, the files a
    codegrep run handed the agent (``codegrep.candidate_files``, which ``MiniSweAgent.run`` saves) are the run's.

    Rounds, tokens and the files opened come from the one mini-swe-agent reader,
    ``codegrep.mining.formats.minisweagent`` (``read`` for usage, ``parse`` for file events).
    """
    from codegrep.mining.events import viewed_files
    from codegrep.mining.formats import minisweagent as parser
    from codegrep.mining.ids import id_from_name

    run = parser.read(traj, source=path or "")
    parsed = parser.parse(traj, source=path or "")
    iid = run.instance_id or parsed.instance_id or (id_from_name(path) if path else "")  # ``mini`` stores none
    resolved = report_resolved(report, iid)
    viewed = viewed_files(parsed.events)
    if candidate_files is None and isinstance(traj.get("codegrep"), dict):
        recorded = traj["codegrep"].get("candidate_files")
        candidate_files = [str(f) for f in recorded] if isinstance(recorded, list) else None
    return DownstreamResult(instance_id=iid, agent="mini-swe-agent", resolved=resolved, rounds=run.rounds,
                            prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
                            seconds=seconds, trajectory=path, repo=repo, infra_failure=infra_failure(report, iid),
                            candidate_files=list(candidate_files) if candidate_files is not None else None,
                            extra={"exit_status": run.exit_status, "actions": len(run.actions),
                                   "viewed_files": viewed, "patch": run.submission or "",
                                   "tokens_known": run.tokens is not None, "tokens_partial": run.usage_partial,
                                   "tokens_recorded": sum(p + c for p, c in run.usage)})


class MiniSweAgent:
    """Runs mini-swe-agent on a task in a private worktree; implements ``DownstreamAgent``."""

    name = "mini-swe-agent"

    def __init__(self, config: MiniSweAgentConfig | None = None, resolver: Any = None):
        self.config = config or MiniSweAgentConfig()
        self.resolver = resolver

    @classmethod
    def from_config(cls, section: dict[str, Any], endpoint: str | None = None) -> "MiniSweAgent":
        return cls(config_from_section(section, "mini_swe_agent", MiniSweAgentConfig, "api_base", endpoint))

    def _git_dir(self, task: Task) -> Path:
        if self.resolver is None:
            from codegrep.data.repos import RepoResolver

            self.resolver = RepoResolver(repos_dir=self.config.repos_dir)
        return Path(self.resolver.resolve(task.repo, task.base_commit))

    def run(self, task: Task, candidate_files: Sequence[str] | None, label: str | None = None) -> DownstreamResult:
        """One rollout; its trajectory goes to ``output_dir/<label>/<id>.traj.json`` (label: ``hint``/``base``)."""
        out_dir = Path(self.config.output_dir)
        tag = label or ("hint" if candidate_files is not None else "base")
        traj_path = out_dir / tag / f"{task.instance_id}.traj.json"
        git_dir = self._git_dir(task)
        with tempfile.TemporaryDirectory(prefix="codegrep-mini-") as tmp:
            with detached_worktree(git_dir, Path(tmp) / "repo", task.base_commit) as checkout:
                seconds = self._run_agent(task, candidate_files, checkout, traj_path)
        traj = json.loads(traj_path.read_text())
        report = load_report(self.config.report, whole_run=True) if self.config.report else None
        result = result_from_trajectory(traj, report, candidate_files, str(traj_path), seconds, task.repo)
        result.instance_id = task.instance_id
        self._append_prediction(out_dir / tag / "predictions.jsonl", task, result.extra.get("patch", ""))
        return result

    def _run_agent(self, task: Task, candidate_files: Sequence[str] | None, checkout: Path, traj: Path) -> float:
        from minisweagent.agents import get_agent
        from minisweagent.environments import get_environment
        from minisweagent.models import get_model

        config = build_config(task, candidate_files, checkout, self.config, traj)
        validate_config(config)
        agent = get_agent(get_model(config=config["model"]), get_environment(config["environment"]),
                          config["agent"], default_type="default")
        start = time.perf_counter()
        agent.run(config["task"])
        agent.save(traj, {"instance_id": task.instance_id, "codegrep": {"config": asdict(self.config),
                                                                        "candidate_files": candidate_files}})
        return time.perf_counter() - start

    def _append_prediction(self, path: Path, task: Task, patch: str) -> None:
        """swebench's predictions format, for ``python -m swebench.harness.run_evaluation``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        row = {"instance_id": task.instance_id, "model_name_or_path": f"mini-swe-agent__{self.config.model_name}",
               "model_patch": patch}
        with open_append(path) as fh:
            fh.write(json.dumps(row) + "\n")
