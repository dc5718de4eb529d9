"""GRPO on TRL for the retrieval agent: the run's own arguments and a thin ``GRPOTrainer`` subclass.

The subclass overrides ``_generate_and_score_completions``, to (1) hand the batch's rows
to the multi-turn rollout (``codegrep.rl.rollout``), (2) add the advantage-layer efficiency term
after TRL's group normalisation, (3) log the episode numbers and the KL probe. On the plain transformers
backend (one process, no vLLM) it also routes ``_generate_single_turn`` through the prefix cache
(``codegrep.agent.prefix_cache``), so a rollout's later turns prefill only the new observation; outputs are
the same tokens. Everything else (vLLM, loss, clipping, DeepSpeed, checkpoints) is TRL's.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation

from codegrep.files import open_append
from codegrep.rl.advantages import (LAYERS, POST_NORM_LAYERS, advantage_parts, efficiency_advantage,
                                     gated_efficiency_advantage, tied_groups)
from codegrep.rl.kl import ExactProbeCallback, KLProbe, masked_mean_kl, model_token_mask, read_probe_set


@dataclass
class CodeGrepArgs:
    """CodeGrep's training arguments; TRL's ``GRPOConfig`` carries the rest (same YAML, same CLI)."""

    FIELD_RANGES: ClassVar[dict[str, str]] = {  # checked by config.check_fields when the arguments are parsed
        "max_turns": ">= 1", "max_calls_per_turn": ">= 1", "max_observation_tokens": ">= 1",
        "demo_max_turns": ">= 1", "ablation_max_turns": ">= 1", "efficiency_lambda": ">= 0", "fbeta": "> 0",
        # counts whose 0 the code reads as "not set" (all tasks, every demonstration): a 0 is refused, not widened
        "train_tasks": ">= 1", "sft_max_demos": ">= 1", "eval_tasks": ">= 1", "curve_eval_tasks": ">= 1",
        "data_ablation_eval_tasks": ">= 1", "sft_batch_size": ">= 1", "sft_epochs": "> 0", "sft_seed": ">= 0",
        "recorded_max_calls": ">= 1", "first_turn_demos": ">= 0",
        # weights and credits a sign flip would turn into their opposite; a list's range holds for each item
        "format_weight": ">= 0", "seen_credit": "0..1", "lambda_grid": ">= 0", "efficiency_weights": ">= 0",
        "efficiency_scales": "> 0", "sft_learning_rate": ">= 0", "max_issue_chars": ">= 1", "prefix_cache_mb": ">= 0",
        # steps between probes (0 was read as 1), the ablation's and expert iteration's counts (0 read as "not set",
        # a screen of 1 sample read as 2: a pool needs two samples to show reward variance)
        "kl_probe_every": ">= 1", "ablation_probe_every": ">= 1", "ablation_seeds": ">= 0", "ablation_max_steps": ">= 1",
        "ablation_prompts_per_step": ">= 1", "ablation_screen_samples": ">= 2", "ablation_num_generations": ">= 2",
        "ablation_screen_tasks": ">= 1", "ablation_pool_size": ">= 1", "ablation_probe_size": ">= 1",
        "expert_iteration_tasks": ">= 1", "expert_iteration_samples": ">= 1", "expert_iteration_per_task": ">= 1",
        "expert_iteration_epochs": "> 0", "expert_iteration_learning_rate": ">= 0"}

    profile: str = field(default="smoke", metadata={"help": "Project profile (ci|smoke|paper or a YAML path) whose "
                                                              "tasks/env/agent sections the run uses."})
    model: str = field(default="smollm2", metadata={"help": "Policy: 'smollm2' (offline), a model dir or a hub id."})
    out: str = field(default="artifacts/train", metadata={"help": "Runs are written to OUT/RUN_NAME."})
    name: str | None = field(default=None, metadata={"help": "Run name; default <profile>-<layer>-lam<λ>-s<seed>."})
    resume: bool = field(default=False, metadata={"help": "Continue from the run's last checkpoint."})
    efficiency_layer: str = field(default="advantage", metadata={
        "help": f"Where the efficiency signal enters: one of {LAYERS}."})
    efficiency_lambda: float = field(default=0.1, metadata={"help": "λ, the efficiency coefficient (both layers)."})
    lambda_grid: list[float] = field(default_factory=lambda: [0.1], metadata={
        "help": "λ values the ablation sweeps (same grid for every layer)."})
    efficiency_weights: list[float] = field(default_factory=lambda: [1.0, 0.0, 0.0], metadata={
        "help": "Cost mix over (rounds, tool calls, generated tokens)."})
    efficiency_scales: list[float] | None = field(default=None, metadata={
        "help": "Budgets normalising (rounds, calls, tokens); default (max_turns, max_turns*max_calls, "
                "max_turns*max_completion_length)."})
    fbeta: float = field(default=0.5, metadata={"help": "β of the retrieval F-beta reward (<1 favours precision)."})
    retrieval_reward: str = field(default="f_beta", metadata={
        "help": "Retrieval reward trained on: 'f_beta', or 'rank' (1/rank of the first target file submitted, else "
                "seen_credit when an observation showed a target; codegrep.rl.rewards.rank_credit)."})
    seen_credit: float = field(default=0.25, metadata={
        "help": "With retrieval_reward 'rank': credit of an episode that submitted a wrong file after an "
                "observation showed a target file."})
    format_weight: float = field(default=0.2, metadata={"help": "Weight of the format term in the task reward."})
    max_turns: int | None = field(default=None, metadata={
        "help": "TRAINING-ONLY override of the profile's agent.max_turns (null = the profile's, which evaluation "
                "uses; a set value is reported in config.json under 'episode')."})
    max_calls_per_turn: int | None = field(default=None, metadata={
        "help": "Training-only override of agent.max_calls_per_turn (null = the profile's)."})
    max_observation_tokens: int | None = field(default=None, metadata={
        "help": "Training-only override of agent.max_observation_tokens (null = the profile's)."})
    max_issue_chars: int | None = field(default=None, metadata={
        "help": "Training-only override of agent.max_issue_chars (null = the profile's)."})
    train_tasks: int | None = field(default=None, metadata={"help": "Use at most this many train-split tasks."})
    train_task_ids: list[str] | None = field(default=None, metadata={
        "help": "Train only on these train-split instance ids, in this order (the ablation's screened pool)."})
    warm_start: bool = field(default=True, metadata={"help": "Supervised warm start on demonstrations first."})
    sft_sources: list[str] = field(default_factory=lambda: ["synthetic"], metadata={
        "help": "Demonstrations: 'synthetic' (rejection-sampled scripted-expert episodes on the train split's "
                "task_kinds, codegrep.rl.demos), "
                "'recorded' (real mini-swe-agent runs converted by codegrep.mining.run_converter) and/or 'catm'. "
                "With several sources and sft_max_demos, they are taken in turn (equal shares)."})
    task_kinds: list[str] = field(default_factory=lambda: ["real", "docstring"], metadata={
        "help": "Kinds of train-split task the run uses: 'real' (a real issue text, e.g. the Lite sympy pool) "
                "and/or 'docstring' (the default set's English descriptions of removed code, whose scripted expert "
                "greps words, not identifiers). 'synthetic' demonstrations are played on them in this order until "
                "sft_max_demos are kept; GRPO prompts (and the ablation's screen) are drawn from them. A kind "
                "left out is not used; train_task_ids, when set, wins."})
    recorded_runs: list[str] | None = field(default=None, metadata={
        "help": "Folders/files of recorded mini-swe-agent runs for 'recorded' (null = the shipped 400 runs). "
                "Runs on evaluation instances are always excluded."})
    recorded_max_calls: int = field(default=8, metadata={
        "help": "Exploration calls kept per recorded demonstration."})
    data_ablation_arms: list[str] = field(default_factory=lambda: ["synthetic", "recorded", "synthetic+recorded"],
                                          metadata={"help": "Demonstration mixes the data ablation compares "
                                                            "(notebook 03), each warm-started on sft_max_demos."})
    data_ablation_eval_tasks: int | None = field(default=None, metadata={
        "help": "Evaluation instances of the data ablation (null = every eval instance)."})
    sft_epochs: float = field(default=2.0, metadata={"help": "Warm-start epochs over the demonstrations."})
    sft_learning_rate: float = field(default=5e-5, metadata={"help": "Warm-start learning rate."})
    sft_batch_size: int = field(default=4, metadata={"help": "Warm-start per-device batch size."})
    sft_seed: int = field(default=0, metadata={
        "help": "Seed of the warm start's batch order (and TRL's SFT seed). `seed` seeds GRPO only, so every arm and "
                "seed of a study starts from one warm start; another sft_seed is another warm start (a training-seed "
                "replicate: docs/training.md, 'Seed replicates')."})
    sft_lr_scheduler: str = field(default="constant", metadata={
        "help": "Warm-start learning-rate schedule: 'constant', 'linear' or 'cosine' (decaying to 0, no warmup); "
                "a decaying rate lets the last batches decide less (docs/training.md, 'Warm-start recipe')."})
    sft_reshuffle: bool = field(default=False, metadata={
        "help": "Draw the warm start's length-bucketed batches in a fresh seeded order each epoch (false: every "
                "epoch repeats the first epoch's order; codegrep.rl.sft.BucketOrder)."})
    warm_start_dir: str | None = field(default=None, metadata={
        "help": "Cache of warm-started models (default OUT/_warm_start); shared by every arm and seed."})
    sft_max_demos: int | None = field(default=None, metadata={"help": "Use at most this many demonstrations."})
    first_turn_demos: int = field(default=0, metadata={
        "help": "Turn-1-only demonstrations ADDED to the warm start's (beyond sft_max_demos; every data-ablation arm "
                "gets the same ones): the scripted expert's first-turn greps on shipped SWE-bench rows of "
                "repositories the evaluation split never uses, kept when a term occurs in the row's reference "
                "patch (codegrep.rl.demos.first_turn_demonstrations). 0 = none."})
    demo_choice: str = field(default="first-listed", metadata={
        "help": "Which file a scripted-expert demonstration submits (codegrep.retrievers.scripted.STRATEGIES): "
                "'first-listed', the file its observation lists first (a rule the policy can copy), or 'oracle-shown', "
                "HINDSIGHT: a gold file the observation showed, chosen with the answer (the policy sees only the issue "
                "and the observation, so it must learn which cues pick it). Both are rejection sampled alike."})
    demo_max_turns: int | None = field(default=None, metadata={
        "help": "DERIVED, not a setting: max_turns of the warm start's demonstration episodes (default: the run's "
                "max_turns). The ablation sets it to the main run's turns when ablation_max_turns differs, so its "
                "screen and arms start from notebook 03's warm start instead of training another; config.json "
                "records it under episode.demonstrations_max_turns."})
    cpu_precision: str = field(default="auto", metadata={
        "help": "Arithmetic precision on CPU (SFT warm start, GRPO loss and KL probe; generation follows the profile's agent.decode_precision, fp32 by default): 'auto' = bf16 autocast where the CPU "
                "has native bf16 (avx512_bf16 / amx_bf16), fp32 elsewhere; 'fp32' turns reduced precision off; "
                "'bf16' forces it (emulated, slower, without those flags). Weights stay fp32. Recorded in "
                "config.json. GPU runs use TRL's bf16/fp16 settings instead."})
    prefix_cache_mb: int = field(default=4096, metadata={"help": "Rollouts on the plain transformers backend: "
                                 "memory for reusing earlier turns' key/value states (0 = TRL's generate)."})
    unpad_loss_rows: bool = field(default=True, metadata={
        "help": "The loss's and the KL probe's forwards run each chunk of rows flushed left (real tokens from "
                "column 0, trailing pads only; rows alone where that leaves mostly pads) with no attention mask: "
                "CPU attention then runs its causal kernel instead of the masked one over the padded width "
                "(codegrep.rl.unpad; `codegrep bench train` flushed_speedup_over_padded). The same log-probs; "
                "false = TRL's padded batch forward."})
    loss_labelled_only: bool = field(default=True, metadata={
        "help": "The loss's, the reference's and the KL probe's log-probs run TRL's fused LM head on the scored "
                "(completion) positions only on CPU too, as TRL does on Triton GPUs; on CPU TRL otherwise "
                "projects every prompt position through the 49K-wide head and zeroes it after "
                "(codegrep.rl.unpad.labelled_positions_only). The same log-probs up to float rounding; false = "
                "TRL's CPU behaviour."})
    constrained_loss: bool = field(default=False, metadata={
        "help": "The loss and the KL probe read the log-probs of the distribution the rollouts sampled from: where a "
                "turn control (agent.copy_greps, argument_keys, min_greps, distinct_greps) banned tokens, the "
                "sampled token's log-prob is renormalised over the tokens it allowed (codegrep.rl.constrained). "
                "false: the model's unconstrained log-probs (TRL's, as with vLLM guided decoding), which lets a "
                "negative advantage move mass onto banned tokens unseen. Plain transformers backend only (where the "
                "controls apply); logged: constraints/allowed_mass."})
    kl_probe: bool = field(default=True, metadata={"help": "Log KL to the initial policy every step (also beta=0)."})
    kl_probe_set: str | None = field(default=None, metadata={
        "help": "JSONL of fixed probe sequences (prompt_ids, completion_ids, env_mask): log the exact "
                "full-vocabulary KL to the initial policy on them as `kl_exact` (needs kl_probe)."})
    kl_probe_every: int = field(default=1, metadata={"help": "Steps between exact probe-KL measurements "
                                                              "(the last step is always measured)."})
    log_update_norm: bool = field(default=False, metadata={
        "help": "Log the L2 norm of each optimizer step's parameter change (keeps one copy of the weights; "
                "single process only)."})
    record_groups: bool = field(default=False, metadata={
        "help": "Append every step's per-rollout F-beta, format and cost to RUN/groups.jsonl."})
    save_final_model: bool = field(default=True, metadata={"help": "Save the trained policy to RUN/final."})
    eval_tasks: int | None = field(default=None, metadata={"help": "Held-out tasks for before/after evaluation."})
    curve_eval_tasks: int | None = field(default=None, metadata={
        "help": "Held-out tasks on which the untrained and warm-start policies are evaluated (a seeded subset of "
                "the GRPO policy's evaluation tasks, the same for both; default: all of them). A budget knob: "
                "the GRPO policy and the baselines always see every evaluation task."})
    expert_iteration: bool = field(default=False, metadata={
        "help": "Notebook 03 also runs expert iteration beside GRPO (codegrep.rl.expert_iteration): sample the warm "
                "start on the main run's GRPO prompt pool, keep episodes whose first submitted file is gold (shown "
                "by an observation, patterns in the visible issue), fine-tune the warm start on them, evaluate it "
                "on the eval split like the GRPO policy. Not a setting of the main run (it never retrains it)."})
    expert_iteration_tasks: int | None = field(default=None, metadata={
        "help": "Tasks of the GRPO prompt pool expert iteration samples (a seeded subset; null = all)."})
    expert_iteration_samples: int = field(default=2, metadata={
        "help": "Episodes sampled per task (one seeded pass over the tasks each)."})
    expert_iteration_temperature: float = field(default=1.0, metadata={
        "help": "Sampling temperature of expert iteration's episodes (top_p 1; the agent's turn controls apply)."})
    expert_iteration_per_task: int = field(default=2, metadata={
        "help": "Kept (distinct) successful episodes per task at most."})
    expert_iteration_epochs: float = field(default=1.0, metadata={
        "help": "SFT epochs over the kept episodes (batch size sft_batch_size)."})
    expert_iteration_learning_rate: float = field(default=5e-5, metadata={
        "help": "SFT learning rate of expert iteration (constant)."})
    ablation_layers: list[str] = field(default_factory=lambda: ["none", "reward", "advantage", "gated"], metadata={
        "help": "Efficiency layers compared by the ablation (notebook 04); 'none' runs once per seed."})
    ablation_seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={
        "help": "Seeds; every arm of one seed sees the same task order and starts from the same sampler state."})
    ablation_max_steps: int = field(default=8, metadata={"help": "GRPO steps per ablation run."})
    ablation_prompts_per_step: int | None = field(default=None, metadata={
        "help": "Tasks (groups) per GRPO step in the ablation; default: the YAML's batch / num_generations."})
    ablation_max_turns: int | None = field(default=None, metadata={
        "help": "max_turns of the ablation runs (>= 3 lets rounds vary); default: max_turns."})
    ablation_screen_samples: int = field(default=2, metadata={
        "help": "Warm-start samples per train task in the pre-screen that builds the ablation's task pool."})
    ablation_num_generations: int | None = field(default=None, metadata={
        "help": "Group size G of the ablation runs (>= 2); default: num_generations."})
    ablation_screen_tasks: int | None = field(default=None, metadata={
        "help": "Train tasks the pre-screen samples (a seeded subset of the train split, seed = the run's seed); "
                "default: every train task. Each costs ablation_screen_samples episodes."})
    ablation_pool_size: int | None = field(default=None, metadata={
        "help": "Tasks in the ablation pool: about half with reward variance in the pre-screen, half without "
                "(fewer when the screen finds fewer); default: every screened task."})
    ablation_probe_size: int = field(default=8, metadata={
        "help": "Fixed probe sequences (pre-screen rollouts of the initial policy) for the exact KL."})
    ablation_probe_every: int = field(default=1, metadata={"help": "Steps between exact probe-KL measurements."})

    def __post_init__(self) -> None:
        import dataclasses

        from codegrep.agent.precision import PRECISIONS

        blank = [f.name for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), str) and not getattr(self, f.name).strip()]
        if blank:  # name: "" fell back to the default run name, out: "" put runs in the current directory
            raise ValueError(f"--{blank[0]}: must not be empty (leave the setting out for its default)")

        if self.cpu_precision not in PRECISIONS:
            raise ValueError(f"--cpu_precision {self.cpu_precision!r}: expected one of {PRECISIONS}")
        if self.efficiency_layer not in LAYERS:
            raise ValueError(f"--efficiency_layer {self.efficiency_layer!r}: expected one of {LAYERS}")
        if not self.lambda_grid:  # the ablation's arms are its layers times this grid: none would train
            raise ValueError("--lambda_grid is empty: the ablation needs at least one λ (e.g. [0.1])")
        bad = [k for k in self.ablation_layers if k not in LAYERS]
        if bad or not self.ablation_layers:
            raise ValueError(f"--ablation_layers {self.ablation_layers!r}: expected some of {list(LAYERS)}")
        from codegrep.rl.demos import SOURCES

        bad = [s for s in self.sft_sources if s not in (*SOURCES, "format")]
        if bad:  # 'format': the mechanism study's own pre-training (checked with warm_start in training_run)
            raise ValueError(f"--sft_sources {bad!r}: expected some of {list(SOURCES)}")
        bad = [a for a in self.data_ablation_arms if not a or any(s not in SOURCES for s in a.split("+"))]
        if bad:
            raise ValueError(f"--data_ablation_arms {bad!r}: each arm is one of {list(SOURCES)} or several joined "
                             "by '+' (e.g. 'synthetic+recorded')")
        if len(self.efficiency_weights) != 3:
            raise ValueError(f"--efficiency_weights needs 3 numbers (rounds, calls, tokens), "
                             f"got {self.efficiency_weights}")
        from codegrep.rl.rewards import RETRIEVAL_REWARDS

        if self.retrieval_reward not in RETRIEVAL_REWARDS:
            raise ValueError(f"--retrieval_reward {self.retrieval_reward!r}: expected one of {RETRIEVAL_REWARDS}")
        from codegrep.rl.sft import LR_SCHEDULES

        if self.sft_lr_scheduler not in LR_SCHEDULES:
            raise ValueError(f"--sft_lr_scheduler {self.sft_lr_scheduler!r}: expected one of {list(LR_SCHEDULES)}")
        from codegrep.retrievers.scripted import STRATEGIES

        if self.demo_choice not in STRATEGIES:
            raise ValueError(f"--demo_choice {self.demo_choice!r}: expected one of {list(STRATEGIES)}")
        bad = [k for k in self.task_kinds if k not in ("real", "docstring")]
        if bad or not self.task_kinds:
            raise ValueError(f"--task_kinds {self.task_kinds!r}: expected some of ['real', 'docstring']")
        if self.kl_probe_set and not self.kl_probe:  # was said when the trainer was built, after the warm start
            raise ValueError("--kl_probe_set needs --kl_probe true (the probe's frozen reference)")
        if self.name and (Path(self.name).is_absolute() or ".." in Path(self.name).parts
                          or os.path.normpath(self.name) == "."):  # OUT/NAME is removed before a fresh run
            raise ValueError(f"--name {self.name!r}: a run name is a directory under --out (not '.', no '..', not "
                             "absolute)")

    def run_name(self, seed: int) -> str:
        """The run's directory name.

        >>> CodeGrepArgs(profile="ci", efficiency_layer="reward", efficiency_lambda=0.1).run_name(3)
        'ci-reward-lam0.1-s3'
        """
        stem = Path(self.profile).stem
        return self.name or f"{stem}-{self.efficiency_layer}-lam{self.efficiency_lambda:g}-s{seed}"


class CodeGrepGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with the advantage-layer efficiency term and a log-only KL probe."""

    def __init__(self, *args: Any, codegrep_args: CodeGrepArgs, reference_builder: Any = None,
                 turn_controls: Any = None, draft_tokens: int = 0, decode_precision: str = "fp32", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.cg = codegrep_args
        self.turn_controls = turn_controls
        """Where a rollout turn's rows stop and which tokens they may write (``codegrep.agent.turn_controls``, from
        the profile's agent section: the rules evaluation decodes under); applied on the prefix-cache path."""
        self.draft_tokens = draft_tokens
        """Prompt-lookup drafts per decoding step on the prefix-cache path (the profile's ``agent.draft_tokens``;
        speculative sampling: the rollouts' distribution is unchanged)."""
        from codegrep.agent.precision import resolve_precision

        self.decode_precision = resolve_precision(decode_precision, name="agent.decode_precision") if self.args.use_cpu or \
            not torch.cuda.is_available() else "fp32"
        """Decoding arithmetic of the prefix-cache rollouts (the profile's ``agent.decode_precision``: a bf16 copy of
        the policy, made again after each optimizer step; ``prefix_cache.generate_with_prefix_cache``)."""
        self.current_rows: list[dict[str, Any]] = []
        self.last_scores: list[Any] = []
        self.turn_restrictions: list[list[Any]] | None = None
        """The last decoded turn's restrictions per row (``constrained_loss``; ``codegrep.rl.constrained``)."""
        self.row_restrictions: list[list[Any]] | None = None
        """Per row of the batch whose log-probs are computed next, the positions a turn control restricted (set by
        the rollout for the generation batch, by ``compute_loss`` for a micro-batch); None: unconstrained."""
        if self.cg.constrained_loss:
            from codegrep.rl.constrained import check_plain_head

            check_plain_head(self.accelerator.unwrap_model(self.model))
        if self.cg.efficiency_layer != "normalize_then_sum" and self.multi_objective_aggregation != \
                "sum_then_normalize":
            raise ValueError("efficiency layers reward/advantage/gated/none need multi_objective_aggregation="
                             "'sum_then_normalize' (normalize_then_sum is its own layer)")
        if self.scale_rewards not in ("group", "none"):
            raise ValueError(f"scale_rewards={self.scale_rewards!r}: the efficiency layers are defined on group "
                             "normalisation; use 'group' or 'none'")
        self.kl_probe: KLProbe | None = None
        self._loss_policy_logps: torch.Tensor | None = None
        if self.cg.kl_probe:
            ref = self.ref_model if self.ref_model is not None else reference_builder(self)
            self.kl_probe = KLProbe(ref)
        if self.cg.kl_probe_set:  # needs kl_probe (CodeGrepArgs checks it), the probe's frozen reference
            assert self.kl_probe is not None
            self.add_callback(ExactProbeCallback(self, self.kl_probe.reference, read_probe_set(self.cg.kl_probe_set),
                                                 self.cg.kl_probe_every))
        self.add_callback(StepTimerCallback(self, update_norm=self.cg.log_update_norm
                                            and not self.is_deepspeed_enabled))
        if self.rollout_func is not None:  # time generation (the whole multi-turn rollout) on its own
            self.rollout_func = _timed(self.rollout_func, self, "generation")
        self._timing: dict[str, float] = {}
        self._prefix_cache = self._make_prefix_cache()
        from codegrep.agent.turn_controls import TurnControls

        if self._prefix_cache is None and turn_controls not in (None, TurnControls()):  # some control is on
            import warnings

            warnings.warn(f"{turn_controls}: GRPO rollouts on this backend (vLLM, several processes, or "
                          "prefix_cache_mb 0) decode WITHOUT these turn controls; evaluation decodes with them",
                          stacklevel=2)
        from codegrep.agent.precision import resolve_precision

        # CPU: bf16 autocast around the loss's forward where cpu_precision resolves to it (compute-bound: 2-5x on
        # native-bf16 CPUs); generation is fp32 unless agent.decode_precision says otherwise (bf16 AUTOCAST measured
        # slower for decoding: `codegrep bench train`; a bf16 copy is what decode_precision uses). GPUs: TRL's settings.
        self.loss_precision = resolve_precision(self.cg.cpu_precision) \
            if self.accelerator.device.type == "cpu" and not self.args.bf16 else "fp32"

    def _make_prefix_cache(self) -> Any:
        """A prefix cache for the plain transformers backend; None where TRL's own path must run."""
        from codegrep.agent.prefix_cache import PrefixCache, supports_prefix_cache

        plain = not self.use_vllm and self.accelerator.num_processes == 1 and not self.is_deepspeed_enabled \
            and not self.is_fsdp_enabled and not getattr(self, "_is_vlm", False)
        if not plain or not self.cg.prefix_cache_mb or not supports_prefix_cache(self.model):
            return None
        return PrefixCache(int(self.cg.prefix_cache_mb) << 20)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """One turn for every row in ``prompt_ids`` (the whole batch: every group), decoded together in one
        batched ``generate`` through the prefix cache, under ``turn_controls`` (the stops and constraints evaluation
        uses). With ``constrained_loss`` a recorder notes, per row, which tokens the controls allowed where they
        restricted (``turn_restrictions``), so the loss can renormalise over them (``codegrep.rl.constrained``)."""
        if self._prefix_cache is None or images is not None or multimodal_fields:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        from codegrep.agent.prefix_cache import generate_with_prefix_cache

        if self.state.global_step != getattr(self, "_prefix_cache_step", None):  # weights changed: states are stale
            self._prefix_cache.clear()
            self._prefix_cache_step = self.state.global_step
        tok = self.processing_class
        pad = tok.pad_token_id if tok.pad_token_id is not None else self.eos_token_ids[0]
        rows = [torch.tensor(p, dtype=torch.long) for p in prompt_ids]
        with unwrap_model_for_generation(self.model_wrapped, self.accelerator,  # as TRL's own transformers path
                                         gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                                         generation_kwargs=self.generation_kwargs,
                                         gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs) \
                as model, torch.no_grad():
            width = max(len(r) for r in rows)
            controls = self.turn_controls.generate_kwargs(tok, width) if self.turn_controls is not None else {}
            recorder = None
            if self.cg.constrained_loss and "logits_processor" in controls:
                from transformers import LogitsProcessorList

                from codegrep.rl.constrained import RestrictionRecorder

                recorder = RestrictionRecorder(controls["logits_processor"])
                controls["logits_processor"] = LogitsProcessorList([recorder])
            out, width = generate_with_prefix_cache(model, rows, self._prefix_cache, pad,
                                                    prefill_precision=self.loss_precision,
                                                    decode_precision=self.decode_precision,
                                                    generation_config=self.generation_config,
                                                    draft_tokens=self.draft_tokens, **controls)
        eos = set(self.eos_token_ids)
        completions = []
        for row in out[:, width:].tolist():  # everything after the first EOS is dropped, as in TRL
            cut = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            completions.append(row[:cut])
        self.turn_restrictions = recorder.restrictions(out, width, [len(c) for c in completions]) \
            if recorder is not None else None
        return completions, None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.current_rows = inputs  # the rollout reads instance ids from here (rollout_func only sees prompts)
        self.row_restrictions = None  # the rollout sets them; TRL's old/ref log-probs (if any) read them
        batch = super()._generate_and_score_completions(inputs)
        if self.row_restrictions is not None:  # shuffled and split with the batch's rows (lists are, in TRL)
            batch["restrictions"] = self.row_restrictions
        mode = "train" if self.model.training else "eval"
        groups = self.num_generations if mode == "train" else self.num_generations_eval
        f, fmt, cost = self._gathered_scores(batch["advantages"].device)
        start = self.accelerator.process_index * len(inputs)
        local = slice(start, start + len(inputs))
        scale = self.scale_rewards != "none"
        layer, lam = self.cg.efficiency_layer, self.cg.efficiency_lambda
        if layer in POST_NORM_LAYERS:
            term = efficiency_advantage(cost, groups, lam, scale) if layer == "advantage" else \
                gated_efficiency_advantage(f, f + self.cg.format_weight * fmt, cost, groups, lam, scale)
            batch["advantages"] = batch["advantages"] + torch.tensor(term[local], dtype=batch["advantages"].dtype,
                                                                     device=batch["advantages"].device)
            self._metrics[mode]["efficiency/advantage_term_abs"].append(float(np.abs(term).mean()))
        correctness, efficiency = advantage_parts(f, fmt, cost, groups, layer, lam, self.cg.format_weight, scale)
        reference = (correctness + efficiency)[local]
        gap = np.abs(reference - batch["advantages"].detach().float().cpu().numpy()).max()
        self._metrics[mode]["advantages/max_abs_gap_vs_reference"].append(float(gap))
        self._metrics[mode]["advantages/correctness_abs"].append(float(np.abs(correctness).mean()))
        self._metrics[mode]["advantages/efficiency_abs"].append(float(np.abs(efficiency).mean()))
        self._metrics[mode]["groups/tied_share"].append(
            float(tied_groups(f + self.cg.format_weight * fmt, groups).mean()))
        self._log_episode_metrics(mode)
        if mode == "train" and self.cg.record_groups and self.accelerator.is_main_process:
            with open_append(Path(self.args.output_dir).parent / "groups.jsonl") as fh:
                fh.write(json.dumps({"step": self.state.global_step + 1, "group_size": groups,
                                     "f_beta": f.tolist(), "format": fmt.tolist(), "cost": cost.tolist()}) + "\n")
        n_loss = float(batch["prompt_mask"].sum() + batch["completion_mask"].sum())
        self._timing["loss_tokens"] = self._timing.get("loss_tokens", 0.0) + n_loss
        self._timing["generated_tokens"] = self._timing.get("generated_tokens", 0.0) + float(
            sum(s.tokens for s in self.last_scores))
        if self.kl_probe is not None:
            from codegrep.agent.precision import autocast

            started = time.perf_counter()
            with autocast(self.loss_precision):  # the same precision as the loss's policy log-probs
                batch["probe_ref_logps"] = self.kl_probe.reference_logps(self, batch)
            self._add_time("probe_reference", time.perf_counter() - started)
        self.row_restrictions = None
        return batch

    def _add_time(self, key: str, seconds: float) -> None:
        self._timing[key] = self._timing.get(key, 0.0) + seconds

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        started = time.perf_counter()
        out = super()._prepare_inputs(generation_batch)
        self._add_time("prepare", time.perf_counter() - started)
        return out

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        started, before = time.perf_counter(), self._timing.get("prepare", 0.0)
        out = super().training_step(model, inputs, num_items_in_batch)
        self._add_time("loss", time.perf_counter() - started - (self._timing.get("prepare", 0.0) - before))
        return out

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                           logits_to_keep: int, batch_size: int | None = None, **kwargs: Any) -> Any:
        """TRL's log-probs (and entropies); with ``unpad_loss_rows`` each chunk of ``batch_size`` rows is flushed
        left (every row's real tokens from column 0, trailing pads only) and run with no attention mask, one row
        at a time where flushing leaves the chunk mostly pads (``codegrep.rl.unpad``). Batches where a row's real
        tokens are not one run reaching into the prompt, and multimodal ones, keep TRL's padded forward. With
        ``loss_labelled_only`` the head scores completion positions only (``labelled_positions_only``). Outputs
        have TRL's shapes; positions outside a row's real tokens hold 0 (the loss masks them)."""
        from codegrep.rl.unpad import flushed_rows, labelled_positions_only

        plain = not any(v is not None for k, v in kwargs.items() if k not in ("compute_entropy", "compute_aux_loss"))
        flush = flushed_rows(attention_mask, logits_to_keep) if self.cg.unpad_loss_rows and plain else None
        restricted = getattr(self, "row_restrictions", None)
        restricted = restricted if restricted is not None and any(restricted) else None
        with _maybe_capture(model, self, restricted is not None) as hidden, \
                labelled_positions_only(self.cg.loss_labelled_only):
            if flush is None:
                out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                                  batch_size, **kwargs)
                step = batch_size or input_ids.size(0)
                prompt = input_ids.size(1) - logits_to_keep  # TRL chunks rows by batch_size, each at full width
                spans = [(lo, [prompt] * (min(lo + step, input_ids.size(0)) - lo))
                         for lo in range(0, input_ids.size(0), step)]
            else:
                out, spans = self._flushed_logps(model, input_ids, flush, logits_to_keep,
                                                 batch_size or input_ids.size(0), **kwargs)
        if restricted is not None:
            out = (self._restricted(model, input_ids, out[0], logits_to_keep, restricted, hidden, spans,
                                    loss=bool(kwargs.get("compute_entropy"))), *out[1:])
        if kwargs.get("compute_entropy"):  # only the loss asks for entropies: keep its policy log-probs
            self._loss_policy_logps = out[0].detach()
        return out

    def _flushed_logps(self, model: Any, input_ids: Any, flush: Any, keep: int, batch_size: int,
                       **kwargs: Any) -> Any:
        from codegrep.rl.unpad import SPLIT_ABOVE_PADDING

        chunks = []
        for lo in range(0, input_ids.size(0), batch_size):
            hi = min(lo + batch_size, input_ids.size(0))
            alone = flush.chunk(lo, hi).padding_share > SPLIT_ABOVE_PADDING  # mostly pads: rows one at a time
            chunks += [(i, i + 1) for i in range(lo, hi)] if alone else [(lo, hi)]
        logps, entropies, aux, spans = [], [], [], []
        for lo, hi in chunks:
            spans.append((lo, [flush.prompt - s for s in flush.starts[lo:hi]]))  # where row r's column k moved
            rows = flush.chunk(lo, hi)
            ids = rows.gather_ids(input_ids[lo:hi])
            lp, ent, ax = super()._get_per_token_logps_and_entropies(model, ids, torch.ones_like(ids),
                                                                     rows.window, ids.size(0), **kwargs)
            logps.append(rows.back(lp, keep))
            entropies.append(rows.back(ent, keep) if ent is not None else None)
            aux.append(ax)
        return (torch.cat(logps), torch.cat(entropies) if entropies[0] is not None else None,
                torch.stack(aux).mean() if aux[0] is not None else None), spans

    def _restricted(self, model: Any, input_ids: Any, logps: Any, keep: int, restricted: list[list[Any]],
                    hidden: list[Any], spans: list[tuple[int, list[int]]], loss: bool) -> Any:
        """``logps`` (TRL's layout) with each restricted position's value replaced by the masked, renormalised
        log-prob (``codegrep.rl.constrained``); ``spans``: per forward, its first row and, per row, the column
        offset of completion position 0 in that forward's input (hidden state at offset + k - 1 predicts k)."""
        from codegrep.rl.constrained import masked_token_logps

        if len(restricted) != input_ids.size(0) or len(hidden) != len(spans):
            raise RuntimeError(f"restrictions for {len(restricted)} rows, {len(hidden)} forwards, but a batch of "
                               f"{input_ids.size(0)} rows in {len(spans)} forwards")
        prompt = input_ids.size(1) - keep
        states, where, tokens, masks = [], [], [], []
        for (lo, offsets), h in zip(spans, hidden):
            for j, offset in enumerate(offsets):
                for k, allowed, ids in restricted[lo + j]:
                    if k < keep:
                        states.append(h[j, offset + k - 1])
                        where.append((lo + j, k))
                        tokens.append(int(input_ids[lo + j, prompt + k]))
                        masks.append((allowed, ids))
        if not where:
            return logps
        head = _unwrap(self, model).get_output_embeddings()
        values, mass = masked_token_logps(torch.stack(states), torch.tensor(tokens, device=logps.device), masks,
                                          head.weight, head.bias, float(getattr(self, "temperature", 1.0)))
        rows, cols = (torch.tensor(x, device=logps.device) for x in zip(*where))
        if loss and hasattr(self, "_metrics"):
            mode = "train" if model.training else "eval"
            self._metrics[mode]["constraints/allowed_mass"].append(float(mass.detach().exp().mean()))
            self._metrics[mode]["constraints/restricted_positions"].append(float(len(where)))
        return logps.index_put((rows, cols), values.to(logps.dtype))

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        from codegrep.agent.precision import autocast

        self._loss_policy_logps = None
        self.row_restrictions = inputs.get("restrictions")
        try:
            with autocast(self.loss_precision):  # the forward only: backward follows the recorded dtypes
                loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        finally:
            self.row_restrictions = None
        if "probe_ref_logps" in inputs and self._loss_policy_logps is not None:
            mode = "train" if self.model.training else "eval"
            kl = masked_mean_kl(self._loss_policy_logps, inputs["probe_ref_logps"], model_token_mask(inputs))
            self._metrics[mode]["kl_probe"].append(kl)
        return loss

    def _gathered_scores(self, device: torch.device) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """F-beta, format and cost of every completion on every process, in TRL's batch order."""
        local = torch.tensor([[s.retrieval, s.format, s.efficiency_cost] for s in self.last_scores],
                             dtype=torch.float64, device=device)
        allv = self.accelerator.gather(local).cpu().numpy()
        return allv[:, 0], allv[:, 1], allv[:, 2]

    def _log_episode_metrics(self, mode: str) -> None:
        fields = ("f_beta", "retrieval", "precision", "recall", "format", "rounds", "tool_calls", "tokens",
                  "efficiency_cost", "submitted")
        for name in fields:
            vals = [float(getattr(s, name)) for s in self.last_scores]
            self._metrics[mode][f"episode/{name}"].append(float(np.mean(vals)))
        task = [s.retrieval + self.cg.format_weight * s.format for s in self.last_scores]
        self._metrics[mode]["episode/task_reward"].append(float(np.mean(task)))
        self._metrics[mode]["episode/task_reward_std"].append(float(np.std(task, ddof=1)) if len(task) > 1 else 0.0)


