"""The report's per-section tables that are not one-claim-per-row: the precision definitions side by side,
the downstream retrievers side by side (oracle, BM25, trained agent, the paper's CodeGrep as a reference), every
missing row with its real reason and the command that fills it, and figure captions that say what to read off.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codegrep.claims import PTS, Results, finite, fmt, with_interval
from codegrep.paper import PAPER_REFERENCE
from codegrep.files import atomic_write

RETRIEVERS = {
    "oracle": "the gold files (precision 1 at the gold set size): an upper bound, not a retriever",
    "bm25": "BM25 (bm25s) over the repository's files",
    "dense": "dense embedding retriever (paper: Jina; here MiniLM)",
    "grep-heuristic": "grep on the issue's identifiers (a baseline)",
    "random": "random files (a floor)",
    "agent": "the RL-trained retrieval agent of notebook 03",
}
"""Retrievers the report lists, with what each one is."""

PAPER_PRECISION = {"bm25": "precision.bm25", "dense": "precision.jina", "agent": "precision.codegrep"}
"""Which paper precision (a reference) sits beside which retriever."""


def _key(name: str) -> str:
    return name.replace("-", "_")


def configured_retrievers(run: dict[str, Any]) -> list[str] | None:
    """``downstream.retrievers`` or else ``retrievers.names`` of the run's resolved config (None: unknown)."""
    cfg = run.get("config") or {}
    names = (cfg.get("downstream") or {}).get("retrievers") or (cfg.get("retrievers") or {}).get("names")
    return list(names) if names else None


def agent_label(run: dict[str, Any]) -> str:
    """What the trained agent is in this run, e.g. ``'trained agent (smollm2, smoke profile)'``."""
    cfg = run.get("config") or {}
    model = (cfg.get("agent") or {}).get("model") or "?"
    model = "SmolLM2-135M" if str(model).lower().startswith("smollm2") else model
    return f"trained agent ({model}, {run.get('profile') or '?'} profile; not the paper's 14B CodeGrep)"


def missing_reason(name: str, res: Results, notebook: str) -> str:
    """Why a retriever has no row in this run, and the command that fills it."""
    profile = res.profile
    names = configured_retrievers(res.run)
    if name == "agent":
        return (f"notebook 03's evaluation rows of the trained agent are absent; fill: `codegrep reproduce --profile "
                f"{profile} --only 03,{notebook[:2]}`")
    if names is not None and name not in names:
        listed = ",".join(names + [name])
        return (f"left out by configs/{profile}.yaml `retrievers.names` ({', '.join(names)}); fill: `codegrep "
                f"reproduce --profile {profile} --only 05,06 --set retrievers.names=[{listed}]`")
    return f"{name} was configured but recorded nothing (its evaluation failed: see the executed notebook {notebook})"


def precision_table(res: Results) -> list[str]:
    """Every precision definition per retriever, labelled, with the paper's value beside the one it is set to."""
    nb = "05_precision_threshold"
    g = lambda k: res.num(nb, k)  # noqa: E731
    if nb not in res.headlines:
        return []
    k = ((res.run.get("config") or {}).get("downstream") or {}).get("threshold", {}) or {}
    lines = ["Precision, every definition side by side (measured on the same instances, 95% bootstrap intervals):",
             "", "- **P@1 (= Acc@1)**: the top-ranked file is a gold file. The paper does not state its definition; "
             "docs/retrievers.md sets the paper's retriever precisions beside P@1 because BM25's 0.375 is not "
             "reachable as P@3 on Verified (about 1.25 gold files per task). This is an inference, not a fact.",
             "- **P@3**: share of the top 3 files that are gold files.",
             "- **precision@agent**: each ranking cut at the trained agent's own set size on that instance (like for "
             "like with the agent).",
             f"- **set precision**: share of the hint's files that are gold files (the k = {k.get('set_size', '?')} "
             "files handed to the frozen agent): the precision the threshold bracket and its verdicts use.", "",
             "| retriever | P@1 (= Acc@1) | P@3 | precision@agent | set precision (bracket) | paper (reference) | n |",
             "|---|---|---|---|---|---|---|"]
    for name in RETRIEVERS:
        k_ = _key(name)
        p1 = with_interval(g(f"p_at_1_{k_}"), g(f"p_at_1_{k_}_lo"), g(f"p_at_1_{k_}_hi"))
        p3 = with_interval(g(f"p_at_3_{k_}"), g(f"p_at_3_{k_}_lo"), g(f"p_at_3_{k_}_hi"))
        pa = with_interval(g(f"precision_at_agent_size_{k_}"), g(f"precision_at_agent_size_{k_}_lo"),
                           g(f"precision_at_agent_size_{k_}_hi"))
        sp = with_interval(g(f"precision_{k_}"), g(f"precision_{k_}_lo"), g(f"precision_{k_}_hi"))
        paper = PAPER_REFERENCE.get(PAPER_PRECISION.get(name, ""), None)
        label = agent_label(res.run) if name == "agent" else name
        if not any(finite(g(x)) for x in (f"p_at_1_{k_}", f"precision_{k_}")):
            lines.append(f"| {label} | — ({missing_reason(name, res, nb)}) | | | | {fmt(paper)} | |")
            continue
        lines.append(f"| {label} | {p1} | {p3} | {pa} | {sp} | {fmt(paper)} | {fmt(g('n_instances'), '{:.0f}')} |")
    return lines + [""]


