"""Notebook stages 05 (the precision-threshold bracket) and 06 (the downstream table).

Every cost number is labelled by where it comes from: ``model`` (the replay cost model over real runs),
``fit`` (the observational estimator fitted on real runs), ``run`` (measured: harness precision, recorded
verdicts). Each stage computes what it needs (traces, retriever results via the evaluation harness) and saves
its numbers through ``Outputs``; notebooks only call these and plot.
"""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from codegrep.config import section
from codegrep.downstream.observational import effects_table, pooled_validation, validate_by_repository
from codegrep.downstream.replay import ReplayParams, Trace, measure_params, validate_model
from codegrep.downstream.threshold import (Bracket, ThresholdConfig, bracket, bracket_verdict, retriever_outcomes,
                                           retriever_summary)
from codegrep.downstream.traces import gold_index, load_traces
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
    from codegrep.rl.training_stage import trained_policy_rows

    try:
        path = trained_policy_rows(cfg, Path(getattr(out, "artifacts", out)))
    except Exception as exc:  # noqa: BLE001 - e.g. a paper profile whose GRPO config cannot parse on CPU
        print(f"downstream: trained agent rows not located: {exc}", file=sys.stderr)
        return None
    if path is None:
        return None
    rows = list(read_rows(path).values())
    return pd.DataFrame(rows), macro_metrics(rows)


def threshold_config(cfg: dict[str, Any]) -> ThresholdConfig:
    """``downstream.threshold`` of the profile (unknown keys are an error naming them)."""
    return ThresholdConfig.from_section(section(cfg, "downstream").get("threshold"), seed=int(cfg.get("seed", 0)))


def paper_threshold_interval() -> list[float]:
    """The paper's threshold read right: Jina (0.445) is neutral and CodeGrep (0.677) pays, so the threshold
    lies in (0.445, 0.677] (reference values)."""
    return [PAPER_REFERENCE["precision.jina"], PAPER_REFERENCE["precision.codegrep"]]


def bracket_stage(cfg: dict[str, Any], out: Any, setup: ReplaySetup) -> dict[str, Any]:
    """Both curves with bands, both thresholds with intervals, the fitted effects and the held-out check."""
    tc = threshold_config(cfg)
    br = bracket(setup.traces, setup.params, tc)
    effects = effects_table(br.effects, br.boot_effects, tc.alpha)
    validation = validate_by_repository(br.feats, tc.min_repo_runs)
    out.table(br.curves, "05_bracket_curves")
    out.table(br.thresholds, "05_bracket_thresholds")
    out.table(effects, "05_observational_effects_fit")
    out.table(validation, "05_validation_held_out_repos_fit")
    out.table(br.feats, "05_run_features")
    result = {"settings": asdict(tc), "n_runs": len(br.feats), "n_instances_fit": int(br.feats.instance_id.nunique()),
              "thresholds": br.thresholds.to_dict("records"), "validation_pooled": pooled_validation(validation),
              "replay_checks": validate_model(setup.traces), "paper_threshold_interval": paper_threshold_interval()}
    out.json(result, "05_bracket")
    return {"bracket": br, "effects": effects, "validation": validation, **result}


def candidates_of(rows: pd.DataFrame) -> dict[str, list[str]]:
    """instance_id -> the files the retriever returned (its own output, in rank order)."""
    return {r["instance_id"]: list(r.get("files") or []) for r in rows.to_dict("records")}


def retriever_table(cfg: dict[str, Any], out: Any, setup: ReplaySetup, br: Bracket,
                    results: dict[str, pd.DataFrame], prefix: str) -> pd.DataFrame:
    """Per retriever: its own files on the very instances whose recorded runs are replayed (no transplant):
    replay (MODEL) and observational (FIT) changes with cluster-bootstrap intervals, and where its precision
    sits against the bracket."""
    if not results:
        raise RuntimeError("no retriever could be evaluated: see the errors above")
    tok = {m: br.threshold(m, "tokens")["threshold"] for m in ("replay", "observational")}
    verified = set(gold_index(["verified"]))
    rows = []
    for name, df in results.items():
        per_run = retriever_outcomes(setup.traces, br.feats, setup.params, candidates_of(df), seed=br.config.seed)
        s = retriever_summary(per_run, br, seed=br.config.seed)
        ids = set(per_run["instance_id"]) if len(per_run) else set()
        rows.append({"retriever": name, **s, "n_results": len(df),
                     "instance_source": "swebench_verified" if ids and ids <= verified else "other" if ids else "none",
                     "verdict_tokens": bracket_verdict(s.get("precision", float("nan")), tok["replay"],
                                                       tok["observational"])})
        if len(per_run):
            out.table(per_run, f"{prefix}_{_key(name)}_per_instance_model")
    table = pd.DataFrame(rows)
    out.table(table, f"{prefix}_downstream_table")
    return table


