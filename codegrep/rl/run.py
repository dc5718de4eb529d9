"""One training run end to end: parse (TrlParser), warm start, GRPO, metrics, final policy.

Run directory ``<out>/<name>/``: ``config.json`` (both argument sets), ``versions.json``,
``metrics.jsonl`` (one row per step), ``checkpoints/checkpoint-N`` (for ``--resume``),
``final/`` (the trained policy) and ``done.json`` (written last; its presence marks a finished run).
"""
from __future__ import annotations

import json
import platform
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from codegrep.config import ConfigError, check_fields, load_profile, load_yaml, profile_path, project_root, section, seed_everything
from codegrep.errors import write_atomic

DEFAULT_TRAIN_CONFIGS = {"ci": "configs/train/ci.yaml", "smoke": "configs/train/smoke.yaml",
                         "paper": "configs/train/paper.yaml"}


def train_config_path(config: str | Path) -> Path:
    """A train YAML as is; a profile (name or YAML with a ``train:`` section) -> its ``train.config``."""
    from codegrep.errors import read_text

    p = Path(config)
    if p.suffix in (".yaml", ".yml") and p.exists():
        data = load_yaml(read_text(p, "--config"), str(p)) or {}  # safe, with the alias-expansion limit
        if not isinstance(data, dict):
            raise ConfigError(f"{p}: top level must be a mapping of settings, got {type(data).__name__}")
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
    path = train_config_path(config)
    args = ["--config", str(path), *overrides_to_argv(overrides), *argv]
    try:
        cg, grpo = parser.parse_args_and_config(args)
    except ValueError as exc:  # TRL/HF refuse an unknown or ill-typed setting: name the file, keep it one line
        raise ConfigError(f"{path}: {exc}") from None
    given = set(overrides or {}) | {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}
    for key, value in vars(cg).items():  # declared ranges (e.g. max_turns >= 1), before any work
        check_fields(CodeGrepArgs, {key: value}, f"--set {key}" if key in given else f"{path}: {key}")
    return cg, grpo


def cpu_precision_of(cg: Any, grpo: Any) -> str | None:
    """The precision a CPU run trains in (SFT and the GRPO loss), from ``cpu_precision``; ``None`` on GPU runs
    (TRL's ``bf16``/``fp16`` settings stand there). Generation stays fp32 (see docs/training.md)."""
    import torch

    from codegrep.agent.precision import resolve_precision

    if not grpo.use_cpu and torch.cuda.is_available():
        return None
    return resolve_precision(cg.cpu_precision)


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
    resume_from = resume_checkpoint(run_dir) if cg.resume else None  # checked before the model loads
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    trainer = build_trainer(cg, grpo, run_dir)
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    if cg.save_final_model:
        trainer.save_model(str(run_dir / "final"))
        trainer.processing_class.save_pretrained(str(run_dir / "final"))
    write_atomic(run_dir / "done.json", json.dumps({"seconds": time.perf_counter() - started,
                                                   "steps": trainer.state.global_step}, indent=1))
    return run_dir


def checkpoint_problem(path: Path) -> str | None:
    """Why a ``checkpoint-N`` directory cannot be resumed from (a run killed while saving it), or ``None``."""
    try:
        state = json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"unreadable trainer_state.json ({exc})"
    if not isinstance(state, dict) or "global_step" not in state:
        return "trainer_state.json has no global_step"
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        return "no model weights"
    return None


def resume_checkpoint(run_dir: Path) -> Path | None:
    """The last complete checkpoint of a run, for ``--resume``; half-written later ones are named on stderr.

    No checkpoint at all is a ``ConfigError`` (one line: there is nothing to resume; rerun without ``--resume``).
    """
    found = sorted((p for p in (run_dir / "checkpoints").glob("checkpoint-*") if p.name[11:].isdigit()),
                   key=lambda p: int(p.name[11:]))
    skipped = []
    for path in reversed(found):
        problem = checkpoint_problem(path)
        if problem is None:
            if skipped:
                print(f"train --resume: skipped incomplete checkpoint(s) {'; '.join(skipped)}; "
                      f"resuming from {path.name}", file=sys.stderr)
            return path
        skipped.append(f"{path.name} ({problem})")
    detail = f" (incomplete: {'; '.join(skipped)})" if skipped else ""
    raise ConfigError(f"--resume: no complete checkpoint in {run_dir / 'checkpoints'}{detail}; "
                      "rerun without --resume to start the run over")