def downstream_table(res: Results) -> list[str]:
    """Oracle, BM25 and the trained agent side by side, the paper's CodeGrep as a reference row."""
    nb = "06_downstream_eval"
    if nb not in res.headlines:
        return []
    g = lambda k: res.num(nb, k)  # noqa: E731
    pct = "{:+.1%}"
    lines = ["Each retriever's own files replayed on the same real runs (95% cluster-bootstrap intervals over "
             "instances). Rounds and tokens: replay **MODEL** (optimistic bound) / observational **FIT** "
             "(pessimistic bound); resolve: **FIT** without → with, and its paired change. The paper's row is a "
             "reference from another agent (OpenHands) on all 500 instances: compare it with the direction of the "
             "oracle and BM25 rows, not with the trained agent's, which is far below the paper's precision.", "",
             "| retriever | what it is | set precision | rounds MODEL / FIT | tokens on resolved MODEL / FIT | "
             "resolve FIT without → with (paired change) | n |", "|---|---|---|---|---|---|---|"]
    for name in ("oracle", "bm25", "grep-heuristic", "dense", "agent"):
        k = _key(name)
        label = agent_label(res.run) if name == "agent" else name
        if not finite(g(f"{k}.precision")):
            if name in ("oracle", "bm25", "agent", "dense"):
                lines.append(f"| {label} | {RETRIEVERS[name]} | — ({missing_reason(name, res, nb)}) | | | | |")
            continue
        cell = lambda m: (with_interval(g(f"{k}.{m}"), g(f"{k}.{m}_lo"), g(f"{k}.{m}_hi"), pct) + " / " +  # noqa: E731
                          with_interval(g(f"{k}.{m}_observational"), g(f"{k}.{m}_observational_lo"),
                                        g(f"{k}.{m}_observational_hi"), pct))
        resolve = (f"{fmt(g(f'{k}.resolve_model_without'), '{:.1%}')} → {fmt(g(f'{k}.resolve_model_with'), '{:.1%}')}"
                   f" ({with_interval(g(f'{k}.resolve_change_observational'), g(f'{k}.resolve_change_observational_lo'), g(f'{k}.resolve_change_observational_hi'), PTS)})")
        n = g(f"{k}.n") if finite(g(f"{k}.n")) else g("n_instances")
        lines.append(f"| {label} | {RETRIEVERS[name]} | {with_interval(g(f'{k}.precision'), g(f'{k}.precision_lo'), g(f'{k}.precision_hi'))}"
                     f" | {cell('rounds_change')} | {cell('tokens_resolved_change')} | {resolve} | {fmt(n, '{:.0f}')} |")
    P = PAPER_REFERENCE
    lines.append(f"| *CodeGrep (paper, reference)* | OpenHands with CodeGrep's files, 500 Verified instances | "
                 f"{P['precision.codegrep']} | {P['downstream.rounds_change']:+.0%} | "
                 f"{P['downstream.tokens_resolved_change']:+.0%} | {P['downstream.resolve_without']:.1%} → "
                 f"{P['downstream.resolve_with']:.1%} | {P['downstream.n_instances']} |")
    return lines + [""]


