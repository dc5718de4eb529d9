"""One training run end to end: parse (TrlParser), warm start, GRPO, metrics, final policy.

Run directory ``<out>/<name>/``: ``config.json`` (both argument sets), ``versions.json``,
``metrics.jsonl`` (one row per step), ``checkpoints/checkpoint-N`` (for ``--resume``),
``final/`` (the trained policy) and ``done.json`` (written last; its presence marks a finished run).
"""
from __future__ import annotations

import json
import platform
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from codegrep.config import ConfigError, load_profile, profile_path, project_root, section, seed_everything

DEFAULT_TRAIN_CONFIGS = {"ci": "configs/train/ci.yaml", "smoke": "configs/train/smoke.yaml",
                         "paper": "configs/train/paper.yaml"}


def train_config_path(config: str | Path) -> Path:
    """A train YAML as is; a profile (name or YAML with a ``train:`` section) -> its ``train.config``."""
    import yaml

    p = Path(config)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        data = yaml.safe_load(p.read_text()) or {}
        if not isinstance(data.get("train"), dict):
            return p
    cfg = load_profile(config)
    rel = section(cfg, "train").get("config") or DEFAULT_TRAIN_CONFIGS.get(cfg["profile"])
    if not rel:
        raise ConfigError(f"profile {profile_path(config)} has no train.config")
    path = Path(rel) if Path(rel).is_absolute() else project_root() / rel
    if not path.is_file():
        raise ConfigError(f"train config {path} (from profile {config}) not found")
    return path


def overrides_to_argv(overrides: dict[str, Any] | None) -> list[str]:
    """``{"seed": 1, "resume": True, "lambda_grid": [0.1, 0.2]}`` -> TrlParser command-line arguments.

    >>> overrides_to_argv({"seed": 1, "resume": True, "lambda_grid": [0.1, 0.2]})
    ['--seed', '1', '--resume', 'true', '--lambda_grid', '0.1', '0.2']
    """
    argv: list[str] = []
    for key, value in (overrides or {}).items():
        argv.append(f"--{key}")
        if isinstance(value, (list, tuple)):
            argv += [str(v) for v in value]
        else:
            argv.append(str(value).lower() if isinstance(value, bool) else str(value))
    return argv


def parse_train_args(config: str | Path, overrides: dict[str, Any] | None = None, argv: Sequence[str] = ()):
    """(CodeGrepArgs, GRPOConfig) from a train YAML (or profile) plus overrides, through TRL's TrlParser."""
    from trl import GRPOConfig, TrlParser

    from codegrep.rl.trainer import CodeGrepArgs

    parser = TrlParser((CodeGrepArgs, GRPOConfig))
    args = ["--config", str(train_config_path(config)), *overrides_to_argv(overrides), *argv]
    return parser.parse_args_and_config(args)


def versions() -> dict[str, str]:
    import datasets
    import torch
    import transformers
    import trl

    import codegrep

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "datasets": datasets.__version__, "codegrep": codegrep.__version__,
            "platform": platform.platform()}


def train(config: str | Path, overrides: dict[str, Any] | None = None) -> Path:
    """Train one run; returns its directory. A finished run is not retrained unless ``resume`` asks."""
    cg, grpo = parse_train_args(config, overrides)
    run_dir = Path(cg.out) / cg.run_name(grpo.seed)
    if not cg.resume and run_dir.exists():
        shutil.rmtree(run_dir)  # a fresh run never mixes with an older one's metrics or checkpoints
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    trainer = build_trainer(cg, grpo, run_dir)
    checkpoints = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    trainer.train(resume_from_checkpoint=str(checkpoints[-1]) if cg.resume and checkpoints else None)
    if cg.save_final_model:
        trainer.save_model(str(run_dir / "final"))
        trainer.processing_class.save_pretrained(str(run_dir / "final"))
    (run_dir / "done.json").write_text(json.dumps({"seconds": time.perf_counter() - started,
                                                   "steps": trainer.state.global_step}, indent=1))
    return run_dir


