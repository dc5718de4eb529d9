"""Notebook stages 05 (precision threshold) and 06 (downstream table), all on the replay MODEL.

Each stage computes what it needs (traces, retriever results via the evaluation harness) and saves
its numbers through ``Outputs``; notebooks only call these and plot.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from codegrep.config import section
from codegrep.downstream.agents import DownstreamResult
from codegrep.downstream.replay import ReplayParams, Trace, measure_params
from codegrep.downstream.run import paired_compare, summarize
from codegrep.downstream.threshold import (cost_curve, crossing_point, precision_sweep, threshold_estimate,
                                           transfer_sweep)
from codegrep.downstream.traces import load_traces
from codegrep.paper import PAPER_REFERENCE

PAPER_PRECISIONS = {"BM25": PAPER_REFERENCE["precision.bm25"], "Jina": PAPER_REFERENCE["precision.jina"],
                    "CodeGrep": PAPER_REFERENCE["precision.codegrep"]}
"""The paper's retriever precisions (reference values, drawn as such)."""


@dataclass
class ReplaySetup:
    """The mined rollouts and the replay model's parameters for one profile."""

    traces: list[Trace]
    params: ReplayParams
    measured: ReplayParams
    """Parameters as measured, before config overrides."""

    def params_table(self) -> pd.DataFrame:
        stated = {"wrong_read_prob", "misleading_unresolve_prob"}
        return pd.DataFrame([{"parameter": k, "value": v, "measured_value": getattr(self.measured, k),
                              "origin": "stated in config" if k in stated else "measured from trajectories"}
                             for k, v in asdict(self.params).items()])


def replay_setup(cfg: dict[str, Any]) -> ReplaySetup:
    """Traces from the profile's ``downstream.replay`` sources and the model parameters."""
    rc = section(cfg, "downstream").get("replay") or {}
    traces = load_traces(rc)
    measured = measure_params(traces)
    return ReplaySetup(traces, measured.with_overrides(rc.get("params")), measured)


def retriever_names(cfg: dict[str, Any]) -> list[str]:
    """``downstream.retrievers`` or else ``retrievers.names``."""
    return list(section(cfg, "downstream").get("retrievers") or section(cfg, "retrievers").get("names") or [])


