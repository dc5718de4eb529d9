"""What notebook 04 calls: the efficiency-layer ablation (notebook 03's stage is ``codegrep.rl.training_stage``).

Design (issue 15), read top to bottom:

1. ``screen_pool``: a few samples per train task from the initial (warm-start) policy; the pool mixes
   tasks whose samples' rewards differed with tasks whose samples tied, about half each, so batches
   hold both kinds of group (the only batches where the layers can differ, ``codegrep.rl.advantages``).
   The same rollouts give the fixed probe set for the exact KL.
2. ``run_ablation``: per seed, every arm (``none`` once, then each layer x lambda) from the same initial
   policy, task pool, task order and sampler state. An arm whose settings equal notebook 03's main run
   is that run, reused (content-keyed), not retrained.
3. ``endpoints``: the per-seed paired log-ratio of exact probe KL at the last step, 90% t-interval and
   sign test, and the verdict rule (``codegrep.rl.paired``).
4. ``mechanism_frame`` / ``arm_similarity``: exact algebra on recorded rollout groups: how each layer
   splits its advantage between correctness and efficiency, and where the arms' advantages are
   proportional (identical Adam steps).

Every function reuses finished runs (``done.json``) and cached screens, so a re-run only computes what
is missing.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from codegrep.artifacts import runs_dir
from codegrep.paper import PAPER_REFERENCE
from codegrep.rl.advantages import advantage_parts, tied_groups
from codegrep.rl.paired import endpoint
from codegrep.rl.training_run import finished_with, run_settings, train, train_arguments
from codegrep.rl.training_stage import main_run_dir, metrics_frame
from codegrep.files import atomic_write, write_atomic

# The paper: advantage-layer KL drift is "about a third" of the reward layer's (a labelled reference, never a result).
PAPER_KL_RATIO = PAPER_REFERENCE["ablation.kl_ratio_advantage_over_reward"]
def _main_turns(cfg: dict[str, Any], cg: Any) -> int:
    """The main run's max_turns on profile ``cfg``: the train YAML's training-only override, else the profile's
    agent section."""
    from codegrep.rl.training_run import episode_config

    return episode_config(cfg, cg)[0].max_turns


def _key(obj: Any) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def design_overrides(cg: Any, grpo: Any, main_turns: int | None = None) -> dict[str, Any]:
    """The ablation's departures from the train YAML: turns, prompts per step, steps. ``main_turns`` (the main
    run's max_turns) keeps the demonstrations on the main run's episodes when the ablation's turns differ, so
    every arm starts from the main run's warm start (one SFT per profile)."""
    over: dict[str, Any] = {"max_steps": cg.ablation_max_steps}
    if cg.ablation_max_turns:
        over["max_turns"] = cg.ablation_max_turns
        if main_turns is not None and main_turns != cg.ablation_max_turns:
            over["demo_max_turns"] = main_turns
    group = cg.ablation_num_generations or grpo.num_generations
    if cg.ablation_num_generations:
        over["num_generations"] = group
    if cg.ablation_prompts_per_step:  # one micro-batch holds the step's groups (the YAML's accumulation is the
        over["per_device_train_batch_size"] = cg.ablation_prompts_per_step * group  # main run's memory split)
        over["gradient_accumulation_steps"] = 1
    return over


# --- 1. the pool and the probe set ---------------------------------------------------------------------------------
def ablation_arguments(cfg: dict[str, Any], train_config: str | Path | None = None,
                       overrides: dict[str, Any] | None = None) -> Any:
    """The ablation's argument sets on the resolved profile ``cfg``: its train YAML, or ``train_config`` when given
    (e.g. ``configs/train/study.yaml``), with ``overrides``."""
    if train_config is not None and not Path(train_config).is_file():
        from codegrep.config import ConfigError

        raise ConfigError(f"train_config {train_config}: file not found")
    return train_arguments(cfg, overrides, train_config)