def retriever_comparison(results: dict[str, pd.DataFrame], out: Any, seed: int = 0) -> pd.DataFrame:
    """P@1/P@2/P@3 and precision at the agent's set size with intervals, on the instances every retriever shares
    (the harness's ``comparison_table``; measured)."""
    from codegrep.retrievers.evaluate import comparison_table

    reference = "bm25" if "bm25" in results else next(iter(results))
    table = comparison_table(results, reference=reference, seed=seed)
    out.table(table, "05_retriever_comparison")
    return table


def paper_row() -> dict[str, Any]:
    """The paper's downstream numbers (OpenHands on SWE-bench Verified), as a reference row."""
    return {"retriever": "CodeGrep (paper)", "source": "paper (reference)", "n": PAPER_REFERENCE["downstream.n_instances"],
            "resolve_model_without": PAPER_REFERENCE["downstream.resolve_without"],
            "resolve_model_with": PAPER_REFERENCE["downstream.resolve_with"],
            "rounds_change": PAPER_REFERENCE["downstream.rounds_change"],
            "tokens_resolved_change": PAPER_REFERENCE["downstream.tokens_resolved_change"]}


def _key(name: str) -> str:
    return name.replace("-", "_")


REPORTED_RETRIEVERS = ("bm25", "dense", "grep-heuristic", "agent")
"""Retrievers the paper compares (the report has a row for each): recorded, or empty with a reason."""


def threshold_headline(st: dict[str, Any], table: pd.DataFrame, comparison: pd.DataFrame | None) -> dict[str, Any]:
    """Notebook 05's headline numbers: both thresholds (tokens; rounds and resolve beside), the paper's
    interval, the held-out check, and each retriever's measured precision on the replayed instances."""
    br: Bracket = st["bracket"]
    numbers: dict[str, Any] = {"paper_threshold_interval": st["paper_threshold_interval"], "n_runs": st["n_runs"],
                               "n_instances_fit": st["n_instances_fit"]}
    for model in ("replay", "observational"):
        for metric in ("tokens", "rounds", "resolve"):
            t = br.threshold(model, metric)
            key = f"threshold_{model}" + ("" if metric == "tokens" else f"_{metric}")
            numbers |= {key: t["threshold"], f"{key}_lo": t["low"], f"{key}_hi": t["high"],
                        f"{key}_found_share": t["found_share"]}
    numbers |= {f"validation.{k}": v for k, v in st["validation_pooled"].items()}
    for r in table.to_dict("records"):
        k = _key(r["retriever"])
        numbers |= {f"precision_{k}": r.get("precision"), f"precision_{k}_lo": r.get("precision_lo"),
                    f"precision_{k}_hi": r.get("precision_hi"), f"verdict_{k}": r.get("verdict_tokens")}
    numbers["n_instances"] = int(table["n"].max()) if len(table) else 0
    for name in REPORTED_RETRIEVERS:  # the paper's compared retrievers: an empty cell says why
        k = _key(name)
        for key in (f"precision_{k}", f"precision_{k}_lo", f"precision_{k}_hi",
                    *(f"p_at_{j}_{k}{s}" for j in (1, 2, 3) for s in ("", "_lo", "_hi"))):
            numbers.setdefault(key, None)
    if comparison is not None and len(comparison):
        for r in comparison.to_dict("records"):
            k = _key(str(r.get("retriever")))
            for suffix in ("", "_lo", "_hi"):
                for j in (1, 2, 3):
                    if f"p@{j}{suffix}" in r:
                        numbers[f"p_at_{j}_{k}{suffix}"] = r[f"p@{j}{suffix}"]
                if f"precision@agent{suffix}" in r:
                    numbers[f"precision_at_agent_size_{k}{suffix}"] = r[f"precision@agent{suffix}"]
    return numbers