CAPTIONS = {
    "01_mining_funnel": "How many real trajectories survive each mining stage: read the last bar (useful records: "
                        "resolved runs with at least one target file) against the first.",
    "01_mining_distributions": "Files viewed and edited per useful record, steps to the first view of a target "
                               "file and the share of reads spent on non-target files: the inputs of the replay "
                               "cost model.",
    "02_environment_acquisition": "Acquisition per rollout against group size G (log scale): read the vertical line "
                                  "(the profile's G): the default mode's distance below clone-per-rollout is the "
                                  "headline ratio.",
    "02_environment_latency_cdf": "Tool-call latency CDF, isolated and under full concurrency: read the p50 (0.5) "
                                  "and the tail (top right).",
    "02_environment_throughput": "Tool calls per second against concurrent rollouts (axis from 0): where the curve "
                                 "flattens the CPUs are saturated; failures are counted in the title.",
    "02_environment_disk": "Disk written per rollout by mode: what a pool of rollouts costs on disk.",
    "03_before_after": "Left: held-out P@1 of the agent at each training stage (blue) beside the baseline "
                       "retrievers (grey), with 95% bootstrap intervals. Right: each one's paired difference to BM25 "
                       "on the same instances: an interval wholly left of the dashed line is below BM25.",
    "03_training_curves": "GRPO per optimizer step on its train prompts: task reward, F0.5 of the submitted set, "
                          "rounds, generated tokens and KL to the initial policy. A step averages few rollouts: read "
                          "the trend, not a step-to-step move.",
    "03_wins_losses": "Instance by instance, the trained policy against BM25, by repository: wins (only the agent "
                      "right) against losses (only BM25 right) are what the paired difference counts; grey bars are "
                      "ties.",
    "03_data_ablation": "P@1 of warm starts trained on each demonstration mix with the same SFT budget, beside BM25 "
                        "(grey), with 95% bootstrap intervals: overlapping bars do not tell the mixes apart.",
    "04_mechanism": "(a) How large each efficiency layer makes the correctness and efficiency parts of the "
                    "advantage, in tied groups (one task reward for every rollout) and in groups with reward "
                    "variance. (b) Per recorded batch, the cosine between the two layers' advantages against its "
                    "share of tied groups: at cosine 1 both layers take the same Adam step.",
    "04_probe_kl": "(a) Exact KL to the initial policy on a fixed probe set, per arm; (b) the on-policy k3 "
                   "estimate; (c) the paired ratio advantage/reward per step with its interval: inside the grey band "
                   "is no difference, the dashed line is the paper's 'about a third' (reference).",
    "04_step_diagnostics": "Per GRPO step, both arms (mean, min-max over seeds): tied-group share, the advantage's "
                           "parts, update size, entropy, rounds, tokens, task reward. The arms coincide until a batch "
                           "mixes tied and varied groups.",
    "04_step_time": "Where a GRPO step's wall time goes on this machine: the longest bar is what a faster step must "
                    "cut.",
    "04_study": "(a) The powered mechanism study's paired probe-KL ratio per seed (dots: informative seeds, crosses: "
                "no mixed batch) with its 90% interval band, against 1 (no difference) and the paper's 1/3 "
                "(reference). (b) The share of tied groups per step, one line per seed.",
    "05_observational_effects": "FIT effects of one more wrong file (W) and of opening a target first (H) on what "
                                "happens after the window: an interval containing 0 is no evidence of an effect.",
    "05_validation_held_out_repos": "Held-out repositories: the FIT's error beside the no-skill baseline; a FIT bar "
                                    "not below the baseline means that outcome's fit has no held-out skill.",
    "05_precision_bracket": "Expected change against hint precision, MODEL (lower bound) and FIT (upper bound): read "
                            "where each crosses 0 (p*) against the grey paper interval, and on which side each "
                            "retriever's measured precision falls.",
    "06_cost_change_by_retriever": "Rounds and tokens change with each retriever's own files, MODEL and FIT: below "
                                   "0 the files help. The dotted line is the paper's CodeGrep (reference, another "
                                   "agent).",
    "06_resolve_by_retriever": "Left: resolve rate recorded and modelled without/with each retriever's files. "
                               "Right: the paired change (FIT) with its interval: an interval containing 0 means no "
                               "measurable effect.",
    "report_agent_vs_bm25": "Per instance, the trained agent against BM25 on the same held-out instances. Left: "
                            "top-1 hits paired; the off-diagonal cells are the instances where the two differ (what "
                            "the paired interval reads). Right: points above the diagonal are instances where the "
                            "agent ranked a gold file higher.",
}
"""What to read off each figure, by file name (every stage's ``FIGURES`` has one; tested)."""