# TRL/Trainer log keys -> the names metrics.jsonl promises (docs/training.md lists them).
METRIC_NAMES = {
    "reward": "reward_mean", "reward_std": "reward_std", "episode/task_reward": "task_reward",
    "episode/task_reward_std": "task_reward_std", "episode/f_beta": "f_beta",
    "episode/retrieval": "retrieval", "episode/precision": "precision",
    "episode/recall": "recall", "episode/format": "format", "episode/submitted": "submitted",
    "episode/rounds": "rounds", "episode/tool_calls": "tool_calls", "episode/tokens": "tokens",
    "episode/efficiency_cost": "efficiency_cost", "efficiency/advantage_term_abs": "efficiency_advantage_abs",
    "kl_probe": "kl", "kl": "kl_trl", "entropy": "entropy", "clip_ratio/region_mean": "clip_ratio",
    "grad_norm": "grad_norm", "loss": "loss", "learning_rate": "learning_rate",
    "advantages/max_abs_gap_vs_reference": "advantage_gap", "advantages/correctness_abs": "advantage_correctness_abs",
    "advantages/efficiency_abs": "advantage_efficiency_abs", "groups/tied_share": "tied_group_share",
    "kl_exact": "kl_exact", "update_norm": "update_norm",
    "constraints/allowed_mass": "allowed_mass", "constraints/restricted_positions": "restricted_positions",
    "time/generation_s": "time_generation_s", "time/scoring_s": "time_scoring_s",
    "time/probe_reference_s": "time_probe_reference_s", "time/loss_s": "time_loss_s",
    "time/optimizer_s": "time_optimizer_s", "time/probe_s": "time_probe_s",
    "throughput/generation_tokens_per_s": "generation_tokens_per_s",
    "throughput/loss_tokens_per_s": "loss_tokens_per_s",
    "throughput/prefix_reuse_share": "prefix_reuse_share",
}


