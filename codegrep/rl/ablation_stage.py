"""Notebook 04's stage (where the efficiency signal enters), in the shape every notebook calls
(``codegrep.Stage``): ``run(cfg, out, train_config=None, level=0.90, study_result=None) -> AblationStage``,
``figures(result, out, *names)``, ``headline(result)``. The design and its functions: ``codegrep.rl.ablation``."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from codegrep.rl import ablation as ab
from codegrep.rl import ablation_figures as figs

NOTEBOOK = "04_ablation"
PARAM_RANGES = {"level": "0..1"}
"""Ranges of :func:`run`'s notebook parameters, checked before any notebook runs (``pipeline.notebook_params``)."""
STUDY_KEYS = ("n_paired_seeds", "n_uninformative_seeds", "kl_ratio_geomean", "kl_ratio_lo", "kl_ratio_hi",
              "kl_log_ratio_lo", "kl_log_ratio_hi", "wall_seconds", "commit")
"""Keys of the committed mechanism study recorded in the headline (prefixed ``study_``)."""


@dataclass
class AblationStage:
    """The reduced paired run on the profile (screen, arms, mechanism, endpoint, time) and the committed study."""

    args: Any
    """The ablation's ``TrainArgs`` (codegrep, grpo) on the profile."""
    level: float
    screen: dict[str, Any]
    runs: pd.DataFrame
    mechanism: pd.DataFrame
    similarity: pd.DataFrame
    curves: pd.DataFrame
    endpoints: pd.DataFrame
    timing: dict[str, float]
    study: dict[str, Any] | None

    @property
    def lam(self) -> float:
        return float(self.args.codegrep.lambda_grid[0])

    @property
    def main(self) -> dict[str, Any]:
        """The endpoint: the advantage arm against the reward arm at the first lambda."""
        e = self.endpoints
        return e[(e["arm"] == "advantage") & (e["lam"] == self.lam)].iloc[0].to_dict()

    def screen_sentence(self) -> str:
        s = self.screen
        return (f"screened {s['n_screened']} train tasks x {s['samples_per_task']} samples: "
                f"{s['screened_varied_share']:.0%} had reward variance; pool = {len(s['pool'])} tasks "
                f"({s['n_varied']} varied, {s['n_tied']} tied); probe set = {s['n_probe_sequences']} fixed sequences")

    def verdict_lines(self) -> str:
        m = self.main
        return (f"{m['verdict']}\nsign test p = {m['sign_test_p']:.3f}; paper reference: ratio "
                f"{ab.PAPER_KL_RATIO:.2f} (not a result of this run)")

    def mechanism_table(self) -> pd.DataFrame:
        return self.mechanism.groupby(["tied", "layer"])[["correctness_abs", "efficiency_abs",
                                                          "efficiency_share"]].mean().round(3)

    def study_lines(self) -> str:
        s = self.study
        if s is None:
            return "no committed study result: run `codegrep ablation study --resume --result docs/results/ablation_study.json`"
        return (f"{s['verdict_sentence']}\nmodel: {s['model']['kind']}; {s['wall_seconds'] / 60:.1f} min wall on "
                f"{s['cpu']['cores']} cores ({s['cpu']['model']}), commit {s['commit'][:10]}, {s['date']}")

    def step_summary(self) -> pd.DataFrame:
        return ab.step_summary(self.runs).round(4)

    def time_table(self) -> pd.DataFrame:
        return ab.time_table(self.timing).round(3)

    def study_table(self) -> pd.DataFrame | None:
        from codegrep.rl import study as st

        return st.seed_table(self.study).round(4) if self.study is not None else None

    def conclusion(self) -> str:
        return ab.conclusion(self.main, self.runs, self.study)


def plan(cfg: dict[str, Any], train_config: str | Path | None = None) -> str:
    """One line: the arms, seeds and steps the profile's ablation will run."""
    cg, _ = ab.ablation_arguments(cfg, train_config)
    return (f"profile {cfg['profile']}: arms {ab.arms(cg)} x seeds {cg.ablation_seeds}, "
            f"{cg.ablation_max_steps} steps each")


