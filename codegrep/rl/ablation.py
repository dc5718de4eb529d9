"""What notebooks 03/04 call: the main run, before/after evaluation, the efficiency-layer ablation.

Every function reuses finished runs (``done.json``) and cached evaluation rows, so a notebook re-run
only computes what is missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from codegrep.rl.run import parse_train_args, train, train_config_path
from codegrep.rl.trainer import read_metrics

PAPER_KL_RATIO = 1 / 3  # the paper: advantage-layer KL drift is "about a third" of the reward layer's


def _runs_dir(artifacts: str | Path | None, cg: Any) -> Path:
    return Path(artifacts) / "train" if artifacts is not None else Path(cg.out)


def main_run_dir(cfg: dict[str, Any], artifacts: str | Path | None = None) -> Path:
    """Where the profile's main training run lives, whether or not it has been trained."""
    cg, grpo = parse_train_args(train_config_path(cfg["_source"]))
    return _runs_dir(artifacts, cg) / cg.run_name(grpo.seed)


def main_run(cfg: dict[str, Any], artifacts: str | Path | None = None) -> Path:
    """The profile's main training run (its train YAML as is), trained once and reused."""
    run_dir = main_run_dir(cfg, artifacts)
    if not (run_dir / "done.json").is_file():  # tasks/env come from the notebook's profile, not the YAML's
        run_dir = train(train_config_path(cfg["_source"]),
                        {"out": str(run_dir.parent), "profile": cfg["_source"], "name": run_dir.name})
    return run_dir


def trained_policy_rows(cfg: dict[str, Any], artifacts: str | Path) -> Path | None:
    """The evaluation-harness rows of the main run's GRPO policy on the eval split, as notebook 03 wrote
    them (``policy_evaluation``); None when that has not run. Never trains."""
    path = Path(artifacts) / "train" / "eval" / main_run_dir(cfg, artifacts).name / "GRPO.jsonl"
    return path if path.is_file() else None


def metrics_frame(run_dir: str | Path) -> pd.DataFrame:
    """A run's metrics.jsonl as a DataFrame (one row per step, TRL's raw keys dropped)."""
    return pd.DataFrame([{k: v for k, v in r.items() if k != "trl"} for r in read_metrics(run_dir)])


def policy_evaluation(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                      limit: int | None = None) -> pd.DataFrame:
    """Held-out (eval split) retrieval metrics of the untrained, warm-started and trained policies,
    through the evaluation harness's ``agent`` retriever. One row per policy."""
    import json

    from codegrep.agent.models import resolve_model
    from codegrep.config import project_root
    from codegrep.data.tasks import profile_tasks
    from codegrep.retrievers.evaluate import evaluate
    from codegrep.retrievers.registry import make_retriever

    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    cg, grpo = config["codegrep"], config["grpo"]
    tasks, resolver = profile_tasks(cfg, split="eval", limit=limit or cg.get("eval_tasks"))
    initial = Path(config["initial_policy"])
    if not initial.is_absolute() and not initial.exists():  # runs written before paths were absolute
        initial = project_root() / initial
    policies = {"untrained": str(resolve_model(cg["model"])), "warm start": str(initial),
                "GRPO": str((run_dir / "final").resolve())}
    rows = []
    for label, model in policies.items():
        retriever = make_retriever("agent", cfg, model=model, max_turns=cg["max_turns"],
                                   max_calls_per_turn=cg["max_calls_per_turn"],
                                   max_observation_tokens=cg["max_observation_tokens"],
                                   max_issue_chars=cg["max_issue_chars"],
                                   max_new_tokens=grpo["max_completion_length"])
        out = Path(artifacts) / "train" / "eval" / run_dir.name / f"{label.replace(' ', '_')}.jsonl"
        summary = evaluate(tasks, resolver, retriever, out)
        wanted = {t.instance_id for t in tasks}
        per_task = [r for r in map(json.loads, filter(str.strip, out.read_text().splitlines()))
                    if r["instance_id"] in wanted]
        extras = [r.get("extra") or {} for r in per_task]
        rows.append({"policy": label, "model": model, **summary,
                     # format-valid = the episode ended with a well-formed submit call (the format reward's gate)
                     "format_valid_rate": float(np.mean([bool(e.get("submitted")) for e in extras])),
                     "format_errors_per_episode": float(np.mean([e.get("format_errors") or 0 for e in extras]))})
    return pd.DataFrame(rows)


