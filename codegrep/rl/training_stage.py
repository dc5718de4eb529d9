"""What notebook 03 calls: the profile's main training run, its held-out evaluation against the baselines,
the data ablation and the verdict.

Every function reuses finished runs (``done.json``) and cached evaluation rows, so a notebook re-run
only computes what is missing. Evaluation always uses the profile's ``agent:`` section (the episode
limits training also reads, :func:`codegrep.rl.training_run.episode_config`) on the profile's ``eval`` split.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from codegrep.artifacts import runs_dir
from codegrep.rl.expert_iteration import ARM
from codegrep.rl.training_run import finished_with, train, train_arguments
from codegrep.rl.panels import CURVE_PANELS, PANELS
from codegrep.rl.trainer import read_metrics
from codegrep.rl.policy_rows import (TRAINED_POLICIES, agent_rows, evaluation_stamp, initial_policy_dir,
                                     ranked_line_numbers)

POLICIES = ("untrained", "warm start", "GRPO")
"""The trained agent's curve: before SFT, after SFT (warm start), after GRPO."""
ARMS = (ARM,)
"""Comparison arms from the same warm start (``train.expert_iteration``, :mod:`codegrep.rl.expert_iteration`)."""
BASELINES = ("bm25", "grep-heuristic", "oracle")
"""Retrievers shown beside it (the evaluation harness, ``codegrep.retrievers.evaluate``)."""
REFERENCE = "bm25"
"""The paired comparison's reference (the paper's headline baseline)."""
COLUMNS = {"acc@1": "p_at_1", "precision": "precision", "recall": "recall", "f0.5": "f0.5",
           "rounds": "rounds", "tool_calls": "tool_calls", "tokens": "tokens"}
"""Per-instance harness columns -> the names this stage reports (P@1 = a gold file ranked first)."""


def main_run_dir(cfg: dict[str, Any], artifacts: str | Path | None = None) -> Path:
    """Where the profile's main training run lives, whether or not it has been trained."""
    cg, grpo = train_arguments(cfg)
    return runs_dir(artifacts, cg.out) / cg.run_name(grpo.seed)


def main_run(cfg: dict[str, Any], artifacts: str | Path | None = None) -> Path:
    """The profile's main training run (its train YAML, with the profile's ``train.*`` keys), trained once and
    reused while its settings and the profile inputs it trained on are the same (``finished_with``). ``cfg`` itself
    is passed down: a notebook's override of its tasks/env/agent sections reaches training (and retrains)."""
    run_dir = main_run_dir(cfg, artifacts)
    args = train_arguments(cfg, {"out": str(run_dir.parent), "name": run_dir.name})
    if not finished_with(run_dir, *args, cfg):
        run_dir = train(cfg, args)
    return run_dir


def _eval_dir(artifacts: str | Path, run_name: str) -> Path:
    return Path(artifacts) / "train" / "eval" / run_name


def evaluation_dir(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path) -> Path:
    """The run's evaluation-row cache, emptied when what its rows depend on changed (``policy_rows.evaluation_stamp``: a
    retrained run, a notebook's override of the agent section ...). A cache written before stamps were kept is
    stamped and reused."""
    import shutil

    from codegrep.files import write_atomic

    out = _eval_dir(artifacts, Path(run_dir).name)
    stamp, want = out / "stamp.json", evaluation_stamp(cfg, run_dir)
    if stamp.is_file() and json.loads(stamp.read_text()) != want:
        shutil.rmtree(out)
    if not stamp.is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(stamp, json.dumps(want, indent=1, sort_keys=True))
    return out


def trained_policy_rows(cfg: dict[str, Any], artifacts: str | Path) -> Path | None:
    """The evaluation-harness rows of the main run's GRPO policy on the eval split, as notebook 03 wrote
    them (``policy_evaluation``); None when that has not run. Never trains."""
    path = _eval_dir(artifacts, main_run_dir(cfg, artifacts).name) / "GRPO.jsonl"
    return path if path.is_file() else None


def metrics_frame(run_dir: str | Path) -> pd.DataFrame:
    """A run's metrics.jsonl as a DataFrame (one row per step, TRL's raw keys dropped)."""
    return pd.DataFrame([{k: v for k, v in r.items() if k != "trl"} for r in read_metrics(run_dir)])


def run_summary(run_dir: str | Path) -> dict[str, Any]:
    """What a run trained on and with which limits: episode limits used and training-only overrides
    (``config.json``), demonstrations per source, GRPO prompts and the overlap with the evaluation split
    (``manifest.json``)."""
    from collections import Counter

    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    episode = config.get("episode") or {}
    return {"episode_limits": episode.get("used"), "training_only_overrides": episode.get("training_overrides") or {},
            "demonstrations": dict(Counter(d["source"] for d in manifest["sft_demonstrations"])),
            "grpo_prompts": len(manifest["grpo_prompts"]), "evaluation_ids": manifest["n_evaluation_ids"],
            "overlap_with_evaluation": len(manifest["overlap"]), "n_train_tasks": config.get("n_train_tasks")}


def evaluation_rows(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                    limit: int | None = None, baselines: Sequence[str] = BASELINES) -> dict[str, list[dict[str, Any]]]:
    """Harness rows per policy/retriever on the profile's eval split: the untrained, warm-started and GRPO
    policies of ``run_dir`` (:func:`agent_rows`) and the ``baselines`` (``profile_evaluation``), same tasks."""
    from codegrep.agent.models import resolve_model
    from codegrep.data.tasks import profile_tasks
    from codegrep.retrievers.evaluate import profile_evaluation

    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    tasks, resolver = profile_tasks(cfg, split="eval", limit=limit)
    initial = initial_policy_dir(config)
    models = {"untrained": str(resolve_model(config["codegrep"]["model"])),
              **dict(zip(TRAINED_POLICIES, (str(initial), str((run_dir / "final").resolve()))))}
    from codegrep.data.tasks import seeded_sample

    # the untrained policy on a seeded subset (curve_eval_tasks, a budget knob); warm start and GRPO on every task
    curve_tasks = seeded_sample(tasks, config["codegrep"].get("curve_eval_tasks") or None,
                                int(config["grpo"].get("seed", 0)))
    results: dict[str, list[dict[str, Any]]] = {}
    cache = evaluation_dir(cfg, run_dir, artifacts)
    for label, model in models.items():
        out = cache / f"{label.replace(' ', '_')}.jsonl"
        results[label] = agent_rows(cfg, model, curve_tasks if label == "untrained" else tasks, resolver, out)
    wanted = {t.instance_id for t in tasks}
    for name in baselines:
        rows, _ = profile_evaluation(cfg, name, "eval", out=artifacts, limit=limit)
        results[name] = [r for r in rows.to_dict("records") if r["instance_id"] in wanted]
    return results