def build_trainer(cg: Any, grpo: Any, run_dir: Path) -> Any:
    """Everything a run needs, wired into ``CodeGrepGRPOTrainer`` (also writes config.json, versions.json)."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from codegrep.agent.precision import fresh_accelerator_state, precision_record
    from codegrep.agent.protocol import build_messages
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
    # the warm start always learns from the profile's train split, so every run of a profile (the main run, the
    # ablation's screen and arms on their pool) starts from one cached warm start
    from codegrep.data.default_set import task_kind

    split_tasks, resolver = profile_tasks(cfg, split="train", limit=cg.train_tasks)
    tasks = [t for t in split_tasks if task_kind(t.repo) in cg.task_kinds]  # GRPO prompts: the run's task kinds
    if cg.train_task_ids:  # an explicit pool of GRPO prompts (the ablation's pre-screen), in the order given
        by_id = {t.instance_id: t for t in profile_tasks(cfg, split="train", limit=None)[0]}
        missing = [i for i in cg.train_task_ids if i not in by_id]
        if missing:
            raise ValueError(f"--train_task_ids: not train-split tasks of profile {cg.profile}: {missing[:5]}")
        tasks = [by_id[i] for i in cg.train_task_ids]
    if not tasks:
        raise ValueError(f"profile {cg.profile}: no train-split tasks of kinds {cg.task_kinds}")
    pool, tools = WorktreePool.from_config(env_sec), ToolConfig.from_dict(env_sec)
    agent, episode = episode_config(cfg, cg)
    evaluation_ids = evaluation_ids_of(cfg)
    demo_agent = demonstration_agent(agent, cg)
    model_path, demos = initial_policy(cg, grpo, cfg, split_tasks, resolver, pool, demo_agent, env_sec, tools,
                                       exclude=evaluation_ids)
    episode["demonstrations_max_turns"] = demo_agent.max_turns
    write_manifest(run_dir, demos, [t.instance_id for t in tasks], evaluation_ids)
    grpo.output_dir = str(run_dir / "checkpoints")
    grpo.reward_weights = reward_weights(cg.efficiency_layer, cg.format_weight, cg.efficiency_lambda)
    if cg.efficiency_layer == "normalize_then_sum":
        grpo.multi_objective_aggregation = "normalize_then_sum"
    scales = cg.efficiency_scales or [agent.max_turns, agent.max_turns * agent.max_calls_per_turn,
                                      agent.max_turns * grpo.max_completion_length]
    rollout = RolloutRunner(tasks, resolver, pool, agent, env_mode=env_sec.get("mode", "worktree"),
                            tool_config=tools, fbeta=cg.fbeta, cost_weights=cg.efficiency_weights,
                            cost_scales=scales, reward=cg.retrieval_reward, seen_credit=cg.seen_credit)
    data = Dataset.from_list([{"prompt": build_messages(t.problem_statement, agent), "instance_id": t.instance_id}
                              for t in tasks])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    write_atomic(run_dir / "config.json", json.dumps({"codegrep": asdict(cg), "grpo": grpo.to_dict(),
                                                     "initial_policy": str(Path(model_path).resolve()), "n_train_tasks": len(tasks),
                                                     "efficiency_scales": scales, "episode": episode,
                                                     "precision": {**precision_record(cg.cpu_precision),
                                                                   "training": cpu_precision_of(cg, grpo),
                                                                   "generation": "fp32" if cpu_precision_of(
                                                                       cg, grpo) else None}},
                                                    indent=1, default=str))
    write_atomic(run_dir / "versions.json", json.dumps(versions(), indent=1))
    fresh_accelerator_state()  # the warm start's SFTTrainer, in this process, may have used another precision
    trainer = CodeGrepGRPOTrainer(model=str(model_path), reward_funcs=list(REWARD_FUNCS), args=grpo,
                                  train_dataset=data, processing_class=tokenizer, rollout_func=rollout,
                                  codegrep_args=cg, reference_builder=build_reference)
    trainer.add_callback(MetricsJsonlCallback(run_dir / "metrics.jsonl"))
    from codegrep.rl.progress import GRPO_FIELDS, plain_progress

    plain_progress(trainer, "GRPO", GRPO_FIELDS, grpo.max_steps)  # one line per step instead of raw log dicts
    return trainer


EPISODE_KEYS = ("max_turns", "max_calls_per_turn", "max_observation_tokens", "max_issue_chars")


def episode_config(cfg: dict[str, Any], cg: Any) -> tuple[Any, dict[str, Any]]:
    """The episode limits training uses: the profile's ``agent:`` section (what evaluation uses), with the
    run's explicit training-only overrides (``max_turns`` ... set in the train YAML or ``--set``) on top.

    Returns the ``AgentConfig`` and the record written to ``config.json`` (``profile``, ``training_overrides``,
    ``used``) so a run that trains on other limits than it is evaluated on says so.
    """
    import dataclasses

    from codegrep.agent.protocol import AgentConfig

    base = AgentConfig.from_dict(section(cfg, "agent"))
    overrides = {k: getattr(cg, k) for k in EPISODE_KEYS if getattr(cg, k, None) is not None}
    used = dataclasses.replace(base, **overrides)
    return used, {"profile": base.to_dict(), "training_overrides": overrides, "used": used.to_dict()}


def demonstration_agent(agent: Any, cg: Any) -> Any:
    """The episode limits the warm start's demonstrations are written for: the run's, with ``demo_max_turns``
    (set by the ablation to the main run's turns) replacing ``max_turns``, so the warm start is keyed the same."""
    import dataclasses

    return dataclasses.replace(agent, max_turns=cg.demo_max_turns) if cg.demo_max_turns else agent


def evaluation_ids_of(cfg: dict[str, Any]) -> set[str]:
    """Every instance id the profile's evaluation split can hold (none may reach training)."""
    from codegrep.data.tasks import evaluation_instance_ids

    return set(evaluation_instance_ids(cfg))


def write_manifest(run_dir: Path, demos: list[dict[str, Any]], prompt_ids: list[str],
                   evaluation_ids: set[str]) -> Path:
    """``RUN/manifest.json``: the instance ids behind every SFT demonstration and GRPO prompt, checked
    against the evaluation split (an overlap is an error: nothing is written, training does not start)."""
    sft_ids = [d["instance_id"] for d in demos]
    overlap = sorted((set(sft_ids) | set(prompt_ids)) & evaluation_ids)
    if overlap:
        raise ValueError(f"{len(overlap)} evaluation instance(s) would reach training (first: {overlap[0]}); "
                         "check tasks.splits and the demonstration sources")
    path = Path(run_dir) / "manifest.json"
    write_atomic(path, json.dumps({
        "sft_demonstrations": [{"source": d["source"], "instance_id": d["instance_id"]} for d in demos],
        "grpo_prompts": list(prompt_ids), "n_evaluation_ids": len(evaluation_ids),
        "evaluation_ids_sha": _ids_digest(evaluation_ids), "overlap": overlap}, indent=1))
    return path


def _ids_digest(ids: set[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def demonstrations(cg: Any, cfg: dict, tasks: list, resolver: Any, pool: Any, agent: Any, env_sec: dict,
                   tools: Any, exclude: set[str], sources: list[str] | None = None) -> list[dict[str, Any]]:
    """The warm start's demonstrations (``{"source", "instance_id", "messages"}``): every requested source,
    evaluation instances dropped, then ``sft_max_demos`` taken from the sources in turn (equal shares)."""
    from codegrep.rl import demos as build

    sources = list(sources or cg.sft_sources)
    unknown = sorted(set(sources) - set(build.SOURCES))
    if unknown:
        raise ValueError(f"sft_sources: unknown source(s) {unknown}; expected some of {list(build.SOURCES)}")
    groups: dict[str, list[dict[str, Any]]] = {}
    if "synthetic" in sources:  # scripted-expert episodes, rejection sampled; every train-split task may serve
        import copy

        from codegrep.data.tasks import profile_tasks

        whole = copy.deepcopy(cfg)  # the whole train split, not its seeded sample of GRPO prompts
        whole.setdefault("tasks", {}).setdefault("splits", {}).setdefault("train", {})["limit"] = None
        from codegrep.data.default_set import task_kind

        pool_tasks, pool_resolver = profile_tasks(whole, split="train", limit=None)
        groups["synthetic"] = []
        for kind in cg.task_kinds:  # real issue texts first where asked: they teach identifier greps
            left = cg.sft_max_demos - len(groups["synthetic"]) if cg.sft_max_demos else None
            if left is not None and left <= 0:
                break
            groups["synthetic"] += build.expert_demonstrations(
                [t for t in pool_tasks if t.instance_id not in exclude and task_kind(t.repo) == kind],
                pool_resolver, pool, agent, limit=left, seed=0, env_mode=env_sec.get("mode", "objects"),
                tool_config=tools)
    if "recorded" in sources:
        groups["recorded"] = build.recorded_demonstrations(cg, cfg, agent, exclude)
    if "catm" in sources:
        groups["catm"] = build.catm_demonstrations(cfg, Path(cg.out).parent)
    for name in groups:
        groups[name] = [d for d in groups[name] if d["instance_id"] not in exclude]
    return build.mix(groups, cg.sft_max_demos)


def initial_policy(cg: Any, grpo: Any, cfg: dict, tasks: list, resolver: Any, pool: Any, agent: Any,
                   env_sec: dict, tools: Any, exclude: set[str] = frozenset(),
                   sources: list[str] | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """The base model, or its warm start (cached by demonstrations + settings, shared by every arm and seed),
    and the demonstrations it was trained on."""
    from codegrep.agent.models import resolve_model
    from codegrep.rl import sft

    base = resolve_model(cg.model)
    bf16 = bool(grpo.bf16) if cpu_precision_of(cg, grpo) is None else cpu_precision_of(cg, grpo) == "bf16"
    if not cg.warm_start:
        return base, []
    demos = demonstrations(cg, cfg, tasks, resolver, pool, agent, env_sec, tools, exclude, sources)
    settings = {"base": str(base), "epochs": cg.sft_epochs, "lr": cg.sft_learning_rate, "bs": cg.sft_batch_size,
                "sft": sft.SFT_RECIPE, "bf16": bf16}
    cache = Path(cg.warm_start_dir or Path(cg.out) / "_warm_start")
    out = cache / sft.demos_key([d["messages"] for d in demos], settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = sft.warm_start(base, [d["messages"] for d in demos], out, epochs=cg.sft_epochs,
                          learning_rate=cg.sft_learning_rate, batch_size=cg.sft_batch_size, seed=0,
                          use_cpu=grpo.use_cpu, bf16=bf16)
    if not (path / "demonstrations.jsonl").is_file():
        write_atomic(path / "demonstrations.jsonl", "".join(json.dumps(d) + "\n" for d in demos))
    return path, demos


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