def _unwrap(trainer: Any, model: Any) -> Any:
    unwrap = getattr(getattr(trainer, "accelerator", None), "unwrap_model", None)
    return unwrap(model) if unwrap is not None else model


def _maybe_capture(model: Any, trainer: Any, on: bool) -> Any:
    """The backbone's final hidden states of every forward inside the block (an empty list when ``on`` is false)."""
    from contextlib import nullcontext

    from codegrep.rl.constrained import capture_hidden

    return capture_hidden(_unwrap(trainer, model)) if on else nullcontext([])


def _timed(func: Any, trainer: Any, key: str) -> Any:
    """``func`` wrapped so each call's wall time is added to ``trainer._timing[key]``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            trainer._add_time(key, time.perf_counter() - started)
    return wrapper


class StepTimerCallback(TrainerCallback):
    """Where a GRPO step's time goes, logged per step: generation (the multi-turn rollout), scoring (TRL's
    rewards, advantages and any old/reference log-probs, minus generation), the KL probe's reference
    pass, loss (forward + backward), optimizer; tokens/s for generation and for the loss. Optionally the
    L2 norm of the step's parameter change (``update_norm``)."""

    def __init__(self, trainer: Any, update_norm: bool = False) -> None:
        self.trainer, self.update_norm = trainer, update_norm
        self._before: list[torch.Tensor] | None = None
        self._opt_started = 0.0

    def _params(self) -> list[torch.Tensor]:
        return [p for p in self.trainer.accelerator.unwrap_model(self.trainer.model).parameters() if p.requires_grad]

    def on_pre_optimizer_step(self, args, state, control, **kwargs):  # noqa: ANN001
        if self.update_norm:
            params = self._params()
            if self._before is None:
                self._before = [p.detach().clone() for p in params]
            else:
                for b, p in zip(self._before, params):
                    b.copy_(p.detach())
        self._opt_started = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):  # noqa: ANN001
        t = self.trainer
        t._add_time("optimizer", time.perf_counter() - self._opt_started)
        if self.update_norm and self._before is not None:
            sq = sum(float((p.detach() - b).float().pow(2).sum()) for b, p in zip(self._before, self._params()))
            t._metrics["train"]["update_norm"].append(sq ** 0.5)

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        t, m = self.trainer._timing, self.trainer._metrics["train"]
        gen, prep = t.get("generation", 0.0), t.get("prepare", 0.0)
        m["time/generation_s"].append(gen)
        m["time/scoring_s"].append(max(prep - gen - t.get("probe_reference", 0.0), 0.0))
        m["time/probe_reference_s"].append(t.get("probe_reference", 0.0))
        m["time/loss_s"].append(t.get("loss", 0.0))
        m["time/optimizer_s"].append(t.get("optimizer", 0.0))
        if gen > 0:
            m["throughput/generation_tokens_per_s"].append(t.get("generated_tokens", 0.0) / gen)
        if t.get("loss", 0.0) > 0:
            m["throughput/loss_tokens_per_s"].append(t.get("loss_tokens", 0.0) / t["loss"])
        cache = self.trainer._prefix_cache
        if cache is not None and cache.stats["prompt_tokens"]:  # share of rollout prompt tokens not prefilled again
            m["throughput/prefix_reuse_share"].append(cache.stats["reused_tokens"] / cache.stats["prompt_tokens"])
            if cache.stats.get("row_steps"):  # tokens written per row-step (> 1 with agent.draft_tokens)
                m["throughput/tokens_per_row_step"].append(cache.stats["written_tokens"] / cache.stats["row_steps"])
            cache.stats = dict.fromkeys(cache.stats, 0)
        self.trainer._timing = {}