def _column(name: str) -> str:
    """``p@1_diff_lo`` -> ``p_at_1_diff_lo``; ``precision@agent`` -> ``precision_at_agent_size``.

    >>> _column("p@1_diff_lo"), _column("precision@agent_hi"), _column("recall")
    ('p_at_1_diff_lo', 'precision_at_agent_size_hi', 'recall')
    """
    return name.replace("@agent", "_at_agent_size").replace("@", "_at_")


def compare(results: dict[str, list[dict[str, Any]]], reference: str = REFERENCE, agent: str | None = "GRPO",
            n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """One row per policy/retriever on the instances all share: the harness's fair comparison
    (``codegrep.retrievers.evaluate.comparison_table``: P@1..3, precision and recall of the returned set
    and at the agent's set size, each with a bootstrap interval and the paired difference to ``reference``),
    plus F0.5, rounds, tool calls, tokens and the format-valid rate (episodes that ended in a submit).

    >>> rows = lambda files: [{"instance_id": i, "ranked": f, "files": f, "gold": ["a.py"], "f0.5": 0.0,
    ...                        "rounds": 1, "tool_calls": 2, "tokens": 3, "extra": {}} for i, f in zip("xy", files)]
    >>> t = compare({"bm25": rows([["b.py"], ["a.py"]]), "GRPO": rows([["a.py"], ["a.py"]])}, n_boot=200)
    >>> t.set_index("policy").loc["GRPO", ["n", "p_at_1", "p_at_1_diff"]].astype(float).tolist()
    [2.0, 1.0, 0.5]
    """
    from codegrep.retrievers.evaluate import comparison_table, is_non_submit

    table = comparison_table(results, reference=reference, agent=agent if agent in results else None,
                             n_boot=n_boot, seed=seed)
    shared = set(table.attrs["instances"])
    table = table.rename(columns={c: _column(c) for c in table.columns}).rename(columns={"retriever": "policy"})
    for name, rows in results.items():
        rows = [r for r in rows if r["instance_id"] in shared]
        mask = table["policy"] == name
        for col in ("f0.5", "rounds", "tool_calls", "tokens"):
            table.loc[mask, col] = float(np.mean([float(r.get(col) or 0) for r in rows])) if rows else np.nan
        table.loc[mask, "format_valid_rate"] = float(np.mean([not is_non_submit(r) for r in rows])) if rows \
            else np.nan
    return table


def policy_evaluation(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                      limit: int | None = None) -> pd.DataFrame:
    """The curve and its baselines: :func:`compare` over :func:`evaluation_rows` (one row per policy)."""
    return split_compare(evaluation_rows(cfg, run_dir, artifacts, limit))


def wins_losses(results: dict[str, list[dict[str, Any]]], policy: str = "GRPO",
                reference: str = REFERENCE) -> pd.DataFrame:
    """Per instance both evaluated: P@1 (a gold file ranked first) of ``policy`` and ``reference``, and the
    outcome for ``policy``: win, loss, both right or both wrong.

    >>> rows = lambda fs: [{"instance_id": i, "ranked": f, "gold": ["a.py"]} for i, f in zip("xyz", fs)]
    >>> t = wins_losses({"GRPO": rows([["a.py"], [], ["a.py"]]), "bm25": rows([["b.py"], ["a.py"], ["a.py"]])})
    >>> t["outcome"].tolist()
    ['win', 'loss', 'both right']
    """
    def first_gold(row: dict[str, Any]) -> float:
        ranked = row.get("ranked") or row.get("files") or []
        return float(bool(ranked) and ranked[0] in set(row.get("gold") or []))

    mine = {r["instance_id"]: r for r in results.get(policy, [])}
    theirs = {r["instance_id"]: r for r in results.get(reference, [])}
    rows = []
    for iid in [i for i in mine if i in theirs]:
        a, b = first_gold(mine[iid]), first_gold(theirs[iid])
        outcome = "win" if a > b else "loss" if a < b else "both right" if a else "both wrong"
        rows.append({"instance_id": iid, "repo": mine[iid].get("repo", ""), policy: a, reference: b,
                     "outcome": outcome})
    return pd.DataFrame(rows, columns=["instance_id", "repo", policy, reference, "outcome"])


def ceiling(cfg: dict[str, Any], n: int, seed: int = 0) -> tuple[pd.DataFrame, dict[str, float]]:
    """The protocol ceiling on a seeded ``n`` TRAINING tasks (``codegrep.retrievers.scripted.profile_ceiling``):
    the table, and its headline numbers (``ceiling_*``)."""
    from codegrep.retrievers.scripted import ceiling_table, profile_ceiling

    rows = profile_ceiling(cfg, n, seed)
    frame = pd.DataFrame(rows)
    best = frame[frame.strategy.str.startswith("first-listed")].groupby("setting")["p_at_1"].max()
    shown = frame[frame.strategy.str.startswith("oracle-shown")].set_index("setting")["p_at_1"]
    heuristic = frame[frame.strategy.str.startswith("grep heuristic")]["p_at_1"]
    numbers = {"ceiling_p_at_1_copier": float(best.get("profile", np.nan)),
               "ceiling_p_at_1_copier_paper_tools": float(best.get("paper tools, same issue text", np.nan)),
               "ceiling_p_at_1_copier_before": float(best.get("smoke before issue 27", np.nan)),
               "ceiling_p_at_1_gold_shown": float(shown.get("profile", np.nan)),
               "ceiling_p_at_1_grep_heuristic_train": float(heuristic.iloc[0]) if len(heuristic) else float("nan"),
               "ceiling_n_train_tasks": int(frame["n"].max())}
    return ceiling_table(rows), numbers


def split_compare(results: dict[str, list[dict[str, Any]]], reference: str = REFERENCE) -> pd.DataFrame:
    """:func:`compare` where the untrained / warm-start policies may cover only a subset (``curve_eval_tasks``):
    the GRPO policy and the baselines are compared on every instance they share; a policy evaluated on fewer
    instances gets its row (and its paired difference to ``reference``) from a second comparison on its own
    instances, and column ``n`` says how many. With equal coverage this is exactly :func:`compare`.

    >>> rows = lambda ids, f: [{"instance_id": i, "ranked": f, "files": f, "gold": ["a.py"], "f0.5": 0.0,
    ...                         "rounds": 1, "tool_calls": 2, "tokens": 3, "extra": {}} for i in ids]
    >>> t = split_compare({"untrained": rows("x", []), "GRPO": rows("xyz", ["a.py"]), "bm25": rows("xyz", ["b.py"])})
    >>> t.set_index("policy")["n"].astype(int).to_dict()
    {'untrained': 1, 'GRPO': 3, 'bm25': 3}
    """
    main = results.get("GRPO")
    covered = {r["instance_id"] for r in main} if main else None
    partial = [k for k in POLICIES if k in results and k != "GRPO" and covered is not None
               and {r["instance_id"] for r in results[k]} != covered]
    if not partial:
        return compare(results, reference=reference)
    table = compare({k: v for k, v in results.items() if k not in partial}, reference=reference)
    extra = []
    for name in partial:
        ids = {r["instance_id"] for r in results[name]}
        sub = {k: [r for r in results[k] if r["instance_id"] in ids] for k in (name, "GRPO", reference)
               if k in results}
        part = compare(sub, reference=reference)
        extra.append(part[part["policy"] == name])
    out = pd.concat(extra + [table], ignore_index=True)
    order = {p: i for i, p in enumerate(list(POLICIES) + list(results))}
    return out.sort_values("policy", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def data_ablation(cfg: dict[str, Any], artifacts: str | Path, limit: int | None = None) -> pd.DataFrame:
    """Warm starts on each demonstration mix of ``data_ablation_arms`` (same ``sft_max_demos``, epochs and
    learning rate: the same budget), each evaluated on the eval split beside BM25. SFT only, no GRPO."""
    from codegrep.config import section
    from codegrep.data.tasks import profile_tasks
    from codegrep.env.pool import WorktreePool
    from codegrep.env.tools import ToolConfig
    from codegrep.retrievers.evaluate import profile_evaluation
    from codegrep.rl.training_run import episode_config, evaluation_ids_of, initial_policy

    cg, grpo = train_arguments(cfg)
    cg.warm_start_dir = cg.warm_start_dir or str(runs_dir(artifacts, cg.out) / "_warm_start")
    env_sec = section(cfg, "env")
    train_tasks, train_resolver = profile_tasks(cfg, split="train", limit=cg.train_tasks)
    agent, _ = episode_config(cfg, cg)
    exclude = evaluation_ids_of(cfg)
    limit = limit or cg.data_ablation_eval_tasks
    tasks, resolver = profile_tasks(cfg, split="eval", limit=limit)
    bm25, _ = profile_evaluation(cfg, REFERENCE, "eval", out=artifacts, limit=limit)
    wanted = {t.instance_id for t in tasks}
    results = {REFERENCE: [r for r in bm25.to_dict("records") if r["instance_id"] in wanted]}
    sizes = {}
    for arm in cg.data_ablation_arms:
        model, demos = initial_policy(cg, grpo, cfg, train_tasks, train_resolver,
                                      WorktreePool.from_config(env_sec), agent, env_sec, ToolConfig.from_dict(env_sec),
                                      exclude=exclude, sources=arm.split("+"))
        sizes[arm] = len(demos)
        out = Path(artifacts) / "train" / "data_ablation" / f"{arm.replace('+', '_')}-{Path(model).name}.jsonl"
        results[arm] = agent_rows(cfg, model, tasks, resolver, out)
    table = compare(results, agent=None)
    table["n_demonstrations"] = table["policy"].map(sizes)
    return table


def recorded_data_report(cfg: dict[str, Any], fidelity_runs: int | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """How the recorded runs became demonstrations (counts per outcome and repository, evaluation runs excluded)
    and the conversion's fidelity: converted calls replayed live on every shipped snapshot that has the run's
    instance (a measurement, so evaluation instances are replayed too; none of it reaches training)."""
    from codegrep.data.repos import RepoResolver
    from codegrep.data.shipped import snapshot_repos_dir, trajectory_dirs, verified_rows_path
    from codegrep.data.tasks import read_tasks
    from codegrep.env.tools import ToolConfig
    from codegrep.mining.run_converter import ConvertConfig, fidelity_summary, recorded_demonstrations, replay_fidelity
    from codegrep.rl.training_run import episode_config, evaluation_ids_of

    cg, _ = train_arguments(cfg)
    agent, _ = episode_config(cfg, cg)
    tools = ToolConfig.from_dict(cfg.get("env"))
    runs = cg.recorded_runs or trajectory_dirs()
    _, stats = recorded_demonstrations(runs, agent, exclude=evaluation_ids_of(cfg),
                                       config=ConvertConfig(max_calls=cg.recorded_max_calls), tools=tools)
    tasks, _ = read_tasks(str(verified_rows_path()))
    frame = replay_fidelity(runs, RepoResolver(repos_dir=snapshot_repos_dir(), offline=True),
                            {t.instance_id: t for t in tasks}, tools=tools, max_runs=fidelity_runs)
    return stats.to_dict(), fidelity_summary(frame)


def training_verdict(evaluation: pd.DataFrame, reference: str = REFERENCE) -> str:
    """Plain sentences computed from the evaluation: is the GRPO-trained agent at or above ``reference`` on
    P@1 (paired interval), and how did each stage (warm start, GRPO) move it?"""
    by = evaluation.set_index("policy")
    if "GRPO" not in by.index or reference not in by.index:
        return "No verdict: the GRPO policy or the reference retriever was not evaluated."
    g, r = by.loc["GRPO"], by.loc[reference]
    n = int(g["n"])
    diff, lo, hi = g["p_at_1_diff"], g["p_at_1_diff_lo"], g["p_at_1_diff_hi"]
    if lo > 0:
        head = f"The trained agent is ABOVE {reference} on P@1"
    elif hi < 0:
        head = f"The trained agent is BELOW {reference} on P@1 (the goal, at or above {reference}, is NOT met)"
    else:
        head = (f"The trained agent is not distinguishable from {reference} on P@1 "
                + ("(point estimate at or above it)" if diff >= 0 else "(point estimate below it: goal not met)"))
    curve = " -> ".join(f"{by.loc[p, 'p_at_1']:.3f} ({p}" + (f", on a seeded {int(by.loc[p, 'n'])} of them)"
                                                            if int(by.loc[p, "n"]) != n else ")")
                        for p in POLICIES if p in by.index)
    small = " This is a small sample: one instance moves P@1 by {:.3f}.".format(1 / max(n, 1)) if n < 100 else ""
    return (f"{head}: {g['p_at_1']:.3f} vs {r['p_at_1']:.3f} on the same {n} held-out instances, paired "
            f"difference {diff:+.3f} [95% bootstrap {lo:+.3f}, {hi:+.3f}]. P@1 along training: {curve}; "
            f"format-valid rate (episodes ending in a submit) {by.loc['GRPO', 'format_valid_rate']:.2f}." + small)


def headline_numbers(evaluation: pd.DataFrame, steps: pd.DataFrame, run_dir: str | Path, verdict: str) -> dict[str, Any]:
    """The evaluation's and the run's part of notebook 03's headline (:func:`headline` adds the rest)."""
    by = evaluation.set_index("policy")
    g, r = by.loc["GRPO"], by.loc[REFERENCE]
    out = {"run": Path(run_dir).name, "steps": int(steps["step"].max()) if len(steps) else 0,
           "train_seconds_per_step": float(steps["seconds"].mean()) if len(steps) else float("nan"),
           "final_task_reward": float(steps["task_reward"].iloc[-1]) if len(steps) else float("nan"),
           "final_kl": float(steps["kl"].iloc[-1]) if "kl" in steps and len(steps) else float("nan"),
           "n_eval_instances": int(g["n"]),
           "p_at_1_agent": float(g["p_at_1"]), "p_at_1_bm25": float(r["p_at_1"]),
           "p_at_1_diff": float(g["p_at_1_diff"]), "p_at_1_diff_lo": float(g["p_at_1_diff_lo"]),
           "p_at_1_diff_hi": float(g["p_at_1_diff_hi"]),
           "goal_met": bool(g["p_at_1_diff"] >= 0), "verdict": verdict}
    for p, key in (("untrained", "untrained"), ("warm start", "warm_start"), ("GRPO", "grpo"),
                   (ARM, "expert_iteration")):
        if p in by.index:
            out[f"p_at_1_{key}"] = float(by.loc[p, "p_at_1"])
            out[f"heldout_f_{key}"] = float(by.loc[p, "f0.5"])
            out[f"format_valid_{key}"] = float(by.loc[p, "format_valid_rate"])
            out[f"n_eval_{key}"] = int(by.loc[p, "n"])
    for name in ("grep-heuristic", "oracle"):
        if name in by.index:
            out[f"p_at_1_{name.replace('-', '_')}"] = float(by.loc[name, "p_at_1"])
    if "precision_at_agent_size" in by.columns:  # the agent's own set size, and BM25 cut at that size
        out["precision_agent"] = float(g["precision"])
        out["precision_at_agent_size_bm25"] = float(r["precision_at_agent_size"])
    return out


def headline_reasons(numbers: dict[str, Any]) -> dict[str, str]:
    """Why a headline number of notebook 03 is empty (None/NaN) in this run, so no blank goes unexplained.

    >>> headline_reasons({"precision_at_agent_size_bm25": float("nan"), "precision_agent": 0.0, "p_at_1_agent": 0.0})
    {'precision_at_agent_size_bm25': "the trained agent submitted no file on any evaluated instance, so BM25 cut at the agent's set size (0 files) has no precision"}
    >>> headline_reasons({"precision_at_agent_size_bm25": 0.5})
    {}
    """
    reasons = {}
    value = numbers.get("precision_at_agent_size_bm25")
    if value is None or (isinstance(value, float) and value != value):
        reasons["precision_at_agent_size_bm25"] = (
            "the trained agent submitted no file on any evaluated instance, so BM25 cut at the agent's set size "
            "(0 files) has no precision")
    return reasons


def conclusion(evaluation: pd.DataFrame, outcomes: pd.DataFrame, ceiling_numbers: dict[str, float]) -> str:
    """What the run showed, in sentences computed from its numbers: the agent against the grep heuristic and
    BM25 (the issue-27 goal), the stages, the wins and losses, and the ceiling the protocol allows."""
    by = evaluation.set_index("policy")
    if "GRPO" not in by.index:
        return "No conclusion: the GRPO policy was not evaluated."
    g = by.loc["GRPO"]
    parts = []
    for name in ("grep-heuristic", REFERENCE):
        if name in by.index:
            gap = g["p_at_1"] - by.loc[name, "p_at_1"]
            parts.append(f"{'at or above' if gap >= 0 else 'below'} {name} by {abs(gap):.3f} "
                         f"({g['p_at_1']:.3f} vs {by.loc[name, 'p_at_1']:.3f})")
    stages = ", ".join(f"{p} {by.loc[p, 'p_at_1']:.3f} (n = {int(by.loc[p, 'n'])})" for p in (*POLICIES, *ARMS)
                       if p in by.index)
    counts = outcomes["outcome"].value_counts().to_dict() if len(outcomes) else {}
    wl = (f"Against {REFERENCE}, instance by instance: {counts.get('win', 0)} wins, {counts.get('loss', 0)} losses, "
          f"{counts.get('both right', 0)} both right, {counts.get('both wrong', 0)} both wrong.")
    cap = ceiling_numbers.get("ceiling_p_at_1_copier", float("nan"))
    ceil = (f"On {ceiling_numbers.get('ceiling_n_train_tasks', 0)} training tasks, a policy that exactly copies the "
            f"scripted expert reaches P@1 {cap:.3f} under this protocol (the grep heuristic "
            f"{ceiling_numbers.get('ceiling_p_at_1_grep_heuristic_train', float('nan')):.3f} on the same tasks; the "
            f"paper's tools {ceiling_numbers.get('ceiling_p_at_1_copier_paper_tools', float('nan')):.3f}); a gold file "
            f"is shown by turn 1 in {ceiling_numbers.get('ceiling_p_at_1_gold_shown', float('nan')):.3f} of them."
            ) if np.isfinite(cap) else "The ceiling was not measured."
    return (f"The trained agent (GRPO policy) on the {int(g['n'])} held-out instances is " + "; ".join(parts)
            + f". P@1 by stage: {stages}. " + wl + " " + ceil)


# --- figures (notebook 03 draws through these; codegrep.plots is the style) -----------------------------------

def curve_figure(steps: pd.DataFrame, run_name: str, n_tasks: int | None = None) -> Any:
    """The main run's per-step training curves (real run); a panel whose column is all missing says why."""
    return curves_figure({run_name: steps}, [c for c, _, _ in CURVE_PANELS], n_tasks)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def non_numbers(steps: pd.DataFrame, col: str) -> str:
    """Where a run's metrics column holds something other than a number (a string, true/false, a list): the
    steps and a first value, or "" (absent values are not counted: a probe logs every few steps).

    >>> non_numbers(pd.DataFrame({"step": [1, 2, 3, 4], "kl": ["0.1", 0.2, "n/a", None]}), "kl")
    "'kl' is not a number at steps 1, 3 (e.g. '0.1')"
    """
    if col not in steps:
        return ""
    bad = [(step, v) for step, v in zip(steps["step"], steps[col])
           if not _is_number(v) and v is not None and not (isinstance(v, float) and np.isnan(v))]
    if not bad:
        return ""
    listed = ", ".join(str(s) for s, _ in bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
    return f"'{col}' is not a number at step{'s' if len(bad) > 1 else ''} {listed} (e.g. {bad[0][1]!r})"[:200]


def curves_figure(runs: dict[str, pd.DataFrame], columns: Sequence[str], n_tasks: int | None = None) -> Any:
    """Per-step curves of one or more training runs (real runs), one panel per metrics.jsonl column of
    :data:`PANELS`, one line per run; a panel no run logged says why instead of drawing zeros, and values that
    are not numbers (:func:`non_numbers`) are left out with a note on the panel, not drawn as categories."""
    from codegrep import plots

    from matplotlib.lines import Line2D

    fig, axes = plots.subplots(1, len(columns), width=3.3 * len(columns))
    colours = {name: plots.PALETTE[i % len(plots.PALETTE)] for i, name in enumerate(runs)}  # one colour a run
    for ax, col in zip(np.atleast_1d(axes), columns):
        what, unit = PANELS[col]
        values = {name: steps[col].map(lambda v: float(v) if _is_number(v) else np.nan)
                  for name, steps in runs.items() if col in steps}
        logged = {name: v for name, v in values.items() if v.notna().any()}
        notes = [(f"{name}: " if len(runs) > 1 else "") + why for name in values
                 if (why := non_numbers(runs[name], col))]
        if not logged:
            these = "this run" if len(runs) == 1 else "these runs"
            plots.undefined(ax, what, f"'{col}' holds no number in {these}: " + "; ".join(notes) if notes
                            else f"'{col}' was not logged by {these}")
            continue
        for name, v in logged.items():
            ax.plot(runs[name]["step"], v, marker="o", label=name, color=colours[name])
        if notes:
            ax.text(0.02, 0.02, "left out: " + "; ".join(notes), transform=ax.transAxes, fontsize=7, color="0.3",
                    va="bottom", wrap=True)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(unit)
        plots.integer_ticks(ax, "both" if col in ("rounds", "tool_calls") else "x")
        if n_tasks is not None:
            plots.title(ax, what, "real", n_tasks, "train tasks")
        else:
            plots.title(ax, what, "real", len(logged), "run" if len(logged) == 1 else "runs")
    if len(runs) > 1:  # one legend for every panel
        fig.legend(handles=[Line2D([], [], color=c, marker="o", label=name) for name, c in colours.items()],
                   loc="outside lower center", ncols=min(len(runs), 4), title="run")
    return fig


def evaluation_figure(evaluation: pd.DataFrame) -> Any:
    """P@1 with 95% bootstrap intervals and the paired difference to BM25, same held-out instances."""
    from codegrep import plots

    order = [p for p in (*POLICIES, *ARMS, *BASELINES) if p in set(evaluation["policy"])]
    ev = evaluation.set_index("policy").loc[order]
    n = int(ev["n"].max()) if len(ev) else 0
    fig, (a, b) = plots.subplots(1, 2, width=11)
    x = np.arange(len(order))
    err = np.vstack([ev["p_at_1"] - ev["p_at_1_lo"], ev["p_at_1_hi"] - ev["p_at_1"]]).clip(min=0)
    agent = np.array([p in POLICIES or p in ARMS for p in order])
    a.bar(x[agent], ev["p_at_1"][agent], color="C0", label="agent (SmolLM2 policy along training)")
    a.bar(x[~agent], ev["p_at_1"][~agent], color="0.65", label="baseline retriever")
    a.errorbar(x, ev["p_at_1"], yerr=err, fmt="none", ecolor="0.2", capsize=3, label=plots.interval_label("bootstrap"))
    labels = [p if int(ev.loc[p, "n"]) == n else f"{p}\n(n = {int(ev.loc[p, 'n'])})" for p in order]
    a.set_xticks(x, labels, rotation=20)  # a policy evaluated on a seeded subset says so under its bar
    a.set_ylabel("P@1 (a gold file ranked first)")
    a.set_ylim(0, 1)
    a.legend()
    plots.title(a, "held-out P@1: agent along training vs baselines", "SWE-bench Verified (real)", n)
    diffs = ev.drop(index=REFERENCE, errors="ignore")
    y = np.arange(len(diffs))
    derr = np.vstack([diffs["p_at_1_diff"] - diffs["p_at_1_diff_lo"],
                      diffs["p_at_1_diff_hi"] - diffs["p_at_1_diff"]]).clip(min=0)
    b.errorbar(diffs["p_at_1_diff"], y, xerr=derr, fmt="o", capsize=3, label="paired " +
               plots.interval_label("bootstrap"))
    b.axvline(0, color="0.4", lw=1, ls="--", label=f"= {REFERENCE}")
    b.set_yticks(y, [p if int(diffs.loc[p, "n"]) == n else f"{p} (n = {int(diffs.loc[p, 'n'])})" for p in diffs.index])
    b.set_xlabel(f"P@1 minus {REFERENCE} P@1 (same instances)")
    b.legend()
    plots.title(b, f"paired difference to {REFERENCE}", "SWE-bench Verified (real)", n)
    return fig


def wins_losses_figure(outcomes: pd.DataFrame, policy: str = "GRPO", reference: str = REFERENCE) -> Any:
    """Per-instance outcomes of ``policy`` against ``reference`` on P@1, per repository (stacked counts)."""
    from codegrep import plots

    fig, ax = plots.subplots(1, 1, width=7)
    kinds = [("win", "C2"), ("loss", "C3"), ("both right", "0.75"), ("both wrong", "0.45")]
    table = (outcomes.groupby(["repo", "outcome"]).size().unstack(fill_value=0) if len(outcomes)
             else pd.DataFrame())
    repos = list(table.index)
    left = np.zeros(len(repos))
    for kind, color in kinds:
        vals = table[kind].to_numpy() if kind in table else np.zeros(len(repos))
        ax.barh(repos, vals, left=left, color=color, label=kind)
        left += vals
    ax.set_xlabel(f"instances (P@1 of {policy} vs {reference}, same instances)")
    ax.legend()
    plots.title(ax, f"{policy} against {reference}, instance by instance", "SWE-bench Verified (real)",
                len(outcomes))
    return fig


def data_ablation_figure(table: pd.DataFrame) -> Any:
    """P@1 after the warm start per demonstration mix (same budget), beside BM25, with intervals."""
    from codegrep import plots

    fig, ax = plots.subplots(1, 1, width=6)
    x = np.arange(len(table))
    err = np.vstack([table["p_at_1"] - table["p_at_1_lo"], table["p_at_1_hi"] - table["p_at_1"]]).clip(min=0)
    ax.bar(x, table["p_at_1"], color=["0.65" if p == REFERENCE else "C1" for p in table["policy"]])
    ax.errorbar(x, table["p_at_1"], yerr=err, fmt="none", ecolor="0.2", capsize=3,
                label=plots.interval_label("bootstrap") + f"; grey = {REFERENCE}, orange = warm starts")
    labels = [p if p == REFERENCE else f"{p}\n({int(k)} demos)" for p, k in
              zip(table["policy"], table["n_demonstrations"].fillna(0))]
    ax.set_xticks(x, labels)
    ax.set_ylabel("P@1 after the warm start (SFT only)")
    ax.set_ylim(0, 1)
    ax.legend()
    plots.title(ax, "data ablation: demonstration mix, same SFT budget", "SWE-bench Verified (real)",
                int(table["n"].max()) if len(table) else None)
    return fig


# --- the stage contract (codegrep.Stage): what notebook 03 calls ------------------------------------------------------

NOTEBOOK = "03_training"
PARAM_RANGES = {"eval_limit": ">= 1", "fidelity_runs": ">= 0", "ceiling_tasks": ">= 1", "train_check_tasks": ">= 0"}
"""Ranges of :func:`run`'s notebook parameters, checked before any notebook runs (``pipeline.notebook_params``)."""


@dataclass
class TrainingStage:
    """Everything notebook 03 shows: the recorded demonstrations and their fidelity, the protocol ceiling, the main
    run (steps and summary), the held-out evaluation beside the baselines, wins and losses, the optional data
    ablation, and the verdict."""

    cfg: dict[str, Any]
    conversion: dict[str, Any]
    fidelity: pd.DataFrame
    ceiling_table: pd.DataFrame
    ceiling_numbers: dict[str, float]
    run_dir: Path
    steps: pd.DataFrame
    summary: dict[str, Any]
    results: dict[str, list[dict[str, Any]]]
    evaluation: pd.DataFrame
    outcomes: pd.DataFrame
    mixes: pd.DataFrame | None
    verdict: str
    expert_iteration: dict[str, Any] | None = None
    """The expert-iteration arm's summary (:func:`expert_iteration_arm`), None when it did not run."""
    train_check: dict[str, Any] | None = None
    """The training-task check (:func:`train_check`): warm start vs GRPO on real train tasks the run never used."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall seconds of each phase of this call (``PhaseClock``; cached phases ~0 s), in the headline as
    ``seconds_<phase>``."""

    def train_check_note(self) -> str:
        """The training-task check in one sentence (or why it did not run), and the kept policy on the held-out
        instances against the grep heuristic."""
        kept = kept_policy_numbers(self.train_check, self.results)
        if "train_check_kept_diff_heuristic" not in kept:
            return train_check_note(self.train_check)
        return (train_check_note(self.train_check) + f" On the held-out instances the kept policy "
                f"({self.train_check['keep']}) has P@1 {kept['train_check_kept_p_at_1']:.3f}; minus the grep "
                f"heuristic's, paired: {kept['train_check_kept_diff_heuristic']:+.3f} "
                f"[95% {kept['train_check_kept_diff_heuristic_lo']:+.3f}, "
                f"{kept['train_check_kept_diff_heuristic_hi']:+.3f}] (the headline agent stays the GRPO policy).")

    def conversion_lines(self) -> str:
        c = self.conversion
        return (f"{c['runs']} recorded runs: {c['runs_excluded_eval']} on evaluation instances excluded, "
                f"{c['runs_not_useful']} not useful; {c['demonstrations']} demonstrations; "
                f"{c['commands_converted']} of {c['commands']} commands converted ({c['converted_share']:.0%})\n"
                "demonstrations per repository: " + ", ".join(f"{k} {v}" for k, v in c["by_repo"].items()))

    def steps_shown(self) -> pd.DataFrame:
        return self.steps[[c for c in ("step", "task_reward", "f_beta", "format", "submitted", "rounds", "tool_calls",
                                       "tokens", "kl", "seconds") if c in self.steps]]

    def summary_lines(self) -> str:
        from codegrep.rl.progress import PhaseClock

        lines = [f"{key}: {value}" for key, value in self.summary.items()]
        return "\n".join(lines + ([PhaseClock.line(self.seconds)] if self.seconds else []))

    def evaluation_shown(self) -> pd.DataFrame:
        return self.evaluation[["policy", "n", "p_at_1", "p_at_1_lo", "p_at_1_hi", "p_at_1_diff", "p_at_1_diff_lo",
                                "p_at_1_diff_hi", "precision", "precision_at_agent_size", "recall", "f0.5", "rounds",
                                "tool_calls", "tokens", "format_valid_rate"]].round(3)

    def expert_iteration_note(self) -> str:
        """The comparison arm in sentences: what it sampled and kept, and its P@1 against GRPO and the warm start."""
        return expert_iteration_note(self.expert_iteration, self.results, self.evaluation)

    def data_ablation_note(self) -> str:
        if self.mixes is None:
            return "data ablation skipped (data_ablation = False)"
        return f"data ablation: {int((self.mixes['policy'] != REFERENCE).sum())} demonstration mixes, same SFT budget"

    def mixes_shown(self) -> pd.DataFrame | None:
        if self.mixes is None:
            return None
        return self.mixes[["policy", "n_demonstrations", "n", "p_at_1", "p_at_1_lo", "p_at_1_hi", "p_at_1_diff",
                           "p_at_1_diff_lo", "p_at_1_diff_hi", "format_valid_rate"]].round(3)

    def conclusion(self) -> str:
        return conclusion(self.evaluation, self.outcomes, self.ceiling_numbers)


def plan(cfg: dict[str, Any], eval_limit: int | None = None) -> str:
    """One line: the profile's GRPO steps, group, warm start and evaluation size."""
    cg, grpo = train_arguments(cfg)
    return (f"profile {cfg['profile']}: {grpo.max_steps} GRPO steps, group {grpo.num_generations}, "
            f"warm start on {cg.sft_sources} (at most {cg.sft_max_demos or 'all'} demonstrations"
            f"{f' + {cg.first_turn_demos} first-turn ones' if cg.first_turn_demos else ''}), "
            f"evaluation on {eval_limit or cg.eval_tasks or 'every'} eval-split instance(s)")


def run(cfg: dict[str, Any], out: Any, eval_limit: int | None = None, data_ablation: bool = False,
        fidelity_runs: int | None = None, ceiling_tasks: int = 40,
        train_check_tasks: int | None = None) -> TrainingStage:
    """Notebook 03 end to end on the resolved profile ``cfg`` (passed down to training as is): the recorded data
    report, the ceiling, the main run (trained once, reused), its held-out evaluation (cached rows reused), the
    training-task check (``train_check_tasks`` unused real train tasks; None = all, 0 = off), wins and losses,
    the data ablation when asked, the verdict; saves every table."""
    from codegrep.rl.progress import PhaseClock

    cg, _ = train_arguments(cfg)
    eval_limit = eval_limit or cg.eval_tasks
    clock = PhaseClock(NOTEBOOK)  # one line per phase as it ends; the seconds go to the headline (seconds_*)
    with clock("recorded_data"):
        conversion, fidelity = recorded_data_report(cfg, fidelity_runs)
    with clock("ceiling"):
        table, numbers = ceiling(cfg, ceiling_tasks)
    out.table(table.reset_index(), "03_ceiling")
    with clock("training"):  # demonstrations, SFT warm start, GRPO (a finished run is reused)
        run_dir = main_run(cfg, out.artifacts)
    steps = metrics_frame(run_dir)
    out.table(steps, "03_training_steps")
    with clock("evaluation"):  # the policies and the baselines on the eval split (cached rows reused)
        results = evaluation_rows(cfg, run_dir, out.artifacts, limit=eval_limit)
    arm = None
    if cg.expert_iteration:
        with clock("expert_iteration"):
            arm = expert_iteration_arm(cfg, run_dir, out.artifacts, results, limit=eval_limit)
    with clock("train_check"):
        check = train_check(cfg, run_dir, out.artifacts, train_check_tasks)
    evaluation = split_compare(results)
    out.table(evaluation, "03_before_after")
    outcomes = wins_losses(results)
    out.table(outcomes, "03_wins_losses")
    mixes = None
    if data_ablation:
        with clock("data_ablation"):
            mixes = demonstration_mix_ablation(cfg, out.artifacts)
        if mixes is not None:
            out.table(mixes, "03_data_ablation")
    return TrainingStage(cfg, conversion, fidelity, table, numbers, run_dir, steps, run_summary(run_dir), results,
                         evaluation, outcomes, mixes, training_verdict(evaluation), arm, check, clock.seconds)


def train_check(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                tasks: int | None = None) -> dict[str, Any] | None:
    """Issue 27's training-task check of the two trained stages: the run's warm start and GRPO policy on ``tasks``
    real train tasks it never used (None = all; :func:`codegrep.rl.curve.unused_train_check`, rows cached under
    ``<artifacts>/train/train_check``, keyed by the run, its policies, the agent section and the tasks). None when
    off (0); ``{"skipped": why}`` when no unused real train task exists (``NoUnusedTask``, the only refusal caught)."""
    from codegrep.rl.curve import NoUnusedTask, unused_train_check

    if tasks == 0:
        return None
    try:
        return unused_train_check(cfg, run_dir, Path(artifacts) / "train" / "train_check", limit=tasks,
                                  progress=False)
    except NoUnusedTask as exc:  # any other refusal (a bad task file, a missing model) stops the notebook
        return {"skipped": str(exc)}


def train_check_note(check: dict[str, Any] | None) -> str:
    """One sentence on the training-task check.

    >>> train_check_note(None)
    'training-task check off (train_check_tasks = 0)'
    >>> train_check_note({"n_tasks": 21, "warm_start": {"p_at_1": 0.238}, "grpo": {"p_at_1": 0.143},
    ...                   "expert_p_at_1": 0.143, "grpo_won": 1, "grpo_lost": 3, "sign_test_p": 0.625,
    ...                   "keep": "warm start"})[:96]
    'Training-task check (21 real train tasks the run never used; SMALL): P@1 warm start 0.238, GRPO '
    """
    if check is None:
        return "training-task check off (train_check_tasks = 0)"
    if "skipped" in check:
        return f"training-task check not run: {check['skipped']}"
    return (f"Training-task check ({check['n_tasks']} real train tasks the run never used; SMALL): P@1 warm start "
            f"{check['warm_start']['p_at_1']:.3f}, GRPO {check['grpo']['p_at_1']:.3f}, scripted expert "
            f"{check['expert_p_at_1']:.3f}; GRPO won {check['grpo_won']} and lost {check['grpo_lost']} against its "
            f"warm start (exact sign test p = {check['sign_test_p']:.2f}), so this check keeps the {check['keep']}. "
            "These tasks lean hard: the demonstrations are rejection sampled, so most unused tasks are the expert's "
            "misses.")


def train_check_numbers(check: dict[str, Any] | None) -> dict[str, Any]:
    """The check's headline keys (``train_check_*``); empty when it did not run."""
    if not check or "skipped" in check:
        return {}
    return {"train_check_n_tasks": int(check["n_tasks"]),
            "train_check_p_at_1_warm_start": float(check["warm_start"]["p_at_1"]),
            "train_check_p_at_1_grpo": float(check["grpo"]["p_at_1"]),
            "train_check_p_at_1_expert": float(check["expert_p_at_1"]),
            "train_check_grpo_won": int(check["grpo_won"]), "train_check_grpo_lost": int(check["grpo_lost"]),
            "train_check_keep": str(check["keep"])}


def kept_policy_numbers(check: dict[str, Any] | None, results: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """On the held-out instances, the policy the training-task check keeps (chosen without them): its P@1 and its
    paired difference to the grep heuristic (``train_check_kept_*``); empty when the check did not run. The
    headline agent stays the GRPO policy; these keys say what a train-side choice would have reported.

    >>> rows = lambda hits: [{"instance_id": str(i), "ranked": ["a.py"] if h else ["b.py"], "files": ["a.py"] if h
    ...                       else ["b.py"], "gold": ["a.py"], "acc@1": float(h)} for i, h in enumerate(hits)]
    >>> res = {"warm start": rows([1, 1, 0, 1]), "GRPO": rows([0, 1, 0, 0]), "grep-heuristic": rows([1, 0, 0, 1])}
    >>> n = kept_policy_numbers({"keep": "warm start"}, res)
    >>> n["train_check_kept_p_at_1"], round(n["train_check_kept_diff_heuristic"], 2)
    (0.75, 0.25)
    >>> kept_policy_numbers(None, res), kept_policy_numbers({"skipped": "none left"}, res)
    ({}, {})
    """
    if not check or "skipped" in check or not results.get(check["keep"]):
        return {}
    rows = results[check["keep"]]
    out = {"train_check_kept_p_at_1": float(np.mean([float(r.get("acc@1") or 0) for r in rows]))}
    paired = _paired(results, check["keep"], "grep-heuristic")
    if paired is not None:
        out.update(dict(zip(("train_check_kept_diff_heuristic", "train_check_kept_diff_heuristic_lo",
                             "train_check_kept_diff_heuristic_hi"), paired)))
    return out


FIGURES = {
    "curves": (lambda r: curve_figure(r.steps, r.run_dir.name, r.summary["n_train_tasks"]), "03_training_curves",
               lambda r: f"{r.cfg['profile']} profile, run {r.run_dir.name}: real run"),
    "evaluation": (lambda r: evaluation_figure(r.evaluation), "03_before_after",
                   "held-out eval split (real SWE-bench Verified), agent retriever vs harness baselines"),
    "wins_losses": (lambda r: wins_losses_figure(r.outcomes), "03_wins_losses",
                    "GRPO policy vs BM25 per instance, P@1, held-out real SWE-bench Verified"),
    "data_ablation": (lambda r: data_ablation_figure(r.mixes), "03_data_ablation",
                      "warm start only (SFT), same budget per arm; real eval instances"),
}
"""name -> (drawing function, saved file name, note stamped on the figure); ``data_ablation`` only when it ran."""


def figures(result: TrainingStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named; the data ablation's only when it ran)."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names, absent=["data_ablation"] if result.mixes is None else [])


def _paired(results: dict[str, list[dict[str, Any]]], arm: str, reference: str) -> tuple[float, float, float] | None:
    """``arm`` minus ``reference`` on P@1 over the instances both ran, with the paired 95% bootstrap interval."""
    if not results.get(arm) or not results.get(reference):
        return None
    row = compare({k: results[k] for k in (reference, arm)}, reference=reference, agent=arm).set_index("policy").loc[arm]
    return float(row["p_at_1_diff"]), float(row["p_at_1_diff_lo"]), float(row["p_at_1_diff_hi"])


def heuristic_gap(results: dict[str, list[dict[str, Any]]], policy: str = "GRPO") -> dict[str, float]:
    """Issue 27's goal as numbers: the trained agent's P@1 minus the grep heuristic's on the instances both ran,
    with a paired 95% bootstrap interval (``p_at_1_diff_heuristic[_lo|_hi]``); empty when either is missing.

    >>> rows = lambda files: [{"instance_id": i, "ranked": f, "files": f, "gold": ["a.py"], "f0.5": 0.0,
    ...                        "rounds": 1, "tool_calls": 2, "tokens": 3, "extra": {}} for i, f in zip("xy", files)]
    >>> heuristic_gap({"grep-heuristic": rows([["a.py"], ["a.py"]]), "GRPO": rows([["b.py"], ["a.py"]])})
    {'p_at_1_diff_heuristic': -0.5, 'p_at_1_diff_heuristic_lo': -1.0, 'p_at_1_diff_heuristic_hi': 0.0}
    """
    paired = _paired(results, policy, "grep-heuristic")
    return {} if paired is None else dict(zip(("p_at_1_diff_heuristic", "p_at_1_diff_heuristic_lo",
                                                "p_at_1_diff_heuristic_hi"), paired))


def headline(result: TrainingStage) -> dict[str, Any]:
    """Notebook 03's headline record (``Outputs.headline`` keywords; ``artifacts/headlines/03_training.json``)."""
    numbers = headline_numbers(result.evaluation, result.steps, result.run_dir, result.verdict)
    numbers.update(heuristic_gap(result.results))
    numbers.update(ranked_line_numbers(result.results, (*TRAINED_POLICIES, *ARMS)))
    numbers.update(expert_iteration_numbers(result.expert_iteration, result.results))
    numbers.update(train_check_numbers(result.train_check))
    numbers.update(kept_policy_numbers(result.train_check, result.results))
    numbers.update(result.ceiling_numbers)
    numbers.update({f"seconds_{phase}": s for phase, s in result.seconds.items()})  # this call's, cached ~0
    if result.mixes is not None:
        for _, row in result.mixes.iterrows():
            if row["policy"] != "bm25":
                numbers[f"data_ablation_p_at_1_{row['policy'].replace('+', '_')}"] = float(row["p_at_1"])
    for source, n in run_summary(result.run_dir)["demonstrations"].items():  # what the warm start learned from
        numbers[f"warm_start_demos_{source.replace('-', '_')}"] = int(n)
    numbers["recorded_demonstrations"] = int(result.conversion["demonstrations"])
    numbers["recorded_runs_excluded_eval"] = int(result.conversion["runs_excluded_eval"])
    fidelity = result.fidelity.set_index("tool").loc["all"]
    numbers["conversion_fidelity_recall"] = float(fidelity["recall"])
    numbers["conversion_fidelity_calls"] = int(fidelity["calls"])
    return {"numbers": numbers, "source": "run", "reasons": headline_reasons(numbers)}


demonstration_mix_ablation = data_ablation
""":func:`data_ablation` under a name :func:`run`'s ``data_ablation`` flag does not shadow."""


def expert_iteration_arm(cfg: dict[str, Any], run_dir: str | Path, artifacts: str | Path,
                         results: dict[str, list[dict[str, Any]]], limit: int | None = None) -> dict[str, Any]:
    """Expert iteration beside GRPO (:mod:`codegrep.rl.expert_iteration`): trains (or reuses) the arm's policy,
    evaluates it on the eval split's instances the GRPO policy ran (rows added to ``results`` under ``expert
    iteration``) and returns its summary. An arm that kept nothing is the warm start: its rows are the warm start's."""
    from codegrep.data.tasks import profile_tasks
    from codegrep.rl.expert_iteration import expert_iteration

    model, summary = expert_iteration(cfg, run_dir, artifacts, play=agent_rows)
    if not summary["kept"]:
        results[ARM] = list(results.get("warm start") or [])
        return summary
    tasks, resolver = profile_tasks(cfg, split="eval", limit=limit)
    out = evaluation_dir(cfg, run_dir, artifacts) / f"expert_iteration-{Path(model).parent.name}.jsonl"
    results[ARM] = agent_rows(cfg, model, tasks, resolver, out)
    return summary


EI_REFERENCES = (("GRPO", "grpo"), ("warm start", "warm_start"))
"""What the expert-iteration arm is paired with: the GRPO policy (same start, same rollout budget) and its start."""


def expert_iteration_numbers(summary: dict[str, Any] | None,
                             results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Headline keys of the expert-iteration arm besides its row's (``p_at_1_expert_iteration``, ``n_eval_...``:
    :func:`headline_numbers`); none when it did not run: what it sampled and kept, and its paired difference to the
    GRPO policy and to the warm start (``p_at_1_diff_ei_<ref>[_lo|_hi]``).

    >>> rows = lambda files: [{"instance_id": i, "ranked": f, "files": f, "gold": ["a.py"], "f0.5": 0.0,
    ...                        "rounds": 1, "tool_calls": 2, "tokens": 3, "extra": {}} for i, f in zip("xy", files)]
    >>> res = {"GRPO": rows([["b.py"], ["a.py"]]), "warm start": rows([["b.py"], ["b.py"]]),
    ...        "expert iteration": rows([["a.py"], ["a.py"]])}
    >>> n = expert_iteration_numbers({"episodes": 4, "successes": 2, "kept": 2}, res)
    >>> n["expert_iteration_kept"], n["p_at_1_diff_ei_grpo"], n["p_at_1_diff_ei_warm_start"]
    (2, 0.5, 1.0)
    >>> expert_iteration_numbers(None, res)
    {}
    """
    if summary is None or not results.get(ARM):
        return {}
    out: dict[str, Any] = {f"expert_iteration_{k}": int(summary[k]) for k in ("episodes", "successes", "kept")
                           if k in summary}
    for ref, key in EI_REFERENCES:
        paired = _paired(results, ARM, ref)
        if paired:
            out.update({f"p_at_1_diff_ei_{key}{s}": v for s, v in zip(("", "_lo", "_hi"), paired)})
    return out


def expert_iteration_note(summary: dict[str, Any] | None, results: dict[str, list[dict[str, Any]]],
                          evaluation: pd.DataFrame | None = None) -> str:
    """One paragraph on the expert-iteration arm, computed from its numbers and its ``evaluation`` row (or why it
    is absent)."""
    if summary is None:
        return "expert iteration skipped (train.expert_iteration = false)"
    n = expert_iteration_numbers(summary, results)
    text = (f"expert iteration: {summary['episodes']} episodes sampled from the warm start on {summary['tasks']} "
            f"TRAIN tasks at temperature {summary['temperature']}, {summary['successes']} with a gold file first, "
            f"{summary['kept']} kept; the policy is {summary['policy']}.")
    if evaluation is not None and ARM in set(evaluation["policy"]):
        row = evaluation.set_index("policy").loc[ARM]
        text += f" P@1 {row['p_at_1']:.3f} on {int(row['n'])} eval instances"
        for ref, key in EI_REFERENCES:
            if f"p_at_1_diff_ei_{key}" in n:
                text += (f"; minus {ref} {n[f'p_at_1_diff_ei_{key}']:+.3f} [paired 95% "
                         f"{n[f'p_at_1_diff_ei_{key}_lo']:+.3f}, {n[f'p_at_1_diff_ei_{key}_hi']:+.3f}]")
        text += "."
    return text
