"""``agent``: the LLM retrieval agent (``codegrep.agent.loop.run_episode``) with any policy, as a retriever.

The policy comes from the profile's ``agent:`` section; ``retrievers.agent`` may override its keys
(``model``, ``endpoint``, ``policy``...) and set ``episodes_dir``. Each retrieval saves its episode JSON.
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from codegrep import Policy
from codegrep.data.tasks import Task
from codegrep.retrievers.base import Retrieval

OWN_KEYS = ("episodes_dir",)


def policy_spec(agent: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The ``agent:`` section with overrides; an endpoint implies the openai policy, a model the hf one.

    >>> policy_spec({"policy": "hf", "model": "smollm2"}, {"endpoint": "http://h:1/v1"})["policy"]
    'openai'
    >>> policy_spec({"policy": "openai", "endpoint": "http://h:1/v1"}, {"model": "m"})["policy"]
    'hf'
    >>> policy_spec({"policy": "openai", "endpoint": "http://h:1/v1"}, {"model": "m", "endpoint": "http://x/v1"})["model"]
    'm'
    """
    spec = {**agent, **{k: v for k, v in overrides.items() if v is not None and k not in OWN_KEYS}}
    if overrides.get("endpoint"):
        spec["policy"] = "openai"
    elif overrides.get("model") and "policy" not in overrides:
        spec.update(policy="hf", endpoint=None)
    return spec


class AgentRetriever:
    """Runs one agent episode per task on a tool environment over the checkout."""

    name = "agent"

    def __init__(self, spec: dict[str, Any], env_config: dict[str, Any] | None = None,
                 episodes_dir: str | Path | None = None, policy: Policy | None = None):
        from codegrep.agent.protocol import AgentConfig

        self.spec = spec
        self.agent_config = AgentConfig.from_dict(spec)
        self.env_config = env_config or {}
        self.episodes_dir = Path(episodes_dir) if episodes_dir else None
        self._policy = policy
        self._lock = threading.Lock()

    @classmethod
    def from_profile(cls, cfg: dict[str, Any] | None, settings: dict[str, Any]) -> "AgentRetriever":
        cfg = cfg or {}
        spec = policy_spec(dict(cfg.get("agent") or {}), settings)
        return cls(spec, dict(cfg.get("env") or {}), settings.get("episodes_dir"))

    @property
    def policy(self) -> Policy:
        """Created on first use (loading a model takes seconds to minutes)."""
        with self._lock:
            if self._policy is None:
                from codegrep.agent.policies import make_policy

                self._policy = make_policy(self.spec)
            return self._policy

    def episode_path(self, task: Task) -> Path | None:
        if self.episodes_dir is None:
            return None
        return self.episodes_dir / (re.sub(r"[^A-Za-z0-9_.-]+", "_", task.instance_id) + ".json")

    def retrieve(self, task: Task, checkout: Path) -> Retrieval:
        from codegrep.agent.loop import run_episode
        from codegrep.env.tools import ToolConfig
        from codegrep.env.workdir import RepoToolEnvironment

        start = time.perf_counter()
        policy, save_to = self.policy, self.episode_path(task)
        with RepoToolEnvironment(Path(checkout), ToolConfig.from_dict(self.env_config)) as env:
            ep = run_episode(task.problem_statement, env, policy, self.agent_config, save_to=save_to,
                             instance_id=task.instance_id)
        return Retrieval(files=list(ep.files), rounds=ep.rounds, tool_calls=ep.tool_calls, tokens=ep.tokens,
                         seconds=time.perf_counter() - start,
                         reasons={f: "submitted by the agent" for f in ep.files},
                         extra={"episode_path": str(save_to) if save_to else None, "submitted": ep.submitted,
                                "format_errors": ep.format_errors, "timings": ep.timings(),
                                "policy": policy.describe()})
