"""``codegrep ablation study``: the efficiency-layer ablation's paired endpoint over many seeds, resumable.

Per seed, the ``reward`` and ``advantage`` arms train from the same initial policy, on the same task order and
sampler state (``codegrep.rl.ablation``'s design, the same trainer and probe-KL measure); the seed's row (final
exact probe KL of each arm, their log-ratio, the tied-group share of every step, how many steps mixed tied and
varied groups) is written atomically to ``OUT/seeds/seed-NNNN.json`` as soon as the seed finishes, so a run cut
short keeps what it finished and ``--resume`` continues, after checking every reused file was produced with the
same settings. The summary (``summarize``) pairs only informative seeds: a seed none of whose steps mixed tied and
varied groups never met the case the paper's claim is about (in an all-tied batch the two layers' advantages are
proportional, so Adam takes the same step; in an all-varied batch they differ only by O(lambda) terms), so it is
listed as uninformative, with its ratio shown, not counted.

Mixed batches by construction: the pool holds screened-varied and screened-tied tasks; the study orders each seed's
pool so that every step's prompts alternate varied / tied (a seeded permutation of each kind) and turns TRL's
shuffle off, so each batch holds both kinds as screened. Whether they still differ at training time is measured
(``tied_group_share`` per step), not assumed.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from codegrep.config import ConfigError
from codegrep.files import read_json_object
from codegrep.rl.ablation import interleave_pool
from codegrep.rl.paired import endpoint

STUDY_LAYERS = ("advantage", "reward")  # numerator, denominator of the endpoint
RESULT_KEYS = ("schema", "n_paired_seeds", "n_seeds_run", "n_uninformative_seeds", "kl_log_ratio_mean",
               "kl_log_ratio_lo", "kl_log_ratio_hi", "kl_ratio_geomean", "kl_ratio_lo", "kl_ratio_hi",
               "interval_level", "interval_width_log", "powered", "sign_test_p", "paper_kl_ratio",
               "interval_contains_paper", "interval_contains_1", "verdict", "verdict_sentence", "wall_seconds",
               "elapsed_seconds", "invocations", "wall_seconds_note", "commit", "command", "date", "cpu", "model", "design", "speedups", "seeds")
"""Top-level keys of ``ablation_study.json`` (the report and notebook 04 read these; keep them stable)."""

SPEEDUPS = [
    {"change": "tiny policy (mechanism study) instead of SmolLM2-135M", "changes_quantity": True,
     "note": "KL drift of a 3.2M-weight random-init Llama pre-trained for 160 steps on one-turn submit answers "
             "(train split): shows the optimiser-level mechanism, not the 135M model's magnitude"},
    {"change": "one-turn episodes (submit at once), 48 tokens per turn, issue text cut to 200 characters",
     "changes_quantity": True, "note": "other episodes, so another cost distribution (rounds constant, cost = "
                                       "generated tokens); the KL measure is the same"},
    {"change": "few GRPO steps per arm (ablation_max_steps)", "changes_quantity": True,
     "note": "the endpoint is early drift (KL at the last step), not drift after a full run"},
    {"change": "pool ordered varied/tied per step, TRL shuffle off", "changes_quantity": True,
     "note": "every batch holds both screened kinds: the design's premise, made to hold"},
    {"change": "16 fixed probe sequences", "changes_quantity": False,
     "note": "same exact full-vocabulary KL, fewer positions (more noise per seed)"},
    {"change": "one torch thread (OMP_NUM_THREADS=1 on the shared machine), prefix cache, fp32 throughout",
     "changes_quantity": False, "note": "same tokens; no reduced precision used, so nothing to check against fp32"},
]


# --- pure parts ------------------------------------------------------------------------------------------------------
def is_mixed(tied_share: float) -> bool:
    """A step whose batch held both tied and varied groups.

    >>> is_mixed(0.5), is_mixed(1.0), is_mixed(0.0), is_mixed(float("nan"))
    (True, False, False, False)
    """
    return bool(math.isfinite(tied_share) and 0.0 < tied_share < 1.0)


def seed_row(seed: int, arms: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One seed's record from each arm's per-step metrics rows (``step``, ``tied_group_share``, ``kl_exact``).

    Both arms draw their first batch from the same state; a seed is informative when either arm logged a step whose
    batch mixed tied and varied groups; otherwise its ratio is kept but not paired.

    >>> rows = lambda shares, kl: [{"step": i + 1, "tied_group_share": s, "kl_exact": kl} for i, s in enumerate(shares)]
    >>> r = seed_row(0, {"advantage": rows([0.5, 1.0], 0.01), "reward": rows([0.5, 0.0], 0.03)})
    >>> r["informative"], r["mixed_steps"], round(r["kl_ratio"], 3)
    (True, {'advantage': 1, 'reward': 1}, 0.333)
    >>> seed_row(1, {"advantage": rows([1.0, 1.0], 0.01), "reward": rows([1.0, 0.0], 0.01)})["informative"]
    False
    """
    out: dict[str, Any] = {"seed": int(seed), "kl_exact": {}, "tied_group_share": {}, "mixed_steps": {}, "steps": {}}
    for layer, rows in arms.items():
        rows = sorted(rows, key=lambda r: r["step"])
        shares = [float(r.get("tied_group_share", math.nan)) for r in rows]
        last = [float(r["kl_exact"]) for r in rows if r.get("kl_exact") is not None and math.isfinite(r["kl_exact"])]
        out["kl_exact"][layer] = last[-1] if last else math.nan
        out["tied_group_share"][layer] = shares
        out["mixed_steps"][layer] = sum(is_mixed(s) for s in shares)
        out["steps"][layer] = len(rows)
    num, den = out["kl_exact"].get(STUDY_LAYERS[0], math.nan), out["kl_exact"].get(STUDY_LAYERS[1], math.nan)
    ok = num > 0 and den > 0
    out["kl_log_ratio"] = math.log(num / den) if ok else math.nan
    out["kl_ratio"] = num / den if ok else math.nan
    out["informative"] = any(v > 0 for v in out["mixed_steps"].values())
    return out