def run_ablation(cfg: dict[str, Any], artifacts: str | Path | None = None) -> pd.DataFrame:
    """Train (or reuse) every (layer, λ, seed) of the profile's ablation grid; long frame of per-step metrics."""
    config = train_config_path(cfg["_source"])
    cg, _ = parse_train_args(config)
    root = _runs_dir(artifacts, cg)
    runs = root / "ablation"
    frames = []
    for layer in cg.ablation_layers:
        for lam in cg.lambda_grid:
            for seed in cg.ablation_seeds:
                name = f"{Path(cg.profile).stem}-{layer}-lam{lam:g}-s{seed}"
                run_dir = runs / name
                if not (run_dir / "done.json").is_file():
                    train(config, {"profile": cfg["_source"], "efficiency_layer": layer, "efficiency_lambda": lam,
                                   "seed": seed, "name": name, "out": str(runs),
                                   "warm_start_dir": str(root / "_warm_start"),
                                   "max_steps": cg.ablation_max_steps,
                                   "save_final_model": False, "save_strategy": "no"})
                frame = metrics_frame(run_dir)
                frames.append(frame.assign(layer=layer, lam=lam, seed=seed, run=name))
    return pd.concat(frames, ignore_index=True)


def final_values(df: pd.DataFrame, column: str, last: int = 2) -> pd.DataFrame:
    """Per run: the mean of ``column`` over its last ``last`` steps (smooths one noisy step)."""
    tail = df.sort_values("step").groupby("run").tail(last)
    return tail.groupby(["layer", "lam", "seed", "run"], as_index=False)[column].mean()


def final_frame(df: pd.DataFrame, columns: tuple[str, ...] = ("kl", "rounds", "tokens"), last: int = 2) -> pd.DataFrame:
    """Per run (layer, λ, seed): each column's final value as ``final_values`` defines it (the KL ratio too)."""
    parts = [final_values(df, c, last).set_index(["layer", "lam", "seed", "run"])[c] for c in columns]
    return pd.concat(parts, axis=1).reset_index()


def ablation_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, λ): final KL, stability (std of the task reward across steps), final rounds/tokens/F-beta."""
    stab = df.groupby(["layer", "lam", "seed"])["task_reward"].std().rename("reward_std_across_steps")
    parts = [final_values(df, c).set_index(["layer", "lam", "seed"])[c]
             for c in ("kl", "rounds", "tokens", "f_beta", "task_reward")]
    per_seed = pd.concat([stab, *parts], axis=1).reset_index()
    return per_seed.groupby(["layer", "lam"]).agg(["mean", "std"]).drop(columns="seed").reset_index()


def kl_ratio(df: pd.DataFrame, num: str = "advantage", den: str = "reward", lam: float | None = None,
             n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """Ratio of mean final KL (``num`` layer / ``den`` layer) with a seed-bootstrap 95% interval."""
    final = final_values(df, "kl")
    if lam is not None:
        final = final[final["lam"] == lam]
    a = final.loc[final["layer"] == num, "kl"].to_numpy()
    b = final.loc[final["layer"] == den, "kl"].to_numpy()
    if not len(a) or not len(b) or b.mean() == 0:
        return {"ratio": float("nan"), "lo": float("nan"), "hi": float("nan"), "n_seeds": int(min(len(a), len(b)))}
    rng = np.random.default_rng(seed)
    boots = [rng.choice(a, len(a)).mean() / max(rng.choice(b, len(b)).mean(), 1e-12) for _ in range(n_boot)]
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"ratio": float(a.mean() / b.mean()), "lo": float(lo), "hi": float(hi), "n_seeds": int(min(len(a), len(b))),
            "paper_reference": PAPER_KL_RATIO}


def training_verdict(evaluation: pd.DataFrame, metric: str = "f0.5") -> str:
    """Plain sentences: did the trained policy beat the untrained one on held-out tasks (F-beta and
    format-valid rate), and how much of that is GRPO rather than the warm start?"""
    by = evaluation.set_index("policy")
    if metric not in by.columns:
        metric = next((c for c in by.columns if c.startswith("f0")), "f1")
    base, warm, trained = (by.loc[p] for p in ("untrained", "warm start", "GRPO"))
    n = int(trained.get("n", 0))
    both = trained[metric] > base[metric] and trained["format_valid_rate"] > base["format_valid_rate"]
    head = "The trained policy beats the untrained one" if both else \
        "The trained policy does NOT beat the untrained one on both counts"
    grpo_gain = trained[metric] - warm[metric]
    return (f"{head} on {n} held-out tasks: {metric} {base[metric]:.3f} (untrained) -> {warm[metric]:.3f} "
            f"(warm start) -> {trained[metric]:.3f} (GRPO); format-valid rate {base['format_valid_rate']:.2f} -> "
            f"{warm['format_valid_rate']:.2f} -> {trained['format_valid_rate']:.2f}. GRPO over the warm start: "
            f"{grpo_gain:+.3f} {metric}, where one task moves the mean by up to {1 / max(n, 1):.3f}"
            + (" (at most one task: not distinguishable from noise at this n; the clear step over the untrained "
               "policy comes with the supervised warm start on synthetic demonstrations)"
               if grpo_gain * max(n, 1) <= 1 + 1e-9 else "") + ".")