def downstream_headline(cfg: dict[str, Any], table: pd.DataFrame, st: dict[str, Any] | None = None) -> dict[str, Any]:
    """Notebook 06's headline numbers; the unprefixed keys are those of ``downstream.primary`` (the paper's
    CodeGrep = the ``agent`` retriever) when it was evaluated. ``rounds_change`` / ``tokens_resolved_change``
    are the replay MODEL's, ``*_observational`` the FIT's."""
    keys = ("rounds_change", "tokens_resolved_change", "rounds_change_observational",
            "tokens_resolved_change_observational", "resolve_recorded", "resolve_model_without", "resolve_model_with",
            "resolve_change_observational", "precision")
    used = table[table["n"] > 0] if len(table) else table
    numbers: dict[str, Any] = {"n_instances": int(used["n"].max()) if len(used) else 0,
                               "instance_source": ",".join(sorted(set(used.get("instance_source", [])))) or "none"}
    primary = section(cfg, "downstream").get("primary", "agent")
    for r in table.to_dict("records"):
        for k in keys:
            for suffix in ("", "_lo", "_hi"):
                if f"{k}{suffix}" in r:
                    numbers[f"{_key(r['retriever'])}.{k}{suffix}"] = r[f"{k}{suffix}"]
        numbers[f"{_key(r['retriever'])}.n"] = int(r.get("n") or 0)
        if r["retriever"] == primary and r.get("n"):
            numbers |= {f"{k}{x}": r[f"{k}{x}"] for k in keys for x in ("", "_lo", "_hi") if f"{k}{x}" in r}
            numbers["primary_retriever"] = primary
    for k in keys:
        numbers.setdefault(k, None)  # the primary retriever was not evaluated in this run: the reason says so
    if st is not None:
        br: Bracket = st["bracket"]
        for model in ("replay", "observational"):
            t = br.threshold(model, "tokens")
            numbers |= {f"threshold_{model}": t["threshold"], f"threshold_{model}_lo": t["low"],
                        f"threshold_{model}_hi": t["high"]}
    return numbers


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def headline_labels(numbers: dict[str, Any], evaluated: Any = (),
                    comparison: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """Per-key source (``model`` replay, ``fit`` observational, ``run`` measured, ``reference`` the paper) and a
    reason for every empty number (``evaluated``: retrievers that ran; ``comparison``: whether the harness's
    P@k table was available)."""
    evaluated = {_key(str(e)) for e in evaluated}
    sources, reasons = {}, {}
    for k, v in numbers.items():
        if "observational" in k or k.startswith("validation.") or "resolve_model" in k:
            sources[k] = "fit"
        elif k.startswith("threshold_replay") or "change" in k:
            sources[k] = "model"
        elif k.startswith("paper_"):
            sources[k] = "reference"
        else:
            sources[k] = "run"
        if not _is_missing(v):
            continue
        name = next((r for r in sorted(evaluated | {_key(x) for x in REPORTED_RETRIEVERS}, key=len, reverse=True)
                     if k.startswith((f"precision_{r}", f"verdict_{r}")) or (k.startswith("p_at_") and f"_{r}" in k)),
                    None)
        if k.startswith("precision_at_agent_size"):
            reasons[k] = ("precision at the agent's set size needs the agent retriever's submissions on the same "
                          "instances; the agent was not evaluated in this run" if "agent" not in evaluated else
                          "the agent submitted nothing on the shared instances")
        elif k.startswith("threshold_replay_resolve"):
            reasons[k] = "the replay model keeps every recorded verdict, so its resolve change is zero: no crossing"
        elif k.startswith("threshold_"):
            reasons[k] = "the curve (or every bootstrap replicate) does not cross zero on [0, 1]"
        elif name is not None and name not in evaluated:
            reasons[k] = (f"retriever {name!r} was not evaluated in this run (not in this profile's downstream.retrievers, "
                          "or, for the agent, notebook 03's evaluation rows are absent)")
        elif k.startswith("p_at_") and not comparison:
            reasons[k] = "the harness's P@k comparison table is not available in this checkout"
        elif k.startswith("p_at_"):
            reasons[k] = "the harness's comparison table has no value for this retriever"
        elif k in ("rounds_change", "tokens_resolved_change", "rounds_change_observational", "precision",
                   "tokens_resolved_change_observational", "resolve_recorded", "resolve_model_without",
                   "resolve_model_with", "resolve_change_observational"):
            reasons[k] = ("the primary retriever (downstream.primary) was not evaluated on an instance with a "
                          "recorded run in this run")
        elif "tokens_resolved" in k:
            reasons[k] = "no resolved run among the retriever's replayed instances"
        else:
            reasons[k] = "not defined on this run's instances (see the notebook)"
    return sources, reasons


def runs_summary(setup: ReplaySetup, window_cap: int) -> pd.DataFrame:
    """Per repository: the real runs the bracket is fitted on (measured)."""
    from codegrep.downstream.observational import run_features

    f = run_features(setup.traces, window_cap)
    g = f.groupby("repo").agg(runs=("instance_id", "size"), resolved=("resolved", "mean"),
                              median_rounds=("rounds", "median"), median_tokens=("tokens", "median"),
                              median_window=("window", "median"), share_W_positive=("W", lambda w: float((w > 0).mean())),
                              share_H=("H", "mean"))
    return g.sort_values("runs", ascending=False).reset_index()


def _fmt(t: dict[str, float]) -> str:
    return "none on [0, 1]" if t["threshold"] != t["threshold"] else f"{t['threshold']:.2f} [{t['low']:.2f}, {t['high']:.2f}]"


def bracket_conclusion(st: dict[str, Any], table: pd.DataFrame | None) -> str:
    """What this run says (computed, never typed in): the bracket, the paper's interval against it, the check."""
    br: Bracket = st["bracket"]
    lo, hi = br.threshold("replay", "tokens"), br.threshold("observational", "tokens")
    pa, pb = st["paper_threshold_interval"]
    lines = [f"Token threshold bracket on {st['n_runs']} real runs: replay MODEL p* = {_fmt(lo)} (lower bound), "
             f"observational FIT p* = {_fmt(hi)} (upper bound); 95% cluster-bootstrap intervals."]
    if lo["threshold"] == lo["threshold"] and hi["threshold"] == hi["threshold"]:
        a, b = lo["threshold"], hi["threshold"]
        if a > b:
            lines.append(f"The FIT's p* is BELOW the replay's ({b:.2f} < {a:.2f}): the bracket is inverted here, so "
                         "the argument that the fit bounds the threshold from above does not hold on these runs.")
        else:
            where = ("lies inside" if a <= pa and pb <= b else "overlaps" if a <= pb and pa <= b else "lies outside")
            lines.append(f"The paper's interval ({pa:.3f}, {pb:.3f}] {where} the bracket [{a:.2f}, {b:.2f}].")
    from codegrep.downstream.figures import fit_story, validation_caveat

    for metric in ("tokens", "rounds", "resolve"):
        if metric != "tokens":
            lines.append(f"{metric}: replay {_fmt(br.threshold('replay', metric))}, observational "
                         f"{_fmt(br.threshold('observational', metric))}.")
        if "effects" in st:
            lines.append(f"  What drives the {metric} FIT (fitted effects): {fit_story(st['effects'], metric)}.")
        caveat = validation_caveat(st.get("validation_pooled"), metric) if metric != "resolve" else ""
        if caveat:
            lines.append(f"  CAVEAT ({metric}): {caveat}; its threshold above is shown for completeness only.")
    v = st["validation_pooled"]
    if v:
        for o in ("rounds_after", "log_tokens_after"):
            if f"{o}.mae_model" in v:
                better = v[f"{o}.mae_model"] < v[f"{o}.mae_no_skill"]
                lines.append(f"Held-out repositories, {o.replace('_', ' ')}: FIT error {v[f'{o}.mae_model']:.3g} vs "
                             f"no-skill {v[f'{o}.mae_no_skill']:.3g} ({'beats' if better else 'does NOT beat'} the baseline; "
                             f"skill {v[f'{o}.skill']:+.1%}).")
    if table is not None and len(table):
        for r in table.to_dict("records"):
            if r.get("n"):
                lines.append(f"{r['retriever']}: precision {r['precision']:.2f} on {r['n']} replayed instances "
                             f"(measured) -> {r['verdict_tokens']}.")
    return "\n".join(lines)


def downstream_conclusion(table: pd.DataFrame, st: dict[str, Any]) -> str:
    """Notebook 06's verdict, computed from this run."""
    br: Bracket = st["bracket"]
    lo, hi = br.threshold("replay", "tokens")["threshold"], br.threshold("observational", "tokens")["threshold"]
    n = int(table["n"].max()) if len(table) else 0
    if n == 0:
        return ("No retriever output fell on an instance with a recorded run (the evaluation split shares no instance "
                "with the runs): there is nothing to replay, and no downstream number is reported.")
    lines = [f"{n} real SWE-bench Verified instances with a recorded run were replayed with each retriever's own files "
             f"(no transplant). Token bracket [{lo:.2f}, {hi:.2f}] (replay MODEL, observational FIT)."]
    for r in table.to_dict("records"):
        if not r.get("n"):
            continue
        lines.append(f"{r['retriever']} (precision {r['precision']:.2f}, n={r['n']}): tokens on resolved runs "
                     f"{r['tokens_resolved_change']:+.1%} [{r['tokens_resolved_change_lo']:+.1%}, "
                     f"{r['tokens_resolved_change_hi']:+.1%}] (MODEL) / {r['tokens_resolved_change_observational']:+.1%} "
                     f"[{r['tokens_resolved_change_observational_lo']:+.1%}, "
                     f"{r['tokens_resolved_change_observational_hi']:+.1%}] (FIT); resolve "
                     f"{100 * r['resolve_change_observational']:+.1f} points (FIT); {r['verdict_tokens']}.")
    if len(table) and table["n"].max() < 30:
        lines.append("Small sample: the intervals above are wide and the point values are not to be read alone.")
    return "\n".join(lines)