def summarize(rows: Sequence[dict[str, Any]], level: float = 0.90, paper_ratio: float = 1 / 3) -> dict[str, Any]:
    """The paired endpoint over informative seeds, the interval against the paper's ratio and 1, and the verdict.

    >>> rows = [{"seed": i, "informative": True, "kl_exact": {"advantage": a, "reward": 0.03}}
    ...         for i, a in enumerate([0.009, 0.011, 0.01, 0.012])]
    >>> rows.append({"seed": 9, "informative": False, "kl_exact": {"advantage": 0.03, "reward": 0.03}})
    >>> s = summarize(rows)
    >>> s["n_paired_seeds"], s["n_uninformative_seeds"], s["interval_contains_paper"], s["interval_contains_1"]
    (4, 1, True, False)
    """
    use = [r for r in rows if r["informative"]]
    num = [r["kl_exact"][STUDY_LAYERS[0]] for r in use]
    den = [r["kl_exact"][STUDY_LAYERS[1]] for r in use]
    e = endpoint(num, den, level, *STUDY_LAYERS)
    lo, hi = e["kl_log_ratio_lo"], e["kl_log_ratio_hi"]
    finite = math.isfinite(lo) and math.isfinite(hi)
    width = hi - lo if finite else math.nan
    out = {**e, "n_seeds_run": len(rows), "n_uninformative_seeds": len(rows) - len(use),
           "interval_width_log": width, "powered": bool(finite and width < math.log(3)),
           "paper_kl_ratio": paper_ratio,
           "interval_contains_paper": bool(finite and lo <= math.log(paper_ratio) <= hi),
           "interval_contains_1": bool(finite and lo <= 0.0 <= hi)}
    out["verdict_sentence"] = verdict_sentence(out)
    return out