def screen_pool(cfg: dict[str, Any], artifacts: str | Path | None = None,
                train_config: str | Path | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Pre-screen every train task with ``ablation_screen_samples`` rollouts of the initial policy; choose
    the pool (about half tasks whose samples' rewards differed) and write the probe set. Cached by content.
    ``extra``: further train overrides (the mechanism study's policy, ``model``).

    Returns ``{"pool": [instance ids], "probe_set": path, "screen": path, "n_varied": int, "n_tied": int}``.
    """
    cg, grpo = ablation_arguments(cfg, train_config)
    root = runs_dir(artifacts, cg.out)
    over = design_overrides(cg, grpo, _main_turns(cfg, cg))
    k = max(int(cg.ablation_screen_samples), 2)
    screen_over = {**over, "efficiency_layer": "none", "kl_probe": False,
                   "num_generations": k, "per_device_train_batch_size": k, "max_steps": 1,
                   "save_final_model": False, "save_strategy": "no", "warm_start_dir": str(root / "_warm_start"),
                   **(extra or {})}
    scg, sgrpo = ablation_arguments(cfg, train_config, screen_over)
    key = _key({"settings": run_settings(scg, sgrpo), "pool_size": cg.ablation_pool_size,
                "probe_size": cg.ablation_probe_size, "screen_tasks": cg.ablation_screen_tasks})
    out = root / "ablation" / f"_screen-{key}"
    summary_path = out / "pool.json"
    if summary_path.is_file():
        return json.loads(summary_path.read_text())
    from codegrep.rl.training_run import build_trainer

    out.mkdir(parents=True, exist_ok=True)
    trainer = build_trainer(cfg, scg, sgrpo, out)
    rows = list(trainer.train_dataset)
    from codegrep.data.tasks import seeded_sample

    rows = seeded_sample(rows, cg.ablation_screen_tasks, sgrpo.seed)  # a seeded subset in dataset order (None: all)
    records = []
    chunk = 8  # tasks per rollout call: one checkout per task is open at a time within a chunk
    for start in range(0, len(rows), chunk):
        batch = [r for r in rows[start:start + chunk] for _ in range(k)]
        trainer.current_rows = batch
        result = trainer.rollout_func([r["prompt"] for r in batch], trainer)
        for i, (row, score) in enumerate(zip(batch, trainer.last_scores)):
            records.append({"instance_id": row["instance_id"], "sample": i % k, "f_beta": score.f_beta,
                            "format": score.format, "cost": score.efficiency_cost, "rounds": score.rounds,
                            "tokens": score.tokens, "prompt_ids": result["prompt_ids"][i],
                            "completion_ids": result["completion_ids"][i], "env_mask": result["env_mask"][i]})
    del trainer
    with atomic_write(out / "screen.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in records)
    summary = choose_pool(records, cg.format_weight, cg.ablation_pool_size)
    probes = probe_rows(records, summary["pool"], cg.ablation_probe_size)
    with atomic_write(out / "probe.jsonl", "w") as fh:
        fh.writelines(json.dumps({k2: r[k2] for k2 in ("instance_id", "prompt_ids", "completion_ids", "env_mask")})
                      + "\n" for r in probes)
    summary.update({"probe_set": str((out / "probe.jsonl").resolve()), "screen": str((out / "screen.jsonl").resolve()),
                    "samples_per_task": k, "n_probe_sequences": len(probes)})
    write_atomic(summary_path, json.dumps(summary, indent=1))
    return summary


def choose_pool(records: list[dict[str, Any]], format_weight: float, size: int | None) -> dict[str, Any]:
    """Split screened tasks into varied (sample rewards differed) and tied; the pool takes about half of
    each, in the original task order. ``size=None`` keeps every task.

    >>> recs = [{"instance_id": t, "f_beta": f, "format": 1.0} for t, f in
    ...         [("a", 0.0), ("a", 0.0), ("b", 1.0), ("b", 0.0), ("c", 0.0), ("c", 0.0), ("d", 0.5), ("d", 0.0)]]
    >>> choose_pool(recs, 0.2, 2)["pool"], choose_pool(recs, 0.2, None)["n_varied"]
    (['a', 'b'], 2)
    """
    order: list[str] = []
    rewards: dict[str, list[float]] = {}
    for r in records:
        if r["instance_id"] not in rewards:
            order.append(r["instance_id"])
        rewards.setdefault(r["instance_id"], []).append(r["f_beta"] + format_weight * r["format"])
    varied = [t for t in order if np.ptp(rewards[t]) > 1e-9]
    tied = [t for t in order if t not in set(varied)]
    if size is None or size >= len(order):
        chosen = set(order)
    else:
        n_var = min(len(varied), (size + 1) // 2)
        n_tied = min(len(tied), size - n_var)
        n_var = min(len(varied), size - n_tied)
        chosen = set(varied[:n_var]) | set(tied[:n_tied])
    pool = [t for t in order if t in chosen]
    return {"pool": pool, "n_varied": sum(t in chosen for t in varied), "n_tied": sum(t in chosen for t in tied),
            "pool_varied": [t for t in varied if t in chosen], "pool_tied": [t for t in tied if t in chosen],
            "n_screened": len(order), "screened_varied_share": len(varied) / max(len(order), 1)}


def probe_rows(records: list[dict[str, Any]], pool: list[str], size: int) -> list[dict[str, Any]]:
    """The fixed probe set: up to ``size`` screened rollouts with model tokens, round-robin over pool tasks."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["instance_id"] in pool and any(r["env_mask"]):
            by_task.setdefault(r["instance_id"], []).append(r)
    out: list[dict[str, Any]] = []
    for depth in range(max((len(v) for v in by_task.values()), default=0)):
        for t in pool:
            if len(out) < size and depth < len(by_task.get(t, [])):
                out.append(by_task[t][depth])
    return out


def interleave_pool(varied: Sequence[str], tied: Sequence[str], seed: int) -> list[str]:
    """A seed's task order: a seeded permutation of each kind, alternating varied/tied (leftovers at the end).

    >>> order = interleave_pool(["v1", "v2"], ["t1", "t2"], 3)
    >>> [x[0] for x in order], sorted(order)
    (['v', 't', 'v', 't'], ['t1', 't2', 'v1', 'v2'])
    """
    rng = np.random.default_rng(seed)
    v = [varied[i] for i in rng.permutation(len(varied))]
    t = [tied[i] for i in rng.permutation(len(tied))]
    out: list[str] = []
    for i in range(max(len(v), len(t))):
        out += ([v[i]] if i < len(v) else []) + ([t[i]] if i < len(t) else [])
    return out


# --- 2. the paired arms ----------------------------------------------------------------------------------------------
def arms(cg: Any) -> list[tuple[str, float | None]]:
    """(layer, lambda) per arm of one seed: ``none`` once (lambda does not enter), the others per lambda.

    >>> from types import SimpleNamespace
    >>> arms(SimpleNamespace(ablation_layers=["none", "reward", "advantage"], lambda_grid=[0.1, 0.2]))
    [('none', None), ('reward', 0.1), ('reward', 0.2), ('advantage', 0.1), ('advantage', 0.2)]
    """
    out: list[tuple[str, float | None]] = []
    for layer in cg.ablation_layers:
        out += [("none", None)] if layer == "none" else [(layer, float(lam)) for lam in cg.lambda_grid]
    return out


def arm_name(profile: str, layer: str, lam: float | None, seed: int) -> str:
    """One arm's run directory name (``none`` carries no lambda).

    >>> arm_name("ci", "none", None, 1), arm_name("ci", "reward", 0.1, 0)
    ('ci-none-s1', 'ci-reward-lam0.1-s0')
    """
    return f"{Path(profile).stem}-{layer}-s{seed}" if lam is None else f"{Path(profile).stem}-{layer}-lam{lam:g}-s{seed}"


def _main_run_if_same(cfg: dict[str, Any], artifacts: str | Path | None, cg: Any, grpo: Any) -> Path | None:
    """Notebook 03's finished main run when its settings and task list equal this arm's, else None."""
    from codegrep.data.tasks import profile_tasks

    main = main_run_dir(cfg, artifacts)
    if not (main / "done.json").is_file() or not (main / "config.json").is_file():
        return None
    saved = json.loads((main / "config.json").read_text())
    if not finished_with(main, cg, grpo, cfg):
        return None
    manifest = main / "manifest.json"  # the GRPO prompts the run trained on, in order
    if manifest.is_file():
        ids = json.loads(manifest.read_text()).get("grpo_prompts", [])
    else:
        tasks, _ = profile_tasks(cfg, split="train", limit=saved["codegrep"].get("train_tasks"))
        ids = saved["codegrep"].get("train_task_ids") or [t.instance_id for t in tasks]
    return main if list(ids) == list(cg.train_task_ids or []) else None


def run_ablation(cfg: dict[str, Any], artifacts: str | Path | None = None, train_config: str | Path | None = None,
                 progress: Any = print) -> pd.DataFrame:
    """Train (or reuse) every arm of every seed on the screened pool; a long frame of per-step metrics
    (one row per run and step) with ``layer``, ``lam``, ``seed``, ``run`` and ``reused_main_run``."""
    cg, grpo = ablation_arguments(cfg, train_config)
    root = runs_dir(artifacts, cg.out)
    runs = root / "ablation"
    screen = screen_pool(cfg, artifacts, train_config)
    frames, design = [], design_overrides(cg, grpo, _main_turns(cfg, cg))
    for seed in cg.ablation_seeds:
        for layer, lam in arms(cg):
            name = arm_name(cg.profile, layer, lam, seed)
            over = {**design, "efficiency_layer": layer,
                    "efficiency_lambda": lam if lam is not None else cg.efficiency_lambda, "seed": seed,
                    "name": name, "out": str(runs), "warm_start_dir": str(root / "_warm_start"),
                    # varied/tied alternate within every step's prompts (TRL's shuffle off): mixed batches by design
                    "train_task_ids": interleave_pool(screen["pool_varied"], screen["pool_tied"], seed)
                    if "pool_varied" in screen else screen["pool"], "shuffle_dataset": False,
                    "kl_probe_set": screen["probe_set"],
                    "kl_probe_every": cg.ablation_probe_every, "log_update_norm": True, "record_groups": True,
                    "save_final_model": False, "save_strategy": "no"}
            acg, agrpo = ablation_arguments(cfg, train_config, over)
            run_dir, reused = runs / name, False
            if not finished_with(run_dir, acg, agrpo, cfg):
                main = _main_run_if_same(cfg, artifacts, acg, agrpo)
                if main is not None:
                    run_dir, reused = main, True
                else:
                    progress(f"ablation: training {name} ({acg.ablation_max_steps} steps)")
                    train(cfg, (acg, agrpo))
            frame = metrics_frame(run_dir)
            if reused:  # notebook 03 logged no exact probe KL: measure it on its final weights
                frame = _with_final_probe(frame, run_dir, screen["probe_set"])
            frames.append(frame.assign(layer=layer, lam=np.nan if lam is None else lam, seed=seed, run=name,
                                       reused_main_run=reused))
    return pd.concat(frames, ignore_index=True)


def _with_final_probe(frame: pd.DataFrame, run_dir: Path, probe_set: str) -> pd.DataFrame:
    """Add ``kl_exact`` at the last step of a finished run from its saved final policy (cached)."""
    cache = run_dir / f"kl_exact_final-{_key(probe_set)}.json"
    if not cache.is_file():
        from transformers import AutoModelForCausalLM

        from codegrep.rl.kl import probe_kl, read_probe_set

        config = json.loads((run_dir / "config.json").read_text())
        policy = AutoModelForCausalLM.from_pretrained(str(run_dir / "final"))
        reference = AutoModelForCausalLM.from_pretrained(config["initial_policy"])
        kl = probe_kl(policy, reference, read_probe_set(probe_set), float(config["grpo"].get("temperature", 1.0)))
        write_atomic(cache, json.dumps({"kl_exact": kl}))
    frame = frame.copy()
    if "kl_exact" not in frame:
        frame["kl_exact"] = np.nan
    frame.loc[frame["step"] == frame["step"].max(), "kl_exact"] = json.loads(cache.read_text())["kl_exact"]
    return frame


# --- 3. the endpoint -------------------------------------------------------------------------------------------------
def final_probe_kl(df: pd.DataFrame) -> pd.DataFrame:
    """Per run: exact probe KL at its last step (the endpoint) and the on-policy k3 KL there."""
    last = df.sort_values("step").groupby("run").tail(1)
    cols = [c for c in ("layer", "lam", "seed", "run", "step", "kl_exact", "kl") if c in last]
    return last[cols].reset_index(drop=True)


def endpoints(df: pd.DataFrame, base: str = "reward", level: float = 0.90) -> pd.DataFrame:
    """Per (arm, lambda) other than ``base``: the paired-by-seed endpoint against ``base`` at the same
    lambda (``none`` against each lambda's base). One row per comparison."""
    fin = final_probe_kl(df)
    rows = []
    base_rows = fin[fin["layer"] == base]
    for lam in sorted(base_rows["lam"].dropna().unique()):
        den = base_rows[base_rows["lam"] == lam].set_index("seed")["kl_exact"]
        for layer in [x for x in fin["layer"].unique() if x != base]:
            sub = fin[(fin["layer"] == layer) & ((fin["lam"] == lam) | fin["lam"].isna())]
            num = sub.set_index("seed")["kl_exact"]
            seeds = sorted(set(num.index) & set(den.index))
            e = endpoint(num.loc[seeds].to_numpy(), den.loc[seeds].to_numpy(), level, layer, base)
            rows.append({"arm": layer, "base": base, "lam": lam, **e})
    return pd.DataFrame(rows)


def paired_curves(df: pd.DataFrame, num: str = "advantage", den: str = "reward", level: float = 0.90) -> pd.DataFrame:
    """Per (lambda, step) where both arms measured the exact probe KL: the seed-paired log-ratio's mean
    and t-interval (for the notebook's paired band)."""
    from codegrep.rl.paired import paired_log_ratios, t_interval

    have = df.dropna(subset=["kl_exact"])
    rows = []
    for lam in sorted(have.loc[have["layer"] == den, "lam"].dropna().unique()):
        a = have[(have["layer"] == num) & (have["lam"] == lam)].set_index(["seed", "step"])["kl_exact"]
        b = have[(have["layer"] == den) & (have["lam"] == lam)].set_index(["seed", "step"])["kl_exact"]
        both = a.to_frame("a").join(b.to_frame("b"), how="inner").reset_index()
        for step, g in both.groupby("step"):
            mean, lo, hi = t_interval(paired_log_ratios(g["a"], g["b"]), level)
            rows.append({"lam": lam, "step": step, "n_seeds": len(g), "log_ratio": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


# --- 4. the mechanism, exactly -----------------------------------------------------------------------------------
def recorded_groups(df: pd.DataFrame, screen: dict[str, Any], runs_root: str | Path | None = None) -> pd.DataFrame:
    """Recorded rollout groups: the screen's (initial policy) and every ablation run's ``groups.jsonl``.
    One row per rollout: source, batch, group, f_beta, format, cost."""
    rows = []
    for i, r in enumerate(map(json.loads, Path(screen["screen"]).read_text().splitlines())):
        rows.append({"source": "screen (initial policy)", "batch": "screen", "group": r["instance_id"],
                     "f_beta": r["f_beta"], "format": r["format"], "cost": r["cost"]})
    if runs_root is not None:
        for run in df["run"].unique():
            path = Path(runs_root) / run / "groups.jsonl"
            if not path.is_file():
                continue
            for rec in map(json.loads, path.read_text().splitlines()):
                g = rec["group_size"]
                for j, (f, fm, c) in enumerate(zip(rec["f_beta"], rec["format"], rec["cost"])):
                    rows.append({"source": "training batches", "batch": f"{run}/{rec['step']}",
                                 "group": f"{run}/{rec['step']}/{j // g}", "f_beta": f, "format": fm, "cost": c})
    return pd.DataFrame(rows)


def mechanism_frame(groups: pd.DataFrame, lam: float, format_weight: float,
                    layers: tuple[str, ...] = ("none", "reward", "advantage", "gated")) -> pd.DataFrame:
    """Per recorded group and layer: tied or not, mean |correctness part| and |efficiency part| of the
    advantage (exact, ``advantage_parts``) and the efficiency share of the advantage's mass."""
    rows = []
    for (source, group), g in groups.groupby(["source", "group"], sort=False):
        n = len(g)
        if n < 2:
            continue
        f, fm, c = g["f_beta"].to_numpy(), g["format"].to_numpy(), g["cost"].to_numpy()
        tied = bool(tied_groups(f + format_weight * fm, n)[0])
        for layer in layers:
            corr, eff = advantage_parts(f, fm, c, n, layer, lam, format_weight)
            mass = np.abs(corr).mean() + np.abs(eff).mean()
            rows.append({"source": source, "group": group, "layer": layer, "tied": tied,
                         "correctness_abs": float(np.abs(corr).mean()), "efficiency_abs": float(np.abs(eff).mean()),
                         "efficiency_share": float(np.abs(eff).mean() / mass) if mass > 0 else np.nan})
    return pd.DataFrame(rows)


def arm_similarity(groups: pd.DataFrame, lam: float, format_weight: float, other: str = "advantage",
                   base: str = "reward") -> pd.DataFrame:
    """Per recorded training batch: the share of tied groups and the cosine between the two layers'
    advantage vectors. Cosine 1 means proportional advantages, hence proportional policy gradients
    (``num_iterations = 1``) and, Adam being scale invariant, the same step; below 1 the arms differ."""
    rows = []
    for batch, b in groups[groups["source"] == "training batches"].groupby("batch", sort=False):
        sizes = b.groupby("group", sort=False).size()
        if sizes.nunique() != 1 or sizes.iloc[0] < 2:
            continue
        g = int(sizes.iloc[0])
        f, fm, c = b["f_beta"].to_numpy(), b["format"].to_numpy(), b["cost"].to_numpy()
        x = np.add(*advantage_parts(f, fm, c, g, other, lam, format_weight))
        y = np.add(*advantage_parts(f, fm, c, g, base, lam, format_weight))
        nx, ny = np.linalg.norm(x), np.linalg.norm(y)
        rows.append({"batch": batch, "groups": len(sizes),
                     "tied_share": float(tied_groups(f + format_weight * fm, g).mean()),
                     "cosine": float(x @ y / (nx * ny)) if nx > 0 and ny > 0 else np.nan})
    return pd.DataFrame(rows)


STEP_COLUMNS = ("kl_exact", "kl", "tied_group_share", "advantage_correctness_abs", "advantage_efficiency_abs",
                "update_norm", "entropy", "rounds", "tokens", "task_reward")


def step_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (layer, lambda): the mean over seeds and steps of every per-step measurement (issue 15's list)."""
    cols = [c for c in STEP_COLUMNS if c in df]
    return df.groupby(["layer", "lam"], dropna=False)[cols].mean().reset_index()


def time_breakdown(df: pd.DataFrame) -> dict[str, float]:
    """Where a GRPO step's time went, summed over every ablation step logged (seconds, shares, tokens/s)."""
    parts = [c for c in ("time_generation_s", "time_scoring_s", "time_probe_reference_s", "time_loss_s",
                         "time_optimizer_s", "time_probe_s") if c in df]
    tot = {c: float(df[c].sum()) for c in parts}
    step_total = float(df["seconds"].sum()) if "seconds" in df else float("nan")
    out: dict[str, float] = {"steps": int(len(df)), "seconds_per_step": step_total / max(len(df), 1)}
    for c, v in tot.items():
        out["share_" + c[len("time_"):-2]] = v / step_total if step_total else float("nan")
    for c in ("generation_tokens_per_s", "loss_tokens_per_s", "prefix_reuse_share"):
        if c in df:
            out[c] = float(df[c].median())
    return out


def mixed_step_count(df: pd.DataFrame, layer: str = "reward") -> tuple[int, int]:
    """(steps whose batch mixed tied and varied groups, steps) over every run of ``layer``: the design's premise.

    >>> mixed_step_count(pd.DataFrame({"layer": ["reward"] * 3, "tied_group_share": [1.0, 0.0, 0.5]}))
    (1, 3)
    """
    share = df.loc[df["layer"] == layer, "tied_group_share"].dropna() if "tied_group_share" in df else pd.Series([])
    return int(((share > 0) & (share < 1)).sum()), int(len(share))


def conclusion(main: dict[str, Any], runs: pd.DataFrame, study: dict[str, Any] | None) -> str:
    """What notebook 04's run showed, in one sentence per experiment (the reduced run, then the committed study)."""
    mixed, steps = mixed_step_count(runs)
    premise = (f"no batch mixed tied and varied groups (0 of {steps} reward-arm steps), so the design's premise failed "
               "and the arms could differ only through all-varied batches" if mixed == 0 else
               f"{mixed} of {steps} reward-arm steps mixed tied and varied groups")
    ratio = main.get("kl_ratio_geomean")
    ratio_txt = (f"advantage/reward probe-KL ratio {ratio:.2f} [{main['kl_ratio_lo']:.2f}, {main['kl_ratio_hi']:.2f}]"
                 if ratio == ratio and main.get("kl_ratio_lo") == main.get("kl_ratio_lo") else "no interval")
    text = (f"This reduced run ({main['n_paired_seeds']} paired seed(s), SmolLM2-135M) gives {ratio_txt}, "
            f"{main['verdict'].split(':')[0]}; {premise}.")
    if study is not None:
        text += (f" The committed mechanism study ({study.get('model', {}).get('kind', '?').split(',')[0]}, "
                 f"commit {str(study.get('commit', '?'))[:10]}): {study['verdict_sentence']}")
    return text


def time_table(breakdown: dict[str, float]) -> pd.DataFrame:
    """``time_breakdown`` as a one-column table (the notebook shows tables, not raw dicts).

    >>> time_table({"steps": 4, "seconds_per_step": 40.123}).round(1)["value"].tolist()
    [4.0, 40.1]
    """
    return pd.Series(breakdown, name="value", dtype=float).rename_axis("measure").to_frame()