def retriever_results(cfg: dict[str, Any], out: Any) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """Each retriever's result rows from the evaluation harness, and a summary table.

    A retriever whose evaluation fails is left out, with the error in the summary (never hidden).
    """
    from codegrep.retrievers.evaluate import profile_evaluation

    results, summary = {}, []
    for name in retriever_names(cfg):
        try:
            df, s = profile_evaluation(cfg, name, out=out)
        except Exception as exc:  # noqa: BLE001 - reported in the table and on stderr
            print(f"downstream: retriever {name!r} could not be evaluated: {exc}", file=sys.stderr)
            summary.append({"retriever": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        results[name] = df
        summary.append({"retriever": name, "precision": s.get("precision"), "recall": s.get("recall"),
                        "mean_files": s.get("mean_files"), "n": s.get("n"), "error": None})
    trained = _trained_agent(cfg, out)
    if trained is not None and "agent" not in results:
        results["agent"], s = trained
        summary.append({"retriever": "agent", "precision": s["precision"], "recall": s["recall"],
                        "mean_files": s["mean_files"], "n": s["n"], "error": None})
    return results, pd.DataFrame(summary)


def _trained_agent(cfg: dict[str, Any], out: Any) -> tuple[pd.DataFrame, dict[str, float]] | None:
    """The GRPO-trained CodeGrep policy's held-out harness rows (notebook 03), as retriever ``agent``.

    Evaluating the agent costs model time, so it is not rerun here: notebook 03 evaluates the policy it
    trained, and this picks those rows up when they exist (None otherwise, e.g. 05 run alone)."""
    from codegrep.retrievers.evaluate import macro_metrics, read_rows
    from codegrep.rl.ablation import trained_policy_rows

    try:
        path = trained_policy_rows(cfg, Path(getattr(out, "artifacts", out)))
    except Exception as exc:  # noqa: BLE001 - e.g. a paper profile whose GRPO config cannot parse on CPU
        print(f"downstream: trained agent rows not located: {exc}", file=sys.stderr)
        return None
    if path is None:
        return None
    rows = list(read_rows(path).values())
    return pd.DataFrame(rows), macro_metrics(rows)


def _threshold_cfg(cfg: dict[str, Any]) -> dict[str, Any]:
    t = section(cfg, "downstream").get("threshold") or {}
    return {"grid": int(t.get("grid", 11)), "set_size": int(t.get("set_size", 3)), "draws": int(t.get("draws", 20)),
            "n_boot": int(t.get("n_boot", 500)), "seed": int(cfg.get("seed", 0))}


def threshold_stage(cfg: dict[str, Any], out: Any, setup: ReplaySetup) -> dict[str, Any]:
    """The controlled precision sweep, its curve and the crossing point with a bootstrap interval."""
    tc = _threshold_cfg(cfg)
    sweep = precision_sweep(setup.traces, setup.params, np.linspace(0, 1, tc["grid"]), tc["set_size"],
                            tc["draws"], tc["seed"])
    curve = cost_curve(sweep)
    est = {m: threshold_estimate(sweep, m, tc["n_boot"], seed=tc["seed"]) for m in ("tokens_change", "rounds_change")}
    result = {"source": "model", "settings": tc, "tokens": est["tokens_change"], "rounds": est["rounds_change"],
              "paper_threshold_reference": PAPER_REFERENCE["precision.threshold"], "n_traces": len(setup.traces)}
    out.table(sweep, "05_precision_sweep_model")
    out.table(curve, "05_precision_curve_model")
    out.json(result, "05_precision_threshold")
    return {"sweep": sweep, "curve": curve, **result}


def _per_instance(df: pd.DataFrame) -> tuple[list[DownstreamResult], list[DownstreamResult]]:
    """Recorded and hinted results per instance, hinted averaged over draws (resolved: majority)."""
    g = df.groupby("instance_id").agg(repo=("repo", "first"), resolved_base=("resolved_base", "first"),
                                      resolved=("resolved", "mean"), rounds_base=("rounds_base", "first"),
                                      rounds=("rounds", "mean"), tokens_base=("tokens_base", "first"),
                                      tokens=("tokens", "mean")).reset_index()
    mk = lambda r, res, rounds, tok, c: DownstreamResult(r.instance_id, "replay", res, rounds, tok, 0,  # noqa: E731
                                                         candidate_files=c, repo=r.repo)
    base = [mk(r, bool(r.resolved_base), int(r.rounds_base), int(r.tokens_base), None) for r in g.itertuples()]
    hint = [mk(r, bool(r.resolved >= 0.5), float(r.rounds), float(r.tokens), []) for r in g.itertuples()]
    return base, hint


def _compare_row(name: str, df: pd.DataFrame, seed: int) -> dict[str, Any]:
    base, hint = _per_instance(df)
    cmp, sb, sh = paired_compare(base, hint, seed=seed), summarize(base), summarize(hint)
    return {"retriever": name, "source": "replay model", "n": cmp["n_pairs"],
            "precision_on_mined": float(df["precision"].mean()), "recall_on_mined": float(df["recall"].mean()),
            "resolve_without": cmp["resolve_base"], "resolve_with": cmp["resolve_hint"],
            "mcnemar_p": cmp["mcnemar"]["p_value"], "rounds_without": sb["mean_rounds"], "rounds_with": sh["mean_rounds"],
            "rounds_change": cmp["rounds"]["change"], "rounds_change_low": cmp["rounds"]["low"],
            "rounds_change_high": cmp["rounds"]["high"], "tokens_resolved_without": sb["mean_tokens_resolved"],
            "tokens_resolved_with": sh["mean_tokens_resolved"], "tokens_resolved_change": cmp["tokens_resolved"]["change"],
            "tokens_resolved_change_low": cmp["tokens_resolved"]["low"],
            "tokens_resolved_change_high": cmp["tokens_resolved"]["high"]}


def paper_row() -> dict[str, Any]:
    """The paper's downstream numbers (OpenHands on SWE-bench Verified), as a reference row."""
    return {"retriever": "CodeGrep (paper)", "source": "paper (reference)", "n": PAPER_REFERENCE["downstream.n_instances"],
            "resolve_without": PAPER_REFERENCE["downstream.resolve_without"],
            "resolve_with": PAPER_REFERENCE["downstream.resolve_with"],
            "rounds_change": PAPER_REFERENCE["downstream.rounds_change"],
            "tokens_resolved_change": PAPER_REFERENCE["downstream.tokens_resolved_change"]}


def transfer_stage(cfg: dict[str, Any], out: Any, setup: ReplaySetup,
                   results: dict[str, pd.DataFrame], prefix: str) -> dict[str, Any]:
    """Real retrievers' precision/recall transferred to the mined rollouts: modelled cost per retriever."""
    draws = int((section(cfg, "downstream").get("table") or {}).get("draws", 10))
    seed = int(cfg.get("seed", 0))
    if not results:
        raise RuntimeError("no retriever could be evaluated: see the errors above")
    rows = transfer_sweep(setup.traces, setup.params, results, draws=draws, seed=seed)
    table = pd.DataFrame([_compare_row(n, rows[rows.retriever == n], seed) for n in results])
    per_repo = pd.DataFrame([{**_compare_row(n, g, seed), "repo": repo}
                             for (n, repo), g in rows.groupby(["retriever", "repo"])])
    out.table(rows, f"{prefix}_transfer_rows_model")
    out.table(table, f"{prefix}_downstream_table_model")
    out.table(per_repo, f"{prefix}_downstream_per_repo_model")
    return {"rows": rows, "table": table, "per_repo": per_repo}


def crossing_of(curve: pd.DataFrame, metric: str = "tokens_change") -> float:
    """Crossing point of a cost curve (re-exported for notebooks)."""
    return crossing_point(curve["precision"], curve[metric])


def _key(name: str) -> str:
    return name.replace("-", "_")


def threshold_headline(th: dict[str, Any], harness: pd.DataFrame, transfer: dict[str, Any],
                       validation: dict[str, float]) -> dict[str, Any]:
    """Notebook 05's headline numbers: ``threshold`` (+ interval, model), ``precision_<retriever>`` (harness)."""
    numbers = {"threshold": th["tokens"]["threshold"], "threshold_low": th["tokens"]["low"],
               "threshold_high": th["tokens"]["high"], "threshold_rounds": th["rounds"]["threshold"],
               "threshold_rounds_low": th["rounds"]["low"], "threshold_rounds_high": th["rounds"]["high"],
               "paper_threshold_reference": th["paper_threshold_reference"], "n_rollouts": th["n_traces"],
               "validation.prefix_search_share": validation["prefix_search_share"],
               "validation.read_cost_loo_error": validation["read_cost_loo_error"]}
    for r in harness.dropna(subset=["precision"]).itertuples():
        numbers[f"precision_{_key(r.retriever)}"] = float(r.precision)
    for r in transfer["table"].itertuples():
        numbers[f"{_key(r.retriever)}.tokens_resolved_change_model"] = r.tokens_resolved_change
    return numbers


def downstream_headline(cfg: dict[str, Any], transfer: dict[str, Any], n_rollouts: int) -> dict[str, Any]:
    """Notebook 06's headline numbers; the unprefixed keys are those of ``downstream.primary`` (the paper's
    CodeGrep = the ``agent`` retriever), when it was evaluated."""
    numbers: dict[str, Any] = {"n_rollouts": n_rollouts}
    keys = ("resolve_without", "resolve_with", "mcnemar_p", "rounds_change", "tokens_resolved_change")
    primary = section(cfg, "downstream").get("primary", "agent")
    for r in transfer["table"].to_dict("records"):
        numbers.update({f"{_key(r['retriever'])}.{k}": r[k] for k in keys})
        if r["retriever"] == primary:
            numbers.update({k: r[k] for k in keys} | {"primary_retriever": primary})
    return numbers