class MetricsJsonlCallback(TrainerCallback):
    """Appends one JSON row per logged training step to ``metrics.jsonl`` (canonical names + raw TRL keys)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._step_started = time.perf_counter()

    def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001 (transformers' signature)
        self._step_started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        row: dict[str, Any] = {"step": state.global_step, "seconds": time.perf_counter() - self._step_started}
        row.update({new: logs[old] for old, new in METRIC_NAMES.items() if old in logs})
        row["trl"] = {k: v for k, v in logs.items() if k not in METRIC_NAMES}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open_append(self.path) as fh:  # a resumed run appends after what a killed one left
            fh.write(json.dumps(row, sort_keys=True) + "\n")


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of ``<run_dir>/metrics.jsonl`` (latest row per step wins, so resumed runs read cleanly)."""
    from codegrep.errors import UserError
    from codegrep.files import read_text

    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no training metrics at {path}: run `codegrep train` first")
    text = read_text(path, "training metrics")
    lines = text.split("\n")
    rows: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):  # no newline after it: a run killed while writing its last row
                print(f"{path}:{number}: an incomplete last row (the run stopped while writing it) is skipped",
                      file=sys.stderr)
                continue
            raise UserError(f"{path}:{number}: not a JSON row of training metrics") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int) or isinstance(row["step"], bool):
            raise UserError(f"{path}:{number}: a row of training metrics needs an integer 'step'")
        rows[row["step"]] = row
    return [rows[k] for k in sorted(rows)]