def _rr(row: dict[str, Any]) -> float:
    """Reciprocal rank of the first gold file in the row's ranking (its returned files when it has none).

    >>> _rr({"ranked": ["a", "b"], "gold": ["b"]}), _rr({"files": ["c"], "gold": ["b"]})
    (0.5, 0.0)
    """
    ranked, gold = list(row.get("ranked") or row.get("files") or []), set(row.get("gold") or [])
    return next((1.0 / (i + 1) for i, f in enumerate(ranked) if f in gold), 0.0)


def _top1(row: dict[str, Any]) -> bool:
    ranked = list(row.get("ranked") or row.get("files") or [])
    return bool(ranked) and ranked[0] in set(row.get("gold") or [])


def agent_vs_bm25_rows(artifacts: Path) -> tuple[list[dict], list[dict], str] | None:
    """The trained agent's and BM25's harness rows on the same held-out instances, as notebook 03 wrote them
    (``<artifacts>/train/eval/<run>/GRPO.jsonl``, the run named in 03's headline first; BM25's beside it or in
    ``<artifacts>/eval/bm25.jsonl``, the harness's cache)."""
    base = Path(artifacts) / "train" / "eval"
    head = Path(artifacts) / "headlines" / "03_training.json"
    run = json.loads(head.read_text()).get("numbers", {}).get("run") if head.is_file() else None
    dirs = ([base / run] if run else []) + sorted(base.glob("*")) if base.is_dir() else []
    for d in dirs:
        bm25 = next((p for p in (d / "bm25.jsonl", Path(artifacts) / "eval" / "bm25.jsonl") if p.is_file()), None)
        if (d / "GRPO.jsonl").is_file() and bm25 is not None:
            a, b = _read(d / "GRPO.jsonl"), _read(bm25)
            shared = sorted(set(a) & set(b))
            return [a[i] for i in shared], [b[i] for i in shared], d.name
    return None


def _read(path: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                r = json.loads(line)
            except ValueError:  # a partial last row of a killed run
                continue
            if isinstance(r, dict) and "instance_id" in r:
                rows[r["instance_id"]] = r
    return rows


def agent_vs_bm25_figure(artifacts: Path, figures: Path) -> Path | None:
    """The report's per-instance figure: top-1 hits paired (2x2) and reciprocal rank per instance, agent vs BM25
    on the same instances. None when notebook 03's evaluation rows are absent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from codegrep import plots

    found = agent_vs_bm25_rows(artifacts)
    if found is None or not found[0]:
        return None
    a, b, run = found
    fig, (ax1, ax2) = plots.subplots(1, 2, width=9.5, height=3.8)
    plots.paired_hits(ax1, [_top1(r) for r in a], [_top1(r) for r in b], "agent", "BM25")
    plots.title(ax1, "Top-1 hit, paired: agent vs BM25", "real", len(a))
    plots.paired_scatter(ax2, [_rr(r) for r in a], [_rr(r) for r in b], "agent: 1 / rank of first gold file",
                         "BM25: 1 / rank of first gold file")
    ax2.legend(fontsize=7, loc="upper left")
    plots.title(ax2, "Reciprocal rank per instance (0 = no gold file ranked)", "real", len(a))
    fig.suptitle(f"Trained agent (run {run}) vs BM25 on the same held-out SWE-bench Verified instances (measured)",
                 fontsize=9)
    path = Path(figures) / "report_agent_vs_bm25.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fig.savefig(fh, format="png", dpi=120, bbox_inches="tight")
    with atomic_write(path.with_suffix(".svg")) as fh:
        fig.savefig(fh, format="svg", bbox_inches="tight")
    plt.close(fig)
    return path