def run(cfg: dict[str, Any], out: Any, train_config: str | Path | None = None, level: float = 0.90,
        study_result: str | Path | None = None) -> AblationStage:
    """Pre-screen the pool, train (or reuse) every arm, then the exact mechanism, the paired curves and endpoint,
    the step time, and the committed study (``study_result``, when present); saves the per-step table."""
    from codegrep.artifacts import runs_dir
    from codegrep.rl import study as st

    args = ab.ablation_arguments(cfg, train_config)
    cg = args.codegrep
    lam = float(cg.lambda_grid[0])
    screen = ab.screen_pool(cfg, out.artifacts, train_config)
    runs = ab.run_ablation(cfg, out.artifacts, train_config)
    out.table(runs, "04_ablation_steps")
    groups = ab.recorded_groups(runs, screen, runs_dir(out.artifacts, cg.out) / "ablation")
    return AblationStage(args, level, screen, runs, ab.mechanism_frame(groups, lam, cg.format_weight),
                         ab.arm_similarity(groups, lam, cg.format_weight), ab.paired_curves(runs, level=level),
                         ab.endpoints(runs, level=level), ab.time_breakdown(runs),
                         st.load_result(study_result) if study_result else None)


FIGURES = {
    "mechanism": (lambda r: figs.mechanism_figure(r.mechanism, r.similarity, r.lam), "04_mechanism", None),
    "probe_kl": (lambda r: figs.probe_kl_figure(r.runs, r.curves, r.level), "04_probe_kl", None),
    "diagnostics": (lambda r: figs.diagnostics_figure(r.runs), "04_step_diagnostics", None),
    "time": (lambda r: figs.time_figure(r.timing), "04_step_time", None),
    "study": (lambda r: figs.study_figure(r.study), "04_study", None),
}
"""name -> (drawing function, saved file name, note stamped on the figure); ``study`` only with a study."""


def figures(result: AblationStage, out: Any, *names: str) -> dict[str, Any]:
    """Draw and save the named figures (all when none are named; the study's only when there is one)."""
    from codegrep.plots import draw

    return draw(FIGURES, result, out, names, absent=["study"] if result.study is None else [])


def headline(result: AblationStage) -> dict[str, Any]:
    """Notebook 04's headline record (``Outputs.headline`` keywords): the endpoint, the design's premise, the
    step time and the committed study; every empty number with its reason."""
    main, runs, screen, e = result.main, result.runs, result.screen, result.endpoints
    gated = e[(e["arm"] == "gated") & (e["lam"] == result.lam)]
    fin = ab.final_probe_kl(runs).groupby("layer")["kl_exact"].mean()
    numbers = {
        "kl_log_ratio_mean": main["kl_log_ratio_mean"], "kl_log_ratio_lo": main["kl_log_ratio_lo"],
        "kl_log_ratio_hi": main["kl_log_ratio_hi"], "n_paired_seeds": main["n_paired_seeds"],
        "sign_test_p": main["sign_test_p"], "verdict": main["verdict"], "interval_level": result.level,
        "lambda": result.lam, "kl_ratio": main["kl_ratio_geomean"], "kl_ratio_lo": main["kl_ratio_lo"],
        "kl_ratio_hi": main["kl_ratio_hi"], "paper_kl_ratio_reference": ab.PAPER_KL_RATIO,
        "tied_group_share": float(runs["tied_group_share"].mean()),
        "screened_varied_share": screen["screened_varied_share"], "pool_tasks": len(screen["pool"]),
        "steps_per_run": int(result.args.codegrep.ablation_max_steps),
        "reused_main_run": bool(runs["reused_main_run"].any()),
        **({"gated_kl_log_ratio_mean": gated.iloc[0]["kl_log_ratio_mean"], "gated_verdict": gated.iloc[0]["verdict"]}
           if len(gated) else {}),
        **{f"final_kl_exact_{k}": float(v) for k, v in fin.items()},
        **{f"step_{k}": v for k, v in result.timing.items()},
    }
    mixed, steps = ab.mixed_step_count(runs)
    numbers.update({"mixed_steps_reward_arm": mixed, "steps_reward_arm": steps})
    if result.study is not None:
        numbers.update({f"study_{k}": result.study[k] for k in STUDY_KEYS})
    why = (f"{main['n_paired_seeds']} seed(s) with positive exact probe KL in both arms: {main['verdict']}"
           if main["n_paired_seeds"] < 2 else "")
    reasons = {k: why or "undefined in this run" for k, v in numbers.items() if v is None or v != v}
    return {"numbers": numbers, "source": "run", "reasons": reasons}