def verdict_sentence(s: dict[str, Any]) -> str:
    """One sentence: the interval against 1/3 and 1, with n and how many seeds were uninformative."""
    if not math.isfinite(s.get("kl_log_ratio_lo", math.nan)):
        return (f"No verdict: {s['n_paired_seeds']} informative seed(s) of {s['n_seeds_run']} "
                f"({s['n_uninformative_seeds']} never mixed tied and varied groups in a batch); an interval needs 2.")
    ci = f"[{s['kl_ratio_lo']:.2f}, {s['kl_ratio_hi']:.2f}]"
    paper = "contains" if s["interval_contains_paper"] else "excludes"
    one = "contains" if s["interval_contains_1"] else "excludes"
    power = "" if s["powered"] else " (too wide to separate 1/3 from 1)"
    rule = s["verdict"].split(":")[0]
    return (f"Over {s['n_paired_seeds']} informative paired seeds ({s['n_uninformative_seeds']} uninformative), the "
            f"advantage/reward probe-KL ratio is {s['kl_ratio_geomean']:.2f}, 90% interval {ci}{power}, which "
            f"{paper} the paper's 1/3 and {one} 1 (equal drift); verdict by the pre-set rule: {rule}.")


# --- files ---------------------------------------------------------------------------------------------------------
def write_atomic(path: Path, obj: Any) -> None:
    """JSON to ``path`` through a temp file and a rename: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=_json_default) + "\n")
    os.replace(tmp, path)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return str(obj)


def _clean(obj: Any) -> Any:
    """NaN -> None so the JSON is standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def cpu_info() -> dict[str, Any]:
    """CPU model, visible cores, torch threads and the load average when read (contention)."""
    import torch

    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {"model": model, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
            os.cpu_count(), "torch_threads": torch.get_num_threads(), "loadavg_1_5_15": [round(x, 2) for x in load]}


def git_commit(root: Path | None = None) -> str:
    """HEAD of the checkout holding codegrep, ``-dirty`` when tracked files differ."""
    from codegrep.data.gitcmd import checkout_commit

    return checkout_commit(root or Path(__file__).resolve().parents[2], "-dirty")