def build_trainer(cg: Any, grpo: Any, run_dir: Path) -> Any:
    """Everything a run needs, wired into ``CodeGrepGRPOTrainer`` (also writes config.json, versions.json)."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from codegrep.agent.protocol import AgentConfig, build_messages
    from codegrep.data.tasks import profile_tasks
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig
    from codegrep.rl.advantages import reward_weights
    from codegrep.rl.rewards import REWARD_FUNCS
    from codegrep.rl.rollout import RolloutRunner
    from codegrep.rl.trainer import CodeGrepGRPOTrainer, MetricsJsonlCallback

    seed_everything(grpo.seed)
    cfg = load_profile(cg.profile)
    env_sec = section(cfg, "env")
    tasks, resolver = profile_tasks(cfg, split="train", limit=cg.train_tasks)
    if not tasks:
        raise ValueError(f"profile {cg.profile}: no train-split tasks")
    pool, tools = WorktreePool.from_config(env_sec), ToolConfig.from_dict(env_sec)
    agent = AgentConfig(max_turns=cg.max_turns, max_calls_per_turn=cg.max_calls_per_turn,
                        max_observation_tokens=cg.max_observation_tokens, max_issue_chars=cg.max_issue_chars)
    model_path = initial_policy(cg, grpo, cfg, tasks, resolver, pool, agent, env_sec, tools)
    grpo.output_dir = str(run_dir / "checkpoints")
    grpo.reward_weights = reward_weights(cg.efficiency_layer, cg.format_weight, cg.efficiency_lambda)
    if cg.efficiency_layer == "normalize_then_sum":
        grpo.multi_objective_aggregation = "normalize_then_sum"
    scales = cg.efficiency_scales or [cg.max_turns, cg.max_turns * cg.max_calls_per_turn,
                                      cg.max_turns * grpo.max_completion_length]
    rollout = RolloutRunner(tasks, resolver, pool, agent, env_mode=env_sec.get("mode", "worktree"),
                            tool_config=tools, fbeta=cg.fbeta, cost_weights=cg.efficiency_weights,
                            cost_scales=scales)
    data = Dataset.from_list([{"prompt": build_messages(t.problem_statement, agent), "instance_id": t.instance_id}
                              for t in tasks])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    (run_dir / "config.json").write_text(json.dumps({"codegrep": asdict(cg), "grpo": grpo.to_dict(),
                                                     "initial_policy": str(Path(model_path).resolve()), "n_train_tasks": len(tasks),
                                                     "efficiency_scales": scales}, indent=1, default=str))
    (run_dir / "versions.json").write_text(json.dumps(versions(), indent=1))
    trainer = CodeGrepGRPOTrainer(model=str(model_path), reward_funcs=list(REWARD_FUNCS), args=grpo,
                                  train_dataset=data, processing_class=tokenizer, rollout_func=rollout,
                                  codegrep_args=cg, reference_builder=build_reference)
    trainer.add_callback(MetricsJsonlCallback(run_dir / "metrics.jsonl"))
    return trainer


def initial_policy(cg: Any, grpo: Any, cfg: dict, tasks: list, resolver: Any, pool: Any, agent: Any,
                   env_sec: dict, tools: Any) -> Path:
    """The base model, or its warm start (cached by demonstrations + settings, shared by every arm and seed)."""
    from codegrep.agent.models import resolve_model
    from codegrep.rl import sft

    base = resolve_model(cg.model)
    if not cg.warm_start:
        return base
    demos: list = []  # (source, messages)
    if "synthetic" in cg.sft_sources:
        demos += [("synthetic", m) for m in sft.synthetic_demonstrations(
            tasks, resolver, pool, agent, env_sec.get("mode", "worktree"), tools)]
    if "catm" in cg.sft_sources:
        demos += [("catm", m) for m in sft.catm_demonstrations(cfg, Path(cg.out).parent)]
    demos = demos[: cg.sft_max_demos] if cg.sft_max_demos else demos
    settings = {"base": str(base), "epochs": cg.sft_epochs, "lr": cg.sft_learning_rate, "bs": cg.sft_batch_size}
    cache = Path(cg.warm_start_dir or Path(cg.out) / "_warm_start")
    out = cache / sft.demos_key([m for _, m in demos], settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = sft.warm_start(base, [m for _, m in demos], out, epochs=cg.sft_epochs, learning_rate=cg.sft_learning_rate,
                          batch_size=cg.sft_batch_size, seed=0, use_cpu=grpo.use_cpu, bf16=grpo.bf16)
    if not (path / "demonstrations.jsonl").is_file():
        (path / "demonstrations.jsonl").write_text(
            "".join(json.dumps({"source": src, "messages": m}) + "\n" for src, m in demos))
    return path


def build_reference(trainer: Any) -> Any:
    """Frozen initial policy for the KL probe, built exactly as TRL builds its ``ref_model``."""
    from trl.models.utils import prepare_deepspeed
    from trl.trainer.utils import add_fused_lm_head, create_model_from_path, disable_dropout_in_model

    path = trainer.model.config._name_or_path
    ref = create_model_from_path(path, dtype=trainer.model.dtype)
    disable_dropout_in_model(ref)
    add_fused_lm_head(ref, temperature=trainer.temperature, cast_lm_head_to_fp32=trainer.args.cast_lm_head_to_fp32)
    if trainer.is_deepspeed_enabled:
        return prepare_deepspeed(ref, trainer.accelerator)
    return trainer.accelerator.prepare_model(ref, evaluation_mode=True)
