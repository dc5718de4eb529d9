"""One training run end to end: arguments, warm start, GRPO, metrics, final policy.

The resolved profile is passed down as an object: ``train(cfg, args)`` with ``args = train_arguments(cfg, ...)``
(notebooks, the ablation, the study) or :func:`parse_train_args` (TRL's TrlParser: the ``codegrep train`` command
line, :func:`train_command`, which loads its profile once). Nothing below re-reads a profile from a path.

Run directory ``<out>/<name>/``: ``config.json`` (both argument sets), ``versions.json``,
``metrics.jsonl`` (one row per step), ``checkpoints/checkpoint-N`` (for ``--resume``),
``final/`` (the trained policy) and ``done.json`` (written last; its presence marks a finished run).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, Sequence

from codegrep.config import KEY_RULES, ConfigError, check_choice, check_fields, check_value, load_profile, load_yaml, project_root, section, seed_everything
from codegrep.files import output_dir, write_atomic

DEFAULT_TRAIN_CONFIGS = {"ci": "configs/train/ci.yaml", "smoke": "configs/train/smoke.yaml",
                         "paper": "configs/train/paper.yaml"}


def profile_train_yaml(cfg: dict[str, Any]) -> Path:
    """The train YAML a resolved profile names (``train.config``, else the profile's default one)."""
    rel = section(cfg, "train").get("config") or DEFAULT_TRAIN_CONFIGS.get(cfg.get("profile"))
    if not rel:
        raise ConfigError(f"profile {cfg.get('_source') or cfg.get('profile')} has no train.config")
    path = Path(rel) if Path(rel).is_absolute() else project_root() / rel
    if not path.is_file():
        raise ConfigError(f"train config {path} (from profile {cfg.get('_source') or cfg.get('profile')}) not found")
    return path


def train_config_path(config: str | Path) -> Path:
    """A train YAML as is; a profile (name or YAML with a ``train:`` section) -> its ``train.config``."""
    if _is_train_yaml(config):
        return Path(config)
    return profile_train_yaml(load_profile(config))


def _is_train_yaml(config: str | Path) -> bool:
    """Whether ``config`` is a train YAML (a mapping without a ``train:`` section) rather than a profile."""
    from codegrep.files import read_text

    p = Path(config)
    if p.suffix not in (".yaml", ".yml") or not p.exists():
        return False
    data = load_yaml(read_text(p, "--config"), str(p)) or {}  # safe, with the alias-expansion limit
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping of settings, got {type(data).__name__}")
    return not isinstance(data.get("train"), dict)


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


class TrainArgs(NamedTuple):
    """One run's two argument sets: CodeGrep's own (``CodeGrepArgs``) and TRL's ``GRPOConfig``."""

    codegrep: Any
    grpo: Any


GRPO_RANGES = {key[len("train."):]: rule for key, rule in KEY_RULES.items() if key.startswith("train.")}
"""Ranges of TRL GRPOConfig fields its ``__post_init__`` divides by (0 is a ZeroDivisionError there) or that leave
no batch to train on (``config.KEY_RULES``, where a profile's ``train:`` section is checked); checked here before
TRL builds its config from a train YAML and overrides."""


def _check_grpo_ranges(values: dict[str, Any], given: set[str], path: Path) -> None:
    """``GRPO_RANGES`` over a train YAML's values and overrides (``given``: named as ``--set KEY``); a value of
    another type is left to TRL's own type check."""
    for key, (tp, rng) in GRPO_RANGES.items():
        value = values.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            check_value(value, tp, rng, f"--set {key}" if key in given else f"{path}: {key}")


_YAML_ALSO = {"scale_rewards": bool}
"""Fields whose annotation is narrower than what their class's ``__post_init__`` accepts: TRL documents
``scale_rewards`` as ``str`` or ``bool`` (``True`` is ``"group"``, ``False`` ``"none"``) but annotates ``str``."""


def _check_yaml_types(values: dict[str, Any], given: set[str], path: Path) -> None:
    """A train YAML's values that are not strings, against the field annotations of ``CodeGrepArgs`` and
    ``GRPOConfig``. TrlParser sets a YAML's values as argparse defaults, and argparse converts (so checks) only the
    string ones: ``max_steps:`` left empty (null) was a ``TypeError`` in :func:`_check_steps`, ``num_generations: [2]``
    one in TRL, and ``learning_rate:`` (null), ``max_steps: true`` or a mapping reached the trainer as written. A
    string is left to TrlParser's conversion (PyYAML reads ``1e-5`` as a string); ``--set`` values (``given``) are
    converted by the parser."""
    import dataclasses

    from trl import GRPOConfig

    from codegrep.rl.trainer import CodeGrepArgs

    for cls in (CodeGrepArgs, GRPOConfig):
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in values.items():
            if key in names and key not in given and not isinstance(value, (str, _YAML_ALSO.get(key, str))):
                check_fields(cls, {key: value}, f"{path}: {key}")


def _report_to_choices() -> list[str]:
    """``report_to``'s values: the integrations transformers' Trainer looks a name up in (an unknown one is its
    ``ValueError`` when the trainer is built, after the warm start), and ``all``/``none``."""
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    return ["all", "none", *INTEGRATION_TO_CALLBACK]


def _check_choices(values: dict[str, Any], given: set[str], path: Path) -> None:
    """A train YAML's values and overrides (``given``: named as ``--set KEY``) against the values their class
    declares (``config.field_choices``: TRL's ``loss_type``, transformers' ``lr_scheduler_type``, ``optim`` ...;
    ``report_to`` against transformers' integrations). argparse checks a choice on a command line only, never a
    value TrlParser took from the YAML, and ``loss_type: dpao`` or ``report_to: wandbb`` failed when the trainer
    read it, minutes into a run; an Enum's value failed in ``__post_init__`` without naming the key."""
    import dataclasses

    from trl import GRPOConfig

    from codegrep.rl.trainer import CodeGrepArgs

    for cls in (CodeGrepArgs, GRPOConfig):
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in values.items():
            if key in names:
                check_choice(cls, key, value, _where(key, given, path),
                             _report_to_choices() if cls is GRPOConfig and key == "report_to" else None)


def _yaml_settings(path: Path) -> dict[str, Any]:
    """A train YAML's settings for :func:`_check_grpo_ranges`; {} when unreadable (TrlParser then says why)."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, ConfigError):
        return {}
    return data if isinstance(data, dict) else {}


def _where(key: str, given: set[str], path: Path) -> str:
    """Where a setting came from: the ``--set`` the user wrote, or the train YAML."""
    return f"--set {key}" if key in given else f"{path}: {key}"


def _check_ranges(cg: Any, given: set[str], path: Path) -> None:
    from codegrep.rl.trainer import CodeGrepArgs

    def where_(key: str) -> str:
        return _where(key, given, path)

    for key, value in vars(cg).items():  # declared ranges (e.g. max_turns >= 1), before any work
        check_fields(CodeGrepArgs, {key: value}, where_(key))
    if cg.warm_start and (not cg.sft_sources or "format" in cg.sft_sources):  # refused when demonstrations were built
        from codegrep.rl.demos import SOURCES

        raise ConfigError(f"{where_('sft_sources')}: a warm start needs some of {list(SOURCES)}, got "
                          f"{cg.sft_sources!r} ('format' is the mechanism study's pre-training of its tiny policy, "
                          "with warm_start: false, as in configs/train/mechanism.yaml)")


def _check_files(cg: Any, given: set[str], path: Path) -> None:
    """The settings that name files, checked at load: each was read only where it is used, minutes later (the
    probe set when the trainer is built, after the warm start; recorded runs when demonstrations are built)."""
    from codegrep.mining.run_converter import run_files
    from codegrep.rl.kl import read_probe_set

    if cg.kl_probe_set:
        read_probe_set(cg.kl_probe_set, _where("kl_probe_set", given, path))
    for run in cg.recorded_runs or ():
        if not Path(run).exists():
            raise ConfigError(f"{_where('recorded_runs', given, path)}: {run}: no such file or directory")
        if Path(run).is_dir() and not run_files([run]):
            raise ConfigError(f"{_where('recorded_runs', given, path)}: {run}: holds no recorded runs "
                              "(*.traj.json, *.traj.json.gz)")
    if cg.warm_start_dir:
        output_dir(cg.warm_start_dir, _where("warm_start_dir", given, path))


def _check_steps(grpo: Any, path: Path) -> None:
    """A train YAML without ``max_steps`` left TRL's -1, which trains ``num_train_epochs`` epochs over the prompts
    instead of GRPO steps (a value below 1 is refused by ``KEY_RULES``, where it is given)."""
    if grpo.max_steps < 1:
        raise ConfigError(f"{path}: max_steps is not set (TRL would train num_train_epochs={grpo.num_train_epochs:g} "
                          "epochs instead of GRPO steps); set max_steps: N (>= 1)")


def _as_set(message: str, overrides: dict[str, Any] | None) -> str:
    """argparse's message about ``--key`` as the ``--set key=value`` the user wrote, where an override gave it.

    >>> _as_set("argument --learning_rate/--learning-rate: invalid float value: 'abc'", {"learning_rate": "abc"})
    "--set learning_rate=abc: invalid float value: 'abc'"
    >>> _as_set("argument --seed: invalid int value: 'x'", {})
    "argument --seed: invalid int value: 'x'"
    """
    for key, value in (overrides or {}).items():
        head = f"argument --{key}"
        if message.startswith(head + ":") or message.startswith(head + "/"):
            return f"--set {key}={value}:" + message.split(":", 1)[1]
    return message


def _unknown_set(message: str, overrides: dict[str, Any] | None) -> str:
    """HfArgumentParser's "not used" message as the ``--set`` key the user wrote, in the one wording of an unknown
    key (``config.unknown_key_error``: close matches, then the known fields)."""
    import dataclasses

    from trl import GRPOConfig

    from codegrep.config import unknown_key_error
    from codegrep.rl.trainer import CodeGrepArgs

    unknown = [k for k in (overrides or {}) if "not used by the HfArgumentParser" in message and f"'--{k}'" in message]
    if not unknown:
        return message
    fields = [f.name for cls in (CodeGrepArgs, GRPOConfig) for f in dataclasses.fields(cls)]
    return str(unknown_key_error(unknown[0], fields, f"--set {unknown[0]}"))


def _null_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The overrides that go in as values, not through TrlParser's command line: bools given to a field not typed
    ``bool`` (``scale_rewards=false``, which TRL maps from the bool only), and nulls (``--set KEY=``, empty, or
    ``--set KEY=null``) of fields that take null
    (``train_tasks``: every task; ``name``: the default run name). TrlParser's command line cannot say null: the
    string 'None' became the run name, the runs directory (``out=``: runs written to ./None), the model, a
    ``warm_start_dir``; a field that takes no null is one line naming the key."""
    import dataclasses

    from trl import GRPOConfig

    from codegrep.config import _describe, _hints, type_ok
    from codegrep.rl.trainer import CodeGrepArgs

    nulls: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        for cls in (CodeGrepArgs, GRPOConfig):
            if key not in {f.name for f in dataclasses.fields(cls)}:
                continue
            tp = _hints(cls).get(key, Any)
            if value is None:
                if key == "report_to":  # transformers turns a null report_to into [None], refused by the Trainer
                    raise ConfigError("--set report_to: no value (empty or null); write report_to=none for no "
                                      "integration")
                if not type_ok(None, tp):
                    raise ConfigError(f"--set {key}: no value (empty or null); {key} must be {_describe(tp)} (drop "
                                      "this --set to keep the train YAML's value)")
                nulls[key] = None
            elif isinstance(value, bool) and tp is not bool:  # scale_rewards=false: on a command line the string
                nulls[key] = value  # 'false', which TRL's bool mapping never sees (a ValueError at the first reward)
            break
    return nulls


def parse_train_args(config: str | Path, overrides: dict[str, Any] | None = None,
                     argv: Sequence[str] = ()) -> TrainArgs:
    """(CodeGrepArgs, GRPOConfig) from a train YAML (or profile) plus overrides, through TRL's TrlParser: the
    stand-alone ``codegrep train`` command line. In-process callers holding a profile use :func:`train_arguments`."""
    from trl import GRPOConfig, TrlParser

    from codegrep.rl.trainer import CodeGrepArgs

    parser = TrlParser((CodeGrepArgs, GRPOConfig))
    path = train_config_path(config)
    nulls = _null_overrides(overrides)
    args = ["--config", str(path), *overrides_to_argv({k: v for k, v in (overrides or {}).items() if k not in nulls}),
            *argv]
    if nulls:  # a null reaches the dataclass as a YAML null does (on a command line it was the string 'None')
        yaml_defaults = parser.set_defaults_with_config
        parser.set_defaults_with_config = lambda **config: yaml_defaults(**{**config, **nulls})  # type: ignore[method-assign]

    def refuse(message: str) -> NoReturn:  # argparse's own refusals (an ill-typed value): one line, not TRL's usage
        raise ConfigError(f"{path}: {_as_set(message, overrides)}")

    parser.error = refuse  # type: ignore[method-assign]
    _check_yaml_types(_yaml_settings(path), set(overrides or {}), path)
    _check_grpo_ranges({**_yaml_settings(path), **(overrides or {})}, set(overrides or {}), path)
    _check_choices({**_yaml_settings(path), **(overrides or {})}, set(overrides or {}), path)
    try:
        cg, grpo = parser.parse_args_and_config(args)
    except ConfigError:
        raise
    except ValueError as exc:  # TRL/HF refuse an unknown or ill-typed setting: name the file, keep it one line
        raise ConfigError(f"{path}: {_unknown_set(str(exc), overrides)}") from None
    given = set(overrides or {}) | {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}
    _check_ranges(cg, given, path)
    _check_files(cg, given, path)
    _check_steps(grpo, path)
    return TrainArgs(cg, grpo)


def train_arguments(cfg: dict[str, Any], overrides: dict[str, Any] | None = None,
                    config: str | Path | None = None) -> TrainArgs:
    """A run's argument sets for a RESOLVED profile ``cfg`` (notebook parameters and ``--set`` included), the
    profile never read again: the train YAML the profile names (``train.config``; ``config`` replaces it, e.g. the
    ablation's study YAML), then the profile's own ``train.*`` keys, then ``overrides``. ``profile`` is ``cfg``'s
    name (run names start with it); a train YAML's ``profile`` key only serves the stand-alone
    ``codegrep train --config X.yaml``, which loads that profile once (:func:`train_command`).

    Built from one mapping (``HfArgumentParser.parse_dict``, as TrlParser would from the same YAML; the YAML's
    ``env`` is applied the same way): the same objects :func:`parse_train_args` builds (tested).
    """
    from trl import GRPOConfig, TrlParser

    from codegrep.files import read_text
    from codegrep.rl.trainer import CodeGrepArgs

    path = Path(config) if config is not None else profile_train_yaml(cfg)
    if not path.is_file():
        raise ConfigError(f"train config {path}: file not found")
    data = load_yaml(read_text(path, "train config"), str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of settings, got {type(data).__name__}")
    env = data.pop("env", None) or {}
    if not isinstance(env, dict):
        raise ConfigError(f"{path}: env must be a mapping of environment variables")
    for key, value in env.items():  # TrlParser's rule for a train YAML's env:
        os.environ[key] = str(value)
    given = {k: v for k, v in section(cfg, "train").items() if k != "config"}
    given.update(overrides or {})
    _check_yaml_types(data, set(given), path)
    data.update(given)
    data["profile"] = str(cfg["profile"])
    _check_grpo_ranges(data, set(given), path)
    _check_choices(data, set(given), path)
    try:
        cg, grpo = TrlParser((CodeGrepArgs, GRPOConfig)).parse_dict(data)
    except (TypeError, ValueError) as exc:  # an unknown or ill-typed setting: name the file, keep it one line
        raise ConfigError(f"{path}: {exc}") from None
    _check_ranges(cg, set(given), path)
    _check_files(cg, set(given), path)
    _check_steps(grpo, path)
    return TrainArgs(cg, grpo)


def _generation_precision(cfg: dict[str, Any], cg: Any, grpo: Any) -> str | None:
    """What config.json records as the rollouts' decoding precision: the agent section's ``decode_precision``
    resolved on this CPU (fp32 by default), None on a GPU run (TRL's settings)."""
    from codegrep.agent.precision import resolve_precision

    if not cpu_precision_of(cg, grpo):
        return None
    return resolve_precision(section(cfg, "agent").get("decode_precision") or "fp32", name="agent.decode_precision")


def cpu_precision_of(cg: Any, grpo: Any) -> str | None:
    """The precision a CPU run trains in (SFT and the GRPO loss), from ``cpu_precision``; ``None`` on GPU runs
    (TRL's ``bf16``/``fp16`` settings stand there). Generation is fp32 unless ``agent.decode_precision`` says
    otherwise (:func:`_generation_precision`; docs/training.md)."""
    import torch

    from codegrep.agent.precision import resolve_precision

    if not grpo.use_cpu and torch.cuda.is_available():
        return None
    return resolve_precision(cg.cpu_precision)


def sft_bf16(cg: Any, grpo: Any) -> bool:
    """Whether a supervised stage (warm start, expert iteration) of this run trains in bf16: TRL's ``bf16`` on a GPU
    run, ``cpu_precision`` on a CPU one (:func:`cpu_precision_of`).

    >>> from types import SimpleNamespace as NS
    >>> sft_bf16(NS(cpu_precision="fp32"), NS(use_cpu=True, bf16=True)), sft_bf16(NS(cpu_precision="bf16"), NS(use_cpu=True, bf16=False))
    (False, True)
    """
    cpu = cpu_precision_of(cg, grpo)
    return bool(grpo.bf16) if cpu is None else cpu == "bf16"


def versions() -> dict[str, str]:
    import datasets
    import torch
    import transformers
    import trl

    import codegrep

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__, "datasets": datasets.__version__, "codegrep": codegrep.__version__,
            "platform": platform.platform()}


def train(cfg: dict[str, Any], args: TrainArgs | tuple[Any, Any]) -> Path:
    """Train one run of the resolved profile ``cfg`` (tasks, env and agent sections as given: notebook overrides
    reach training) with ``args`` (:func:`train_arguments` or :func:`parse_train_args`); returns its directory.
    A finished run is not retrained unless ``resume`` asks."""
    from codegrep.agent.models import resolve_model

    cg, grpo = args
    run_dir = Path(cg.out) / cg.run_name(grpo.seed)
    # refusals first, before any work (the model's one-time conversion takes a minute):
    output_dir(run_dir, "--out")  # OUT (or OUT/NAME) an existing file: one line now, not after the model is ready
    resume_from = resume_checkpoint(run_dir) if cg.resume else None  # nothing to resume: one line, at once
    resolve_model(cg.model)  # a mistyped model fails here, before an earlier run of this name is replaced
    if not cg.resume and run_dir.exists():
        shutil.rmtree(run_dir)  # a fresh run never mixes with an older one's metrics or checkpoints
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    trainer = build_trainer(cfg, cg, grpo, run_dir)
    trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    if cg.save_final_model:
        trainer.save_model(str(run_dir / "final"))
        trainer.processing_class.save_pretrained(str(run_dir / "final"))
    write_atomic(run_dir / "done.json", json.dumps({"seconds": time.perf_counter() - started,
                                                   "steps": trainer.state.global_step}, indent=1))
    return run_dir


def train_command(config: str | Path, overrides: dict[str, Any] | None = None) -> Path:
    """``codegrep train --config X``: ``X`` a train YAML (TrlParser: YAML + command line; the YAML's ``profile``
    names the profile, loaded here once) or a profile (name or YAML; its ``train.config`` and ``train.*`` keys,
    and the run belongs to that profile, whatever its train YAML's ``profile`` says)."""
    overrides = dict(overrides or {})
    if _is_train_yaml(config):
        args = parse_train_args(config, overrides)
        cfg = load_profile(args.codegrep.profile)
    else:
        cfg = load_profile(config)
        extra = {k: v for k, v in section(cfg, "train").items() if k != "config"}
        args = parse_train_args(profile_train_yaml(cfg), {**extra, **overrides, "profile": cfg["profile"]})
    return train(cfg, args)


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


@dataclass
class TrainingInputs:
    """What a run trains on, from the resolved profile: GRPO prompts, the train split the warm start learns from,
    the environment, and the episode limits (``agent``) the rollouts use, with their ``config.json`` record."""

    tasks: list[Any]
    split_tasks: list[Any]
    resolver: Any
    pool: Any
    tools: Any
    env: dict[str, Any]
    agent: Any
    episode: dict[str, Any]
    evaluation_ids: set[str]


def training_inputs(cfg: dict[str, Any], cg: Any) -> TrainingInputs:
    """The run's tasks, environment and episode limits from the resolved profile ``cfg`` (never re-read)."""
    from codegrep.data.tasks import profile_tasks
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig

    env_sec = section(cfg, "env")
    name = cfg.get("_source") or cfg.get("profile")
    # the warm start always learns from the profile's train split, so every run of a profile (the main run, the
    # ablation's screen and arms on their pool) starts from one cached warm start
    from codegrep.data.default_set import task_kind

    split_tasks, resolver = profile_tasks(cfg, split="train", limit=cg.train_tasks)
    tasks = [t for t in split_tasks if task_kind(t.repo) in cg.task_kinds]  # GRPO prompts: the run's task kinds
    if cg.train_task_ids:  # an explicit pool of GRPO prompts (the ablation's pre-screen), in the order given
        by_id = {t.instance_id: t for t in profile_tasks(cfg, split="train", limit=None)[0]}
        missing = [i for i in cg.train_task_ids if i not in by_id]
        if missing:
            raise ValueError(f"--train_task_ids: not train-split tasks of profile {name}: {missing[:5]}")
        tasks = [by_id[i] for i in cg.train_task_ids]
    if not tasks:
        raise ValueError(f"profile {name}: no train-split tasks of kinds {cg.task_kinds}")
    agent, episode = episode_config(cfg, cg)
    return TrainingInputs(tasks, split_tasks, resolver, WorktreePool.from_config(env_sec), ToolConfig.from_dict(env_sec),
                          env_sec, agent, episode, evaluation_ids_of(cfg))


def rollout_runner(inputs: TrainingInputs, cg: Any, grpo: Any) -> Any:
    """The GRPO rollouts (``rollout_func``): the run's tasks played with ``inputs.agent``'s episode limits."""
    from codegrep.rl.rollout import RolloutRunner

    agent = inputs.agent
    scales = cg.efficiency_scales or [agent.max_turns, agent.max_turns * agent.max_calls_per_turn,
                                      agent.max_turns * grpo.max_completion_length]
    return RolloutRunner(inputs.tasks, inputs.resolver, inputs.pool, agent, env_mode=inputs.env.get("mode", "worktree"),
                         tool_config=inputs.tools, fbeta=cg.fbeta, cost_weights=cg.efficiency_weights,
                         cost_scales=scales, reward=cg.retrieval_reward, seen_credit=cg.seen_credit)


def build_trainer(cfg: dict[str, Any], cg: Any, grpo: Any, run_dir: Path) -> Any:
    """Everything a run of the resolved profile ``cfg`` needs, wired into ``CodeGrepGRPOTrainer`` (also writes
    config.json, versions.json)."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from codegrep.agent.precision import fresh_accelerator_state, precision_record
    from codegrep.agent.protocol import build_messages
    from codegrep.agent.turn_controls import TurnControls
    from codegrep.rl.advantages import reward_weights
    from codegrep.rl.rewards import REWARD_FUNCS
    from codegrep.rl.trainer import CodeGrepGRPOTrainer, MetricsJsonlCallback

    seed_everything(grpo.seed)
    inputs = training_inputs(cfg, cg)
    agent, episode, tasks = inputs.agent, inputs.episode, inputs.tasks
    demo_agent = demonstration_agent(agent, cg)
    model_path, demos = initial_policy(cg, grpo, cfg, inputs.split_tasks, inputs.resolver, inputs.pool, demo_agent,
                                       inputs.env, inputs.tools, exclude=inputs.evaluation_ids)
    episode["demonstrations_max_turns"] = demo_agent.max_turns
    write_manifest(run_dir, demos, [t.instance_id for t in tasks], inputs.evaluation_ids)
    grpo.output_dir = str(run_dir / "checkpoints")
    grpo.reward_weights = reward_weights(cg.efficiency_layer, cg.format_weight, cg.efficiency_lambda)
    if cg.efficiency_layer == "normalize_then_sum":
        grpo.multi_objective_aggregation = "normalize_then_sum"
    rollout = rollout_runner(inputs, cg, grpo)
    data = Dataset.from_list([{"prompt": build_messages(t.problem_statement, agent), "instance_id": t.instance_id}
                              for t in tasks])
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    write_atomic(run_dir / "config.json", json.dumps({"codegrep": asdict(cg), "grpo": grpo.to_dict(),
                                                     "initial_policy": str(Path(model_path).resolve()), "n_train_tasks": len(tasks),
                                                     "efficiency_scales": list(rollout.cost_scales), "episode": episode,
                                                     "profile_source": cfg.get("_source"),
                                                     "profile_inputs": profile_inputs(cfg, cg),
                                                     "profile_overrides": cfg.get("_notebook_params") or {},
                                                     "precision": {**precision_record(cg.cpu_precision),
                                                                   "training": cpu_precision_of(cg, grpo),
                                                                   "generation": _generation_precision(cfg, cg, grpo)}},
                                                    indent=1, default=str))
    write_atomic(run_dir / "versions.json", json.dumps(versions(), indent=1))
    fresh_accelerator_state()  # the warm start's SFTTrainer, in this process, may have used another precision
    trainer = CodeGrepGRPOTrainer(model=str(model_path), reward_funcs=list(REWARD_FUNCS), args=grpo,
                                  train_dataset=data, processing_class=tokenizer, rollout_func=rollout,
                                  codegrep_args=cg, reference_builder=build_reference,
                                  turn_controls=TurnControls.from_agent(  # the stops/constraints evaluation uses
                                      {**section(cfg, "agent"), "max_calls_per_turn": agent.max_calls_per_turn}),
                                  draft_tokens=int(section(cfg, "agent").get("draft_tokens") or 0),
                                  decode_precision=section(cfg, "agent").get("decode_precision") or "fp32")
    trainer.add_callback(MetricsJsonlCallback(run_dir / "metrics.jsonl"))
    from codegrep.rl.progress import GRPO_FIELDS, plain_progress

    plain_progress(trainer, "GRPO", GRPO_FIELDS, grpo.max_steps)  # one line per step instead of raw log dicts
    return trainer


MEASUREMENT_ONLY = {  # settings that change what is logged or where, never the run itself
    "name", "out", "resume", "warm_start_dir", "save_final_model", "kl_probe_set", "kl_probe_every",
    "log_update_norm", "record_groups", "eval_tasks", "curve_eval_tasks", "lambda_grid", "output_dir", "logging_dir", "save_strategy",
    "save_steps", "save_total_limit", "run_name", "reward_weights", "disable_tqdm", "logging_steps",
    "train_tasks", "train_task_ids", "profile", "report_to"}


def run_settings(cg: Any, grpo: Any) -> dict[str, Any]:
    """A run's defining settings (both argument sets, JSON-normalised, measurement-only keys dropped)."""
    both = {**json.loads(json.dumps(asdict(cg) if not isinstance(cg, dict) else cg, default=str)),
            **json.loads(json.dumps(grpo.to_dict() if not isinstance(grpo, dict) else grpo, default=str))}
    return {k: v for k, v in both.items() if k not in MEASUREMENT_ONLY and not k.startswith(("ablation_", "hub_",
                                                                                               "push_to_hub",
                                                                                               "expert_iteration"))}


def profile_inputs(cfg: dict[str, Any], cg: Any) -> dict[str, Any]:
    """What of the resolved profile a run's training depends on: the seed, the tasks section, the tool settings and
    the episode it plays (``config.json`` keeps it, so a finished run is reused only for the same profile)."""
    from codegrep.env.tools import ToolConfig

    env = section(cfg, "env")
    record = {"seed": cfg.get("seed"), "tasks": section(cfg, "tasks"), "env_mode": env.get("mode", "worktree"),
              "tools": asdict(ToolConfig.from_dict(env)), "episode": episode_config(cfg, cg)[0].to_dict()}
    return json.loads(json.dumps(record, sort_keys=True, default=str))


def finished_with(run_dir: Path, cg: Any, grpo: Any, cfg: dict[str, Any] | None = None) -> bool:
    """Whether ``run_dir`` holds a finished run with these settings and, given ``cfg``, trained on the same profile
    inputs (a changed train YAML, or a notebook's override of the profile, retrains; runs written before the profile
    inputs were recorded are compared on their settings only)."""
    if not (run_dir / "done.json").is_file() or not (run_dir / "config.json").is_file():
        return False
    saved = json.loads((run_dir / "config.json").read_text())
    if run_settings(saved["codegrep"], saved["grpo"]) != run_settings(cg, grpo):
        return False
    return cfg is None or "profile_inputs" not in saved or saved["profile_inputs"] == profile_inputs(cfg, cg)


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
        from codegrep.data.default_set import task_kind
        from codegrep.data.tasks import whole_split_tasks

        pool_tasks, pool_resolver = whole_split_tasks(cfg)  # the whole train split, not its sample of GRPO prompts
        groups["synthetic"] = []
        for kind in cg.task_kinds:  # real issue texts first where asked: they teach identifier greps
            left = cg.sft_max_demos - len(groups["synthetic"]) if cg.sft_max_demos else None
            if left is not None and left <= 0:
                break
            groups["synthetic"] += build.expert_demonstrations(
                [t for t in pool_tasks if t.instance_id not in exclude and task_kind(t.repo) == kind],
                pool_resolver, pool, agent, limit=left, seed=0, env_mode=env_sec.get("mode", "objects"),
                tool_config=tools, choice=cg.demo_choice)
    if "recorded" in sources:
        groups["recorded"] = build.recorded_demonstrations(cg, cfg, agent, exclude)
    if "catm" in sources:
        groups["catm"] = build.catm_demonstrations(cfg, Path(cg.out).parent)
    for name in groups:
        groups[name] = [d for d in groups[name] if d["instance_id"] not in exclude]
    return build.mix(groups, cg.sft_max_demos) + first_turn(cg, cfg, agent, exclude)


def first_turn(cg: Any, cfg: dict, agent: Any, exclude: set[str]) -> list[dict[str, Any]]:
    """``cg.first_turn_demos`` first-turn demonstrations (:func:`codegrep.rl.demos.first_turn_demonstrations`)
    from every shipped SWE-bench row (Verified and Lite) outside the evaluation split's repositories."""
    if not cg.first_turn_demos:
        return []
    from codegrep.data.shipped import lite_rows_path, verified_rows_path
    from codegrep.data.sources import read_rows
    from codegrep.data.tasks import evaluation_repos
    from codegrep.rl import demos as build

    rows = read_rows(verified_rows_path()) + read_rows(lite_rows_path())
    return build.first_turn_demonstrations(rows, agent, limit=cg.first_turn_demos, seed=0,
                                           exclude_ids=set(exclude), exclude_repos=evaluation_repos(cfg))


def warm_start_settings(cg: Any, base: Any, bf16: bool) -> dict[str, Any]:
    """What a cached warm start is keyed by besides its demonstrations: the base model's identity, the SFT settings
    and recipe, the precision, and ``sft_seed``, ``sft_lr_scheduler`` and ``sft_reshuffle`` where not at their
    defaults (which key a warm start as before those fields existed, so cached warm starts stay valid; each changes
    the training, so another value is another model).

    >>> from types import SimpleNamespace as A
    >>> cg = A(sft_epochs=2.0, sft_learning_rate=2e-4, sft_batch_size=4, sft_seed=0, sft_lr_scheduler="constant",
    ...        sft_reshuffle=False)
    >>> "sft_seed" in warm_start_settings(cg, "m", True), warm_start_settings(A(**{**vars(cg), "sft_seed": 1}), "m", True)["sft_seed"]
    (False, 1)
    >>> warm_start_settings(A(**{**vars(cg), "sft_reshuffle": True}), "m", True)["sft_reshuffle"]
    True
    """
    from codegrep.rl import sft

    settings = {"base": base, "epochs": cg.sft_epochs, "lr": cg.sft_learning_rate, "bs": cg.sft_batch_size,
                "sft": sft.SFT_RECIPE, "bf16": bf16}
    if cg.sft_seed:
        settings["sft_seed"] = cg.sft_seed
    settings.update(sft.recipe_settings(cg.sft_lr_scheduler, cg.sft_reshuffle))
    return settings


def initial_policy(cg: Any, grpo: Any, cfg: dict, tasks: list, resolver: Any, pool: Any, agent: Any,
                   env_sec: dict, tools: Any, exclude: set[str] = frozenset(),
                   sources: list[str] | None = None) -> tuple[Path, list[dict[str, Any]]]:
    """The base model, or its warm start (cached by demonstrations + settings, shared by every arm and seed),
    and the demonstrations it was trained on."""
    from codegrep.agent.models import model_identity, resolve_model
    from codegrep.rl import sft

    base = resolve_model(cg.model)
    bf16 = sft_bf16(cg, grpo)
    if not cg.warm_start:
        return base, []
    demos = demonstrations(cg, cfg, tasks, resolver, pool, agent, env_sec, tools, exclude, sources)
    settings = warm_start_settings(cg, model_identity(base), bf16)
    cache = Path(cg.warm_start_dir or Path(cg.out) / "_warm_start")
    out = cache / sft.demos_key([d["messages"] for d in demos], settings)
    out.parent.mkdir(parents=True, exist_ok=True)
    path = sft.warm_start(base, [d["messages"] for d in demos], out, epochs=cg.sft_epochs,
                          learning_rate=cg.sft_learning_rate, batch_size=cg.sft_batch_size, seed=cg.sft_seed,
                          use_cpu=grpo.use_cpu, bf16=bf16, lr_scheduler=cg.sft_lr_scheduler,
                          reshuffle=cg.sft_reshuffle)
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