# --- the study -----------------------------------------------------------------------------------------------------
def _policy(cg: Any, cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(extra train overrides, description) of the study's policy: ``model: tiny`` builds the tiny Llama and
    pre-trains it on the one-turn answer format (train-split tasks only)."""
    if str(cg.model).lower() != "tiny":
        return {}, {"kind": "train YAML model", "model": str(cg.model)}
    from codegrep.config import cache_dir
    from codegrep.data.tasks import profile_tasks
    from codegrep.rl.training_run import episode_config
    from codegrep.rl.tiny_policy import build_tiny_policy, format_pretrain

    path = build_tiny_policy(cache_dir() / "models")  # built once per machine, offline
    if not cg.warm_start and "format" in cg.sft_sources:  # the study's own warm start (see the train YAML)
        tasks, _ = profile_tasks(cfg, split="train", limit=cg.train_tasks)
        path = format_pretrain(path, tasks, episode_config(cfg, cg)[0], cache_dir() / "models")
    return {"model": str(path)}, json.loads((path / "TINY_POLICY.json").read_text())


def run_study(config: str | Path, seeds: int, out: str | Path, resume: bool = False,
              result: str | Path | None = None, command: str = "", progress: Any = print,
              first_seed: int = 0) -> dict[str, Any]:
    """Run (or continue) the study: seeds ``first_seed .. seeds-1``, each arm pair written as it finishes; returns
    the result over every finished seed ``0 .. seeds-1`` in OUT (same settings), written to
    ``OUT/ablation_study.json`` (and ``result`` when given). Several processes may share OUT on disjoint seed
    ranges (``first_seed``), e.g. on a machine with spare cores."""
    from codegrep.config import load_profile
    from codegrep.rl.ablation import _key, screen_pool
    from codegrep.rl.training_run import (finished_with, parse_train_args, run_settings, train, train_arguments,
                                         train_config_path)
    from codegrep.rl.training_stage import metrics_frame

    started = time.time()
    commit = git_commit()  # the code that runs, read before anything can change the checkout
    out = Path(out)
    config = train_config_path(config)
    cg, grpo = parse_train_args(config)  # the command line's train YAML names the profile: loaded once, passed down
    cfg = load_profile(cg.profile)
    extra, policy = _policy(cg, cfg)
    invocation = out / "invocations" / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(started))}-{os.getpid()}.json"
    record = {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "seconds": 0.0,
              "seeds_run": [], "cpu_at_start": cpu_info()}

    def tick() -> None:
        record["seconds"] = time.time() - started
        write_atomic(invocation, record)

    tick()
    screen = screen_pool(cfg, out, config, extra)
    varied, tied = screen.get("pool_varied"), screen.get("pool_tied")
    if varied is None:
        raise ConfigError(f"{screen['screen']}: screen summary predates pool_varied/pool_tied; delete its folder")
    runs = out / "train" / "ablation"
    design = {"max_steps": cg.ablation_max_steps, "num_generations": cg.ablation_num_generations or grpo.num_generations}
    design["per_device_train_batch_size"] = (cg.ablation_prompts_per_step or 1) * design["num_generations"]
    if cg.ablation_max_turns:
        design["max_turns"] = cg.ablation_max_turns
    lam = float(cg.efficiency_lambda)
    common = {**design, **extra, "efficiency_lambda": lam, "out": str(runs),
              "warm_start_dir": str(out / "train" / "_warm_start"), "kl_probe_set": screen["probe_set"],
              "kl_probe_every": cg.ablation_probe_every, "record_groups": True, "save_final_model": False,
              "save_strategy": "no", "shuffle_dataset": False}
    # the settings every seed shares (seed and the seed's task order aside): what a reused seed must match
    probe_cg, probe_grpo = train_arguments(cfg, {**common, "efficiency_layer": "reward", "seed": 0,
                                                 "train_task_ids": interleave_pool(varied, tied, 0)}, config)
    shared = {k: v for k, v in run_settings(probe_cg, probe_grpo).items() if k not in ("seed", "train_task_ids",
                                                                                   "data_seed")}
    settings_key = _key({"settings": shared, "pool_varied": varied, "pool_tied": tied, "policy": policy,
                         "probe": Path(screen["probe_set"]).read_text()})
    seeds_dir = out / "seeds"
    rows = []
    for seed in range(int(first_seed), int(seeds)):
        path = seeds_dir / f"seed-{seed:04d}.json"
        if resume and path.is_file():
            saved = read_json_object(path)  # a damaged seed file is one line naming it (delete it to rerun the seed)
            if saved.get("settings_key") != settings_key:
                raise ConfigError(f"{path}: produced with other settings (key {saved.get('settings_key')}, now "
                                  f"{settings_key}); use another --out or rerun without --resume")
            rows.append(saved)
            continue
        seed_started = time.time()
        order = interleave_pool(varied, tied, seed)
        arms = {}
        for layer in STUDY_LAYERS:
            name = f"{Path(cg.profile).stem}-study-{layer}-s{seed}"
            over = {**common, "efficiency_layer": layer, "seed": seed, "name": name, "train_task_ids": order}
            acg, agrpo = train_arguments(cfg, over, config)
            if not (resume and finished_with(runs / name, acg, agrpo, cfg)):
                progress(f"study: seed {seed}, {layer} arm ({acg.ablation_max_steps} steps)")
                train(cfg, (acg, agrpo))
            arms[layer] = metrics_frame(runs / name).to_dict("records")
        row = seed_row(seed, arms)
        row.update({"settings_key": settings_key, "seconds": time.time() - seed_started, "task_order": order})
        write_atomic(path, _clean(row))
        rows.append(row)
        record["seeds_run"].append(seed)
        tick()
        _write_result(rows, out, None, command, config, cg, design, lam, varied, tied, screen, settings_key, policy,
                      commit)
        progress(f"study: seed {seed} done: ratio {row['kl_ratio']:.3f}, mixed steps {row['mixed_steps']}"
                 + ("" if row["informative"] else " (UNINFORMATIVE: no mixed batch)"))
    tick()
    rows = finished_seeds(seeds_dir, int(seeds), settings_key)  # also those another process (first_seed) wrote
    return _write_result(rows, out, result, command, config, cg, design, lam, varied, tied, screen, settings_key,
                         policy, commit)


def finished_seeds(seeds_dir: Path, seeds: int, settings_key: str) -> list[dict[str, Any]]:
    """Every finished seed ``0 .. seeds-1`` in ``seeds_dir`` produced with ``settings_key``, in seed order."""
    rows = []
    for seed in range(seeds):
        path = seeds_dir / f"seed-{seed:04d}.json"
        if path.is_file():
            row = read_json_object(path)
            if row.get("settings_key") == settings_key:
                rows.append(row)
    return rows


def _write_result(rows: list[dict[str, Any]], out: Path, result: str | Path | None, command: str, config: Path,
                  cg: Any, design: dict[str, Any], lam: float, varied: list[str], tied: list[str],
                  screen: dict[str, Any], settings_key: str, policy: dict[str, Any], commit: str) -> dict[str, Any]:
    """Summarise the seeds finished so far and write ``OUT/ablation_study.json`` (and ``result``), atomically."""
    from codegrep.paper import PAPER_REFERENCE

    summary = summarize(rows, paper_ratio=float(PAPER_REFERENCE["ablation.kl_ratio_advantage_over_reward"]))
    invocations = [read_json_object(p) for p in sorted((out / "invocations").glob("*.json"))]
    wall = sum(r["seconds"] for r in invocations)
    starts = [time.mktime(time.strptime(r["started_utc"], "%Y-%m-%dT%H:%M:%SZ")) for r in invocations]
    elapsed = max(s0 + r["seconds"] for s0, r in zip(starts, invocations)) - min(starts) if invocations else 0.0
    doc = {**summary, "schema": 1, "wall_seconds": wall, "elapsed_seconds": elapsed, "invocations": len(invocations),
           "commit": commit, "command": command,
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "cpu": cpu_info(), "model": policy,
           "design": {"train_config": str(config), "profile": cg.profile, "layers": list(STUDY_LAYERS),
                      "efficiency_lambda": lam, "steps_per_arm": cg.ablation_max_steps,
                      "group_size": design["num_generations"], "prompts_per_step": cg.ablation_prompts_per_step,
                      "max_turns": cg.ablation_max_turns, "pool_varied": len(varied), "pool_tied": len(tied),
                      "probe_sequences": screen.get("n_probe_sequences"), "settings_key": settings_key,
                      "mixed_batches": "pool ordered varied/tied per step, TRL shuffle off; measured per step"},
           "speedups": SPEEDUPS,
           "seeds": [{k: r[k] for k in ("seed", "kl_exact", "kl_ratio", "kl_log_ratio", "mixed_steps", "steps",
                                       "tied_group_share", "informative", "seconds")} for r in rows],
           "wall_seconds_note": "sum of every invocation's own wall time (resumed or concurrent runs add up; "
                                "elapsed_seconds: first start to last finish), on a shared 2-core machine: see "
                                "cpu.loadavg_1_5_15 for contention"}
    doc = _clean(doc)
    write_atomic(out / "ablation_study.json", doc)
    if result is not None:
        write_atomic(Path(result), doc)
    return doc


# --- reading the committed result (notebook 04, the report) ---------------------------------------------------------
def load_result(path: str | Path) -> dict[str, Any] | None:
    """The committed study result, or None when there is none (the notebook then shows the smoke run alone)."""
    p = Path(path)
    return json.loads(p.read_text()) if p.is_file() else None


def seed_table(doc: dict[str, Any]) -> Any:
    """One row per seed: final probe KL per arm, paired ratio, mixed steps, informative."""
    import pandas as pd

    rows = [{"seed": r["seed"], "kl_advantage": r["kl_exact"].get("advantage"), "kl_reward": r["kl_exact"].get("reward"),
             "ratio_advantage/reward": r["kl_ratio"], "mixed_steps": r["mixed_steps"].get("reward"),
             "steps": r["steps"].get("reward"), "informative": r["informative"]} for r in doc.get("seeds", [])]
    return pd.DataFrame(rows)
