"""The paper's claims, one row each, with the ONE rule that turns this run's numbers into a verdict.

A verdict is one of :data:`VERDICTS`. Every rule is a pure function of numbers (doctested here); the report's
summary table (``codegrep report``) and the README's headline table (``codegrep report --readme``) both call
:func:`summary_rows`, so the two can never disagree. Paper values are references (``codegrep.paper``).

Where the numbers come from (:class:`Results`): a run's ``headlines/*.json`` and ``run.json`` (an artifacts
directory, or a committed copy under ``docs/results/<profile>/``, see ``docs/results/README.md``), and the
studies run outside the pipeline, read from ``docs/results/`` with their provenance: ``verify_sympy_local.json``
(Docker-free verdicts), ``bench_mine_67k.json`` (67K mining speed), ``ablation_study.json`` (the paired-seed KL
ablation study).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from codegrep.paper import PAPER_REFERENCE

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED = "supported", "contradicted", "inconclusive", "not measured here"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED)
"""The four verdicts a summary row can carry."""

EXTERNAL = {"verify": "verify_sympy_local.json", "mine_67k": "bench_mine_67k.json",
            "ablation": "ablation_study.json"}
"""Studies computed outside the pipeline, as files under ``docs/results/``."""

MINING_BAR = 0.8
"""Mined targets count as usable supervision when precision and recall against gold files both reach this."""
MIN_GOLD_N = 30
"""Fewer gold-matched records than this: too small to judge mining quality."""
VERIFY_BAR = 0.5
"""Docker-free verification is supported when the Wilson 95% lower bound of the trusted share exceeds this."""


# ---------------------------------------------------------------------------------------------- pure rules
def finite(*xs: Any) -> bool:
    """All values are real finite numbers.

    >>> finite(1, 0.5), finite(None), finite(float("nan"))
    (True, False, False)
    """
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in xs)


def direction_verdict(lo: Any, hi: Any, want: str = "below", ref: float = 0.0) -> str:
    """A claimed direction against an interval: supported when the whole interval lies on the claimed side of
    ``ref``, contradicted when it lies wholly on the other side, inconclusive when it contains ``ref``.

    >>> direction_verdict(-0.3, -0.1), direction_verdict(0.1, 0.4), direction_verdict(-0.2, 0.3)
    ('supported', 'contradicted', 'inconclusive')
    >>> direction_verdict(0.05, 0.2, want="above"), direction_verdict(None, 0.2)
    ('supported', 'not measured here')
    """
    if not finite(lo, hi):
        return NOT_MEASURED
    below, above = hi < ref, lo > ref
    if not (below or above):
        return INCONCLUSIVE
    return SUPPORTED if (below if want == "below" else above) else CONTRADICTED


def bracket_verdict(lower: Any, upper: Any, paper_lo: float, paper_hi: float) -> str:
    """The paper's threshold interval against this run's bracket [lower (replay MODEL), upper (observational
    FIT)]: supported when the paper's interval overlaps the bracket, contradicted when it lies outside it,
    inconclusive when the bracket is inverted (the FIT below the MODEL: the bounding argument fails).

    >>> bracket_verdict(0.35, 0.83, 0.445, 0.677), bracket_verdict(0.70, 0.90, 0.445, 0.677)
    ('supported', 'contradicted')
    >>> bracket_verdict(0.8, 0.3, 0.445, 0.677), bracket_verdict(None, 0.8, 0.445, 0.677)
    ('inconclusive', 'not measured here')
    """
    if not finite(lower, upper):
        return NOT_MEASURED
    if lower > upper:
        return INCONCLUSIVE
    return SUPPORTED if lower <= paper_hi and paper_lo <= upper else CONTRADICTED


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a share ``k / n``.

    >>> [round(x, 3) for x in wilson(63, 75)]
    [0.741, 0.906]
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    den = 1 + z * z / n
    return ((centre - half) / den, (centre + half) / den)


def share_verdict(k: Any, n: Any, bar: float = VERIFY_BAR) -> str:
    """A share claimed to be high: supported when the Wilson 95% lower bound exceeds ``bar``, contradicted when
    the upper bound is below it, inconclusive otherwise.

    >>> share_verdict(63, 75), share_verdict(5, 75), share_verdict(3, 5), share_verdict(None, 75)
    ('supported', 'contradicted', 'inconclusive', 'not measured here')
    """
    if not finite(k, n) or n <= 0:
        return NOT_MEASURED
    lo, hi = wilson(int(k), int(n))
    return SUPPORTED if lo > bar else CONTRADICTED if hi < bar else INCONCLUSIVE


def reference_verdict(ref: float, intervals: dict[str, tuple[Any, Any]], definition_known: bool,
                      n: Any = None, min_n: int = MIN_GOLD_N) -> str:
    """A paper value against this run's intervals under the candidate definitions of the same quantity:
    supported when one interval contains it, contradicted when none does *and* the paper's definition is known;
    when it is not, a miss under every definition measured is inconclusive (it may be a definition difference).
    On fewer than ``min_n`` instances an interval wide enough to contain anything supports nothing: inconclusive.

    >>> reference_verdict(0.375, {"P@1": (0.465, 0.674), "P@3": (0.21, 0.28)}, False)
    'inconclusive'
    >>> reference_verdict(0.375, {"P@1": (0.30, 0.45)}, False), reference_verdict(0.375, {"P@1": (0.5, 0.6)}, True)
    ('supported', 'contradicted')
    >>> reference_verdict(0.375, {"P@1": (None, None)}, True), reference_verdict(0.375, {"P@1": (0.0, 0.8)}, False, 5)
    ('not measured here', 'inconclusive')
    """
    usable = [(lo, hi) for lo, hi in intervals.values() if finite(lo, hi)]
    if not usable:
        return NOT_MEASURED
    if finite(n) and n < min_n:
        return INCONCLUSIVE
    if any(lo <= ref <= hi for lo, hi in usable):
        return SUPPORTED
    return CONTRADICTED if definition_known else INCONCLUSIVE


def threshold_verdict(value: Any, target: Any, measured_wall: bool = True) -> str:
    """A measured time against a target: supported when it meets it, contradicted when it does not.

    >>> threshold_verdict(78.1, 120), threshold_verdict(130, 120), threshold_verdict(None, 120)
    ('supported', 'contradicted', 'not measured here')
    """
    if not finite(value, target):
        return NOT_MEASURED
    return SUPPORTED if value <= target else CONTRADICTED


def ablation_verdict(text: Any, paper_ratio: float = PAPER_REFERENCE["ablation.kl_ratio_advantage_over_reward"],
                     lo: Any = None, hi: Any = None) -> str:
    """Map the ablation's own verdict (``codegrep.rl.paired.verdict``, the one rule on the paired KL interval)
    onto the claim "the advantage layer drifts less (ratio ~ 1/3)": LESS is supported, MORE or "no difference"
    contradicted, anything else inconclusive or not measured. An interval that excludes the paper's ratio while
    saying LESS is still supported in direction (the sentence gives the interval).

    >>> ablation_verdict("advantage layer drifts LESS than reward layer: ..."), ablation_verdict("inconclusive: ...")
    ('supported', 'inconclusive')
    >>> ablation_verdict("no difference: ..."), ablation_verdict("undefined: ..."), ablation_verdict(None)
    ('contradicted', 'not measured here', 'not measured here')
    """
    if not isinstance(text, str) or not text:
        return NOT_MEASURED
    head = text.split(":")[0]
    if "LESS" in head:
        return SUPPORTED
    if "MORE" in head or head.startswith("no difference"):
        return CONTRADICTED
    if head.startswith("undefined"):
        return NOT_MEASURED
    return INCONCLUSIVE


def quality_verdict(precision: Any, recall: Any, n: Any, bar: float = MINING_BAR, min_n: int = MIN_GOLD_N) -> str:
    """Mined targets against gold files: supported when precision and recall both reach ``bar`` on at least
    ``min_n`` records, contradicted when either is below it on that many, inconclusive on fewer.

    >>> quality_verdict(0.94, 0.95, 303), quality_verdict(0.5, 0.95, 303), quality_verdict(1.0, 1.0, 11)
    ('supported', 'contradicted', 'inconclusive')
    """
    if not finite(precision, recall, n):
        return NOT_MEASURED
    if n < min_n:
        return INCONCLUSIVE
    return SUPPORTED if precision >= bar and recall >= bar else CONTRADICTED


# ---------------------------------------------------------------------------------------------- the numbers
def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class Results:
    """The numbers one summary is built from: a run's headlines and run record, and the external studies."""

    headlines: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Headline record per notebook (``numbers``, ``reasons``, ``sources``)."""
    run: dict[str, Any] = field(default_factory=dict)
    """The run's ``run.json`` (profile, git_commit, finished_at, ...)."""
    external: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Study name (keys of :data:`EXTERNAL`) -> its JSON, as committed."""
    external_dir: str = "docs/results"
    """Where the external studies were read from (shown as their provenance)."""

    @classmethod
    def load(cls, run_dir: Path, external_dir: Path | None = None) -> "Results":
        """Read ``<run_dir>/headlines/*.json`` and ``<run_dir>/run.json``; the studies from ``external_dir``
        (default: the project's ``docs/results``)."""
        from codegrep.config import project_root

        run_dir = Path(run_dir)
        heads = {p.stem: d for p in sorted((run_dir / "headlines").glob("*.json")) if (d := _load(p))}
        ext_dir = Path(external_dir) if external_dir is not None else project_root() / "docs" / "results"
        ext = {k: d for k, name in EXTERNAL.items() if (d := _load(ext_dir / name))}
        try:
            shown = ext_dir.resolve().relative_to(project_root().resolve()).as_posix()
        except ValueError:
            shown = str(ext_dir)
        run = _load(run_dir / "run.json") or {}
        if not run.get("profile") and (run_dir / "profile.yaml").is_file():  # mid-pipeline: run.json comes last
            import yaml

            run = {"profile": (yaml.safe_load((run_dir / "profile.yaml").read_text()) or {}).get("profile")}
        return cls(heads, run, ext, shown)

    def num(self, notebook: str, key: str) -> Any:
        return ((self.headlines.get(notebook) or {}).get("numbers") or {}).get(key)

    def reason(self, notebook: str, key: str) -> str | None:
        head = self.headlines.get(notebook)
        if head is None:
            return f"notebook {notebook} did not run"
        return (head.get("reasons") or {}).get(key)

    @property
    def profile(self) -> str:
        return str(self.run.get("profile") or "?")

    def run_label(self) -> str:
        """``'ci run, commit abc1234, 2026-12-01'``."""
        return (f"{self.profile} run, commit {str(self.run.get('git_commit') or '?')[:7]}, "
                f"{str(self.run.get('finished_at') or '?')[:10]}")

    def study_label(self, name: str) -> str:
        d = self.external.get(name) or {}
        commit = d.get("git_commit") or d.get("commit")
        date = str(d.get("measured_at") or d.get("updated") or d.get("finished_at") or d.get("date")
                   or "date not recorded")[:10]
        return (f"{self.external_dir}/{EXTERNAL[name]}, " + (f"commit {str(commit)[:7]}" if commit else
                                                            "commit not recorded") + f", {date}")


# ---------------------------------------------------------------------------------------------- formatting
PTS = "pts"
"""Format spec of a change in a rate, printed in percentage points."""


def fmt(value: Any, spec: str = "{:.3f}") -> str:
    """A number for a table cell ("n/a" when absent).

    >>> fmt(0.5), fmt(None), fmt(-0.15, "{:+.1%}"), fmt(0.012, PTS)
    ('0.500', 'n/a', '-15.0%', '+1.2 pts')
    """
    if not finite(value):
        return "n/a" if value is None or isinstance(value, float) else str(value)
    if spec == PTS:
        return f"{100 * value:+.1f} pts"
    return spec.format(value)


def with_interval(v: Any, lo: Any, hi: Any, spec: str = "{:.3f}") -> str:
    """``'0.570 [0.465, 0.674]'`` (the interval only when both ends are there).

    >>> with_interval(0.57, 0.465, 0.674), with_interval(0.57, None, 0.6)
    ('0.570 [0.465, 0.674]', '0.570')
    """
    text = fmt(v, spec)
    return text + (f" [{fmt(lo, spec)}, {fmt(hi, spec)}]" if finite(v, lo, hi) else "")


def count(n: Any, unit: str) -> str:
    """``'86 instances'``; ``'n/a'`` when unknown.

    >>> count(86, "instances"), count(None, "runs")
    ('86 instances', 'n/a')
    """
    return f"{int(n):,} {unit}" if finite(n) else "n/a"


# ---------------------------------------------------------------------------------------------- the claims
@dataclass(frozen=True)
class Row:
    """One summary row."""

    claim: str
    paper: str
    """The paper's value, a reference (or what the bundle's target is, said as such)."""
    value: str
    """This run's value with its interval."""
    n: str
    kind: str
    """measured / MODEL / FIT / SIMULATION (a mix is listed)."""
    verdict: str
    why: str
    """One sentence: why this verdict, and for 'not measured here' the reason and the command that fills it."""
    source: str
    """Which run or committed study the value comes from."""


SCALE_NOTE = {"ci": "at ci scale (a plumbing check)", "smoke": "at smoke scale (SmolLM2-135M trained minutes on CPU)"}


def _scale(res: Results) -> str:
    return SCALE_NOTE.get(res.profile, f"on profile {res.profile}")


def _mining(res: Results) -> Row:
    p, r, n = (res.num("01_mining", k) for k in ("gold_precision", "gold_recall", "gold_n"))
    t, u = res.num("01_mining", "trajectories"), res.num("01_mining", "useful_records")
    v = quality_verdict(p, r, n)
    why = {SUPPORTED: f"mined targets match gold files (precision and recall both ≥ {MINING_BAR}).",
           CONTRADICTED: f"mined targets miss the gold files (precision or recall < {MINING_BAR}).",
           INCONCLUSIVE: f"fewer than {MIN_GOLD_N} gold-matched records: too few to judge; the smoke profile mines "
                         "the 400 shipped runs (`codegrep reproduce --profile smoke --only 01`).",
           NOT_MEASURED: res.reason("01_mining", "gold_precision") or "no gold comparison recorded."}[v]
    return Row("CATM mines file-access supervision from real trajectories", fmt(
        PAPER_REFERENCE["mining.n_trajectories"], "{:,.0f}") + " trajectories mined",
        f"{fmt(t, '{:,.0f}')} mined, {fmt(u, '{:,.0f}')} useful; vs gold P {fmt(p)} / R {fmt(r)}",
        count(n, "gold-matched records"), "measured", v, why, res.run_label())


def _environment(res: Results) -> Row:
    g = lambda k: res.num("02_environment", k)  # noqa: E731
    ratio, files, fail, leak = g("clone_per_rollout_vs_default"), g("bench_repo_files"), g("failures"), g("leaked_worktrees")
    if not finite(ratio):
        v, why = NOT_MEASURED, res.reason("02_environment", "clone_per_rollout_vs_default") or "not recorded."
    elif ratio > 1 and fail == 0 and leak == 0:
        v, why = SUPPORTED, (f"acquisition per rollout is {ratio:,.1f}x cheaper than clone-per-rollout on a "
                             f"{fmt(files, '{:,.0f}')}-file repository, with no failure or leaked worktree under load "
                             "(medians; no interval: a ratio of medians).")
    elif ratio <= 1:
        v, why = CONTRADICTED, f"the default mode is not cheaper than clone-per-rollout ({ratio:.2f}x)."
    else:
        v, why = INCONCLUSIVE, f"cheaper ({ratio:.1f}x) but {fail} failures / {leak} leaked worktrees under load."
    return Row("Docker-free environment: rollouts acquire a repository far cheaper than clone-per-rollout",
               "much cheaper (no number)",
               f"{fmt(ratio, '{:,.1f}')}x; tool p50 {fmt(g('tool_p50_ms'), '{:.1f}')} ms; "
               f"{fmt(g('concurrent_rollouts'), '{:.0f}')}-way load: {fmt(fail, '{:.0f}')} failures"
               if finite(ratio) else "n/a",  # not 'n/ax; tool p50 n/a ms; n/a-way load: n/a failures'
               count(g("n_cold_samples"), "cold samples per mode") if finite(g("n_cold_samples")) else
               count(files, "files in the bench repository"), "measured", v, why, res.run_label())


def _precision(res: Results) -> Row:
    g = lambda k: res.num("05_precision_threshold", k)  # noqa: E731
    ref = PAPER_REFERENCE["precision.bm25"]
    p1 = (g("p_at_1_bm25_lo"), g("p_at_1_bm25_hi"))
    p3 = (g("p_at_3_bm25_lo"), g("p_at_3_bm25_hi"))
    n = g("n_instances")
    v = reference_verdict(ref, {"P@1": p1, "P@3": p3}, definition_known=False, n=n)
    why = {SUPPORTED: f"the paper's BM25 {ref} lies inside this run's interval under P@1 or P@3.",
           INCONCLUSIVE: (f"only {n} instances: too few for an interval to support anything." if finite(n) and
                          n < MIN_GOLD_N else
                          f"the paper's BM25 {ref} lies outside both P@1 and P@3 intervals; the paper does not state "
                          "its precision definition (docs/retrievers.md argues for P@1), so this may be a definition "
                          "difference, and the instances and BM25 implementation differ."),
           CONTRADICTED: "",
           NOT_MEASURED: res.reason("05_precision_threshold", "p_at_1_bm25") or "BM25 was not evaluated."}[v]
    return Row("Retriever precision on SWE-bench Verified (BM25)", f"BM25 {ref} (definition not stated)",
               f"P@1 {with_interval(g('p_at_1_bm25'), *p1)}; P@3 {with_interval(g('p_at_3_bm25'), *p3)}",
               count(g("n_instances"), "instances"), "measured", v, why, res.run_label())


def _agent(res: Results) -> Row:
    g = lambda k: res.num("03_training", k)  # noqa: E731
    d, lo, hi = g("p_at_1_diff"), g("p_at_1_diff_lo"), g("p_at_1_diff_hi")
    v = direction_verdict(lo, hi, want="above")
    why = {SUPPORTED: f"the trained agent is above BM25 on P@1 (paired interval above 0), {_scale(res)}.",
           CONTRADICTED: f"the trained agent is BELOW BM25 on P@1 (paired interval below 0) {_scale(res)}, not "
                         "with the paper's 14B model; `codegrep reproduce --profile paper` tests the claim.",
           INCONCLUSIVE: f"the paired interval contains 0 {_scale(res)}.",
           NOT_MEASURED: res.reason("03_training", "p_at_1_diff") or "notebook 03 did not evaluate the agent."}[v]
    return Row("The RL-trained agent retrieves better than BM25",
               f"{PAPER_REFERENCE['precision.codegrep']} vs {PAPER_REFERENCE['precision.bm25']}",
               f"P@1 {fmt(g('p_at_1_agent'))} vs {fmt(g('p_at_1_bm25'))}; paired diff "
               f"{with_interval(d, lo, hi, '{:+.3f}')}", count(g("n_eval_instances"), "instances"), "measured",
               v, why, res.run_label())


def _agent_goal(res: Results) -> Row:
    """The bundle's own bar for the trained agent (issue 27, not a paper claim): P@1 at least the grep heuristic's."""
    g = lambda k: res.num("03_training", k)  # noqa: E731
    d, lo, hi = g("p_at_1_diff_heuristic"), g("p_at_1_diff_heuristic_lo"), g("p_at_1_diff_heuristic_hi")
    v = direction_verdict(lo, hi, want="above") if finite(d) else NOT_MEASURED
    if v == INCONCLUSIVE and finite(d) and d >= 0:
        v = SUPPORTED  # the bar is "at least": a point estimate at or above it with an interval holding 0 meets it
    gap = f"{-d:.3f}" if finite(d) else "n/a"
    separated = finite(lo) and lo > 0
    why = {SUPPORTED: (f"the trained agent's P@1 is above the grep heuristic's (paired interval above 0) {_scale(res)}."
                       if separated else
                       f"the point estimate meets the bar (at least the grep heuristic's), but the paired interval "
                       f"contains 0: this run does not tell the two apart {_scale(res)}."),
           CONTRADICTED: f"the trained agent's P@1 is BELOW the grep heuristic's by {gap} (paired interval below "
                         f"0) {_scale(res)}; what bounds it: README, 'Status of the agent'.",
           INCONCLUSIVE: f"the point estimate is below the grep heuristic's by {gap}, but the "
                         f"paired interval contains 0 {_scale(res)}.",
           NOT_MEASURED: res.reason("03_training", "p_at_1_diff_heuristic") or
                         "notebook 03 did not record the agent's paired difference to the grep heuristic (runs "
                         "before the key existed; P@1 of both is in the value): rerun notebook 03 to fill it."}[v]
    return Row("(bundle goal, issue 27; not a paper claim) the trained agent reaches the grep heuristic's P@1",
               "— (the paper compares with BM25)",
               f"P@1 {fmt(g('p_at_1_agent'))} vs {fmt(g('p_at_1_grep_heuristic'))}; paired diff "
               f"{with_interval(d, lo, hi, '{:+.3f}')}", count(g("n_eval_instances"), "instances"), "measured",
               v, why, res.run_label())


def _ablation(res: Results) -> list[Row]:
    paper = f"ratio ≈ {PAPER_REFERENCE['ablation.kl_ratio_advantage_over_reward']:.2f}"
    g = lambda k: res.num("04_ablation", k)  # noqa: E731
    rows = []
    text = g("verdict")
    v = ablation_verdict(text)
    tied = g("tied_group_share")
    if finite(tied) and tied in (0, 1) and v != NOT_MEASURED:  # the design's premise failed: nothing to tell apart
        v, text = INCONCLUSIVE, (f"the batches never mixed tied and varied groups (tied share {tied:.0%}), so the "
                                 f"two layers cannot differ by design; the ablation's own verdict was: {text}")
    if isinstance(text, str) and text.lower().startswith(f"{v}: "):  # "inconclusive: inconclusive: ..." read twice
        text = text[len(v) + 2:]
    rows.append(Row("Efficiency signal at the advantage layer drifts less (probe KL) than at the reward layer",
                    paper, f"ratio {with_interval(g('kl_ratio'), g('kl_ratio_lo'), g('kl_ratio_hi'), '{:.2f}')} (90%)",
                    count(g("n_paired_seeds"), "paired seeds"), "measured", v,
                    (text if isinstance(text, str) else res.reason("04_ablation", "verdict") or "no verdict recorded")
                    + ("" if v == NOT_MEASURED else f" (the pipeline's reduced design {_scale(res)}, a SMALL sample "
                       "whatever its verdict; the study row below is powered)"), res.run_label()))
    study = res.external.get("ablation")
    if study is None:
        rows.append(Row("… the same, powered study (paired seeds, outside the pipeline)", paper, "n/a", "n/a",
                        "measured", NOT_MEASURED, f"no {res.external_dir}/{EXTERNAL['ablation']} committed yet: it "
                        "is produced by the paired-seed ablation study, `codegrep ablation study --config "
                        "configs/train/mechanism.yaml --seeds 10 --result docs/results/ablation_study.json`", "—"))
    else:
        lo, hi = study.get("kl_log_ratio_lo"), study.get("kl_log_ratio_hi")
        ratio = with_interval(math.exp((lo + hi) / 2), math.exp(lo), math.exp(hi), "{:.2f}") if finite(lo, hi) else "n/a"
        model = study.get("model")
        kind = model.get("kind") if isinstance(model, dict) else model
        size = f", {model['parameters'] / 1e6:.1f}M weights" if isinstance(model, dict) and model.get("parameters") else ""
        rows.append(Row("… the same, powered study (paired seeds, outside the pipeline)", paper,
                        f"ratio {ratio} (geometric mid-interval; 90%)" + (f"; model: {kind}{size}" if kind else ""),
                        count(study.get("n_paired_seeds"), "paired seeds"), "measured",
                        ablation_verdict(study.get("verdict")),
                        str(study.get("verdict_sentence") or study.get("verdict") or "no verdict in the file")
                        + (" A MECHANISM study on a small stand-in policy: it shows how each layer's advantages move a "
                           "policy under Adam, not the paper's model's drift." if kind and "not SmolLM2" in str(kind)
                           else ""),
                        res.study_label("ablation")))
    return rows


def _threshold(res: Results) -> Row:
    g = lambda k: res.num("05_precision_threshold", k)  # noqa: E731
    lo_t, hi_t = g("threshold_replay"), g("threshold_observational")
    pa, pb = PAPER_REFERENCE["precision.threshold_interval"]
    v = bracket_verdict(lo_t, hi_t, pa, pb)
    why = {SUPPORTED: f"the paper's interval ({pa}, {pb}] overlaps this run's bracket.",
           CONTRADICTED: f"the paper's interval ({pa}, {pb}] lies outside this run's bracket.",
           INCONCLUSIVE: "the bracket is inverted (FIT below MODEL): it bounds nothing on these runs.",
           NOT_MEASURED: res.reason("05_precision_threshold", "threshold_replay" if not finite(lo_t) else
                                    "threshold_observational") or "no crossing recorded."}[v]
    mm, mn = g("validation.rounds_after.mae_model"), g("validation.rounds_after.mae_no_skill")
    if finite(mm, mn) and mm >= mn:
        why += (f" The rounds fit does NOT beat a no-skill baseline on held-out repositories ({mm:.2f} vs "
                f"{mn:.2f}), so its rounds threshold is not evidence.")
    return Row("A precision threshold: retrieval pays only above it (tokens)", f"({pa}, {pb}]",
               f"bracket {with_interval(lo_t, g('threshold_replay_lo'), g('threshold_replay_hi'), '{:.2f}')} (MODEL) "
               f"→ {with_interval(hi_t, g('threshold_observational_lo'), g('threshold_observational_hi'), '{:.2f}')} (FIT)",
               count(g("n_runs"), "real runs"), "MODEL + FIT", v, why, res.run_label())


DOWNSTREAM = (("rounds", "rounds_change", "downstream.rounds_change", "{:+.0%}"),
              ("tokens on resolved", "tokens_resolved_change", "downstream.tokens_resolved_change", "{:+.0%}"))
"""The downstream cost claims: label, headline key, paper key, format."""


def downstream_cells(res: Results, key: str, retrievers: tuple[str, ...] = ("oracle", "bm25", "agent")) -> str:
    """``'oracle -15.6% [..] / -23.2% [..]; bm25 ...'``: MODEL / FIT per retriever (n/a when absent)."""
    g = lambda k: res.num("06_downstream_eval", k)  # noqa: E731
    parts = []
    for r in retrievers:
        m = with_interval(g(f"{r}.{key}"), g(f"{r}.{key}_lo"), g(f"{r}.{key}_hi"), "{:+.1%}")
        f = with_interval(g(f"{r}.{key}_observational"), g(f"{r}.{key}_observational_lo"),
                          g(f"{r}.{key}_observational_hi"), "{:+.1%}")
        parts.append(f"{r} {m} (MODEL) / {f} (FIT)")
    return "; ".join(parts)


def _stand_in(res: Results) -> tuple[bool, str]:
    """Whether this run's primary retriever (the trained agent) stands for the paper's CodeGrep: its precision
    interval must reach the paper's CodeGrep precision."""
    g = lambda k: res.num("06_downstream_eval", k)  # noqa: E731
    p, hi = g("agent.precision"), g("agent.precision_hi")
    ref = PAPER_REFERENCE["precision.codegrep"]
    if not finite(p):
        return False, ("the trained agent was not evaluated on the replayed instances in this run (notebook 03's "
                       "evaluation rows are absent)")
    top = hi if finite(hi) else p
    if top < ref:
        return False, (f"this run's agent (precision {p:.3f}, upper bound {top:.3f}) is far below the paper's CodeGrep "
                       f"({ref}), so its downstream numbers do not test the paper's system; the oracle (precision 1) "
                       "and BM25 rows show what files do at either end. `codegrep reproduce --profile paper` (14B "
                       "agent) and `codegrep downstream --hint-precision ...` (a real agent) fill it")
    return True, ""


def _downstream(res: Results) -> list[Row]:
    g = lambda k: res.num("06_downstream_eval", k)  # noqa: E731
    ok, reason = _stand_in(res)
    n = count(g("agent.n") if finite(g("agent.n")) else g("n_instances"), "instances")
    rows = []
    for label, key, pkey, pfmt in DOWNSTREAM:
        if not ok:
            v, why = NOT_MEASURED, reason + "."
        else:  # the FIT is the pessimistic bound, the MODEL the optimistic one (notebook 05)
            fit_hi, model_lo = g(f"agent.{key}_observational_hi"), g(f"agent.{key}_lo")
            v = (SUPPORTED if finite(fit_hi) and fit_hi < 0 else CONTRADICTED if finite(model_lo) and model_lo > 0
                 else INCONCLUSIVE)
            why = {SUPPORTED: "even the pessimistic FIT's interval lies below 0.",
                   CONTRADICTED: "even the optimistic MODEL's interval lies above 0.",
                   INCONCLUSIVE: "the MODEL and FIT intervals do not agree on a reduction."}[v]
        rows.append(Row(f"Downstream: CodeGrep's files cut a frozen agent's {label}",
                        f"{fmt(PAPER_REFERENCE[pkey], pfmt)} (CodeGrep, OpenHands, 500)", downstream_cells(res, key),
                        n, "MODEL + FIT", v, why, res.run_label()))
    lo, hi = g("agent.resolve_change_observational_lo"), g("agent.resolve_change_observational_hi")
    rv = direction_verdict(lo, hi, want="above") if ok else NOT_MEASURED
    resolve = "; ".join(f"{r} {fmt(g(f'{r}.resolve_model_without'), '{:.1%}')} → "
                        f"{fmt(g(f'{r}.resolve_model_with'), '{:.1%}')} (change "
                        f"{with_interval(g(f'{r}.resolve_change_observational'), g(f'{r}.resolve_change_observational_lo'), g(f'{r}.resolve_change_observational_hi'), PTS)})"
                        for r in ("oracle", "bm25", "agent"))
    rows.append(Row("Downstream: CodeGrep's files raise the resolve rate",
                    f"{PAPER_REFERENCE['downstream.resolve_without']:.1%} → "
                    f"{PAPER_REFERENCE['downstream.resolve_with']:.1%} (another agent, 500)", resolve, n, "FIT", rv,
                    reason + "." if not ok else {SUPPORTED: "the FIT's paired change is above 0.",
                                                 CONTRADICTED: "the FIT's paired change is below 0.",
                                                 INCONCLUSIVE: "the FIT's paired interval contains 0.",
                                                 NOT_MEASURED: "no resolve change recorded."}[rv], res.run_label()))
    return rows


def _verify(res: Results) -> Row:
    d = res.external.get("verify")
    if d is None:
        return Row("Docker-free verification reproduces SWE-bench verdicts", "—", "n/a", "n/a", "measured",
                   NOT_MEASURED, f"no {res.external_dir}/{EXTERNAL['verify']}: `codegrep verify --tasks "
                   "data/swebench/swebench_verified.jsonl.gz --out docs/results/verify_sympy_local.json` fills it", "—")
    s = d.get("summary") or {}
    k, n = s.get("trusted"), s.get("n")
    v = share_verdict(k, n)
    lo, hi = wilson(int(k), int(n)) if finite(k, n) and n else (None, None)
    reasons = "; ".join(f"{c} {r}" for r, c in (s.get("reasons") or {}).items())
    return Row("Docker-free verification reproduces SWE-bench verdicts (gold resolves, base does not)",
               "— (no paper number)", f"{k} of {n} trusted ({with_interval(k / n if n else None, lo, hi, '{:.0%}')})",
               count(n, "instances"), "measured", v,
               f"Wilson 95% lower bound vs {VERIFY_BAR:.0%}; not trusted: {reasons or 'none'}; measured by "
               f"`{d.get('command', 'codegrep verify')}`.",
               res.study_label("verify"))


def _mine_memory(d: dict) -> str:
    """The 67K bench's peak memory as its file measured it: a PSS sum (``peak_memory_mb``, from 2026-12-05) or, in
    older files, a sum of RSS (``peak_rss_mb``) that counted pages the forked workers share with their parent twice.

    >>> _mine_memory({"peak_memory_mb": 120.4})
    'peak memory 120 MB (PSS, shared pages once)'
    >>> _mine_memory({"peak_rss_mb": 163.2})
    'peak RSS 163 MB (summed over workers)'
    """
    if d.get("peak_memory_mb") is not None:
        return f"peak memory {fmt(d['peak_memory_mb'], '{:.0f}')} MB (PSS, shared pages once)"
    return f"peak RSS {fmt(d.get('peak_rss_mb'), '{:.0f}')} MB (summed over workers)"


def _mine_67k(res: Results) -> Row:
    d = res.external.get("mine_67k")
    if d is None:
        return Row("Mining scales to 67K trajectories", "67K", "n/a", "n/a", "measured", NOT_MEASURED,
                   f"no {res.external_dir}/{EXTERNAL['mine_67k']}: `codegrep bench mine --n 67000` fills it", "—")
    secs, target = d.get("seconds_for_67k"), d.get("target_seconds_for_67k")
    v = threshold_verdict(secs, target)
    return Row("Mining scales to 67K trajectories (speed)", f"{PAPER_REFERENCE['mining.n_trajectories']:,} "
               f"trajectories; bundle target ≤ {fmt(target, '{:.0f}')} s (not the paper's)",
               f"{fmt(secs, '{:.1f}')} s wall ({fmt(d.get('trajectories_per_s'), '{:,.0f}')} trajectories/s, "
               f"{d.get('workers', '?')} workers), {_mine_memory(d)}",
               count(d.get("trajectories"), "trajectories (resampled real runs)"), "measured", v,
               f"measured by `{d.get('command', 'codegrep bench mine')}` on {d.get('machine', '?')}; "
               + ("meets" if v == SUPPORTED else "misses") + " the target.", res.study_label("mine_67k"))


SUMMARY: tuple[Callable[[Results], Row | list[Row]], ...] = (
    _mining, _mine_67k, _environment, _verify, _precision, _agent, _agent_goal, _ablation, _threshold, _downstream)
"""The summary's rows in order; each function applies its claim's one rule."""


def summary_rows(res: Results) -> list[Row]:
    """Every paper claim with this run's value and its verdict."""
    rows: list[Row] = []
    for f in SUMMARY:
        out = f(res)
        rows += out if isinstance(out, list) else [out]
    return rows


COLUMNS = ("claim", "paper (reference)", "this run", "n", "kind", "verdict", "from")


def markdown_table(rows: list[Row], sentence: bool = True) -> list[str]:
    """The summary as markdown table lines (``|`` in cells escaped)."""
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        verdict = f"**{r.verdict}**" + (f": {r.why}" if sentence else "")
        lines.append("| " + " | ".join(esc(x) for x in (r.claim, r.paper, r.value, r.n, r.kind, verdict, r.source))
                     + " |")
    return lines


NOTEBOOK_CLAIMS: dict[str, tuple[Callable[[Results], Row | list[Row]], ...]] = {
    "01_mining": (_mining,), "02_environment": (_environment,), "03_training": (_agent, _agent_goal),
    "04_ablation": (_ablation,), "05_precision_threshold": (_precision, _threshold),
    "06_downstream_eval": (_downstream,),
}
"""Which summary rows each notebook's numbers decide (its conclusion cell prints them)."""


def conclusion(artifacts: Path, notebook: str) -> str:
    """A notebook's closing sentences: each of its claims, this run's value and the verdict with its reason
    (the same rows as the report's summary), read from the headlines the notebook just recorded."""
    res = Results.load(Path(artifacts))
    lines = []
    for f in NOTEBOOK_CLAIMS[notebook]:
        out = f(res)
        for r in out if isinstance(out, list) else [out]:
            if r.source != "—" and not r.source.startswith(res.external_dir):
                lines.append(f"- {r.claim} (paper, reference: {r.paper}) -> this run: {r.value}; n = {r.n}; "
                             f"{r.kind}. Verdict: {r.verdict.upper()}: {r.why}")
    return "What this run showed (verdict rules: codegrep/claims.py; the report's summary has every claim):\n" + \
        "\n".join(lines)
