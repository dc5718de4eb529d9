"""Run a downstream agent over tasks, summarise, and compare with / without retrieval.

Paired statistics: resolve rate with McNemar's exact test (discordant pairs, ``scipy.stats.binomtest``),
rounds and tokens as relative changes of the mean with paired bootstrap intervals
(``codegrep.metrics.paired_bootstrap_diff``); tokens are compared on instances resolved in both runs,
as the paper does ("tokens on resolved instances").
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from codegrep.downstream.agents import DownstreamResult
from codegrep.errors import UserError
from codegrep.files import atomic_write, jsonl_objects
from codegrep.metrics import bootstrap_ci, dedupe, paired_bootstrap_diff
from codegrep.quiet import show_bar


def load_candidates(path: str | Path) -> dict[str, list[str]]:
    """instance_id -> ranked files, from a retriever results JSONL (``codegrep evaluate`` rows)."""
    p = Path(path)
    out = {}
    for n, row in jsonl_objects(p, "candidates file"):
        if "instance_id" not in row or not isinstance(row.get("files"), list):
            raise ValueError(f"{p}:{n}: a candidates row needs 'instance_id' and a 'files' list")
        out[row["instance_id"]] = dedupe(row["files"])
    if not out:  # not "retrieval found nothing for every task": an empty or cut file is a mistake
        raise UserError(f"{p}: no candidates rows (one per instance: instance_id, files); use --candidates none "
                        "for a run without candidates")
    return out


TRAJECTORY_SUFFIXES = (".traj.json", ".traj.json.gz", ".traj", ".traj.gz")
"""File names of recorded trajectories: mini-swe-agent's ``*.traj.json`` (batch mode writes
``<out>/<id>/<id>.traj.json``) and SWE-agent's ``*.traj`` (``<out>/<id>/<id>.traj``), gzipped or not."""


OUTPUT_NAMES = ("output.jsonl", "output.jsonl.gz")
"""An OpenHands run's results file, as it writes it or gzipped for sharing."""


def results_from_trajectories(paths: Sequence[str | Path], report: dict[str, Any] | None = None
                              ) -> list[DownstreamResult]:
    """One ``DownstreamResult`` per trajectory file, in the order given; the format is read from the content
    (mini-swe-agent or SWE-agent), not the name.

    The instance id is the file's own, else its name's (``<id>.traj.json``: the single-run ``mini`` command stores
    none). The verdict comes from ``report`` (a harness report of the whole run) or, without one, from the report
    beside each file (``<id>.report.json``, ``report.json``: ``codegrep.mining.inputs.report_beside``); an instance
    in neither is unknown (None). A file that cannot be read, or is neither format, is a ``UserError`` naming it;
    two files of one instance are refused (which run would count is not knowable from a directory).
    """
    from codegrep.downstream.mini_swe_agent import result_from_trajectory
    from codegrep.downstream.swe_agent import result_from_traj
    from codegrep.files import read_json
    from codegrep.mining.formats import minisweagent, sweagent
    from codegrep.mining.inputs import report_beside

    results: list[DownstreamResult] = []
    seen: dict[str, Path] = {}
    for path in map(Path, paths):
        traj = read_json(path, "trajectory")  # bad JSON: file:line; not UTF-8, damaged gzip: the file
        if not isinstance(traj, dict):
            raise UserError(f"{path}: a trajectory is a JSON object, not {type(traj).__name__}")
        rep = report if report is not None else report_beside(str(path))
        if minisweagent.detect(traj):
            res = result_from_trajectory(traj, rep, path=str(path))
        elif sweagent.detect_traj(traj) or (isinstance(traj.get("trajectory"), list) and "info" in traj):
            res = result_from_traj(traj, rep, path=str(path))
        else:
            raise UserError(f"{path}: neither a mini-swe-agent trajectory (messages, info.submission) nor a SWE-agent "
                            f".traj (trajectory, info); keys: {sorted(traj)[:8]}")
        if not res.instance_id:
            raise UserError(f"{path}: no instance_id, in the file or its name")
        if res.instance_id in seen:
            raise UserError(f"{path}: a second trajectory of {res.instance_id} (the first is {seen[res.instance_id]}); "
                            "give the directory of one run")
        seen[res.instance_id] = path
        results.append(res)
    return results


def results_from_agent_output(src: str | Path, report: dict[str, Any] | None = None) -> list[DownstreamResult]:
    """Results of recorded real agent runs (``codegrep downstream --from-output``).

    ``src`` is a recorded trajectory (``TRAJECTORY_SUFFIXES``: mini-swe-agent or SWE-agent) or a directory of them
    (searched recursively), else an OpenHands ``output.jsonl`` (or a directory holding exactly one; eval_infer's
    ``output.swebench_eval.jsonl`` beside it holds verdicts, not runs, and is refused when given here). ``report`` is a
    harness report of the whole run; without it a trajectory's verdict is read from the report beside it. Nothing
    found is a ``UserError`` (never an empty result that replaces an earlier ``--out``).
    """
    from codegrep.data.swebench_report import is_evaluation
    from codegrep.downstream.openhands import VERDICTS_NOT_RUNS, results_from_output

    src = Path(src)
    if src.is_dir():
        files = sorted(p for p in src.rglob("*") if p.name.endswith(TRAJECTORY_SUFFIXES) and p.is_file())
        outputs = sorted(p for p in src.rglob("output.jsonl*") if p.name in OUTPUT_NAMES)
        if files and outputs:  # OpenHands runs beside trajectories: which ones the user means is not knowable
            raise UserError(f"--from-output {src}: both trajectories ({files[0]}, ...) and an OpenHands output "
                            f"({outputs[0]}) under it; give the directory of one agent's runs")
        if len(outputs) > 1:
            raise UserError(f"--from-output {src}: {len(outputs)} OpenHands output.jsonl files under it "
                            f"({', '.join(str(o) for o in outputs[:3])}, ...); give one of them")
        if not files and not outputs:
            raise UserError(f"--from-output {src}: no trajectory (*.traj.json[.gz], *.traj[.gz]) and no OpenHands "
                            "output.jsonl[.gz] under it")
        results = results_from_trajectories(files, report) if files else results_from_output(outputs[0], report)
    elif src.name.endswith(TRAJECTORY_SUFFIXES):
        results = results_from_trajectories([src], report)
    elif is_evaluation(src):
        raise UserError(f"--from-output {src}: {VERDICTS_NOT_RUNS}")
    else:
        results = results_from_output(src, report)
    if not results:
        raise UserError(f"--from-output {src}: no results in it (an OpenHands output.jsonl)")
    return results


def run_downstream(tasks: Sequence[Any], agent: Any, candidates: dict[str, list[str]] | None,
                   out_path: str | Path | None = None, progress: bool = True) -> list[DownstreamResult]:
    """Run ``agent`` on every task it can run (the replay model: tasks with a recorded rollout).

    With ``candidates``, a task absent from it gets an empty list (retrieval ran, found nothing).
    Rows are appended to ``out_path`` as JSONL.
    """
    from tqdm.auto import tqdm

    runnable = [t for t in tasks if not hasattr(agent, "has") or agent.has(t.instance_id)]
    if not runnable:
        raise ValueError(f"agent {agent.name!r} can run none of the {len(tasks)} tasks "
                         "(the replay model needs instances with recorded trajectories)")
    results = []
    # the results file appears whole when the run ends (a killed run leaves the previous file as it was)
    with (atomic_write(out_path, "w") if out_path else contextlib.nullcontext()) as fh:
        for task in tqdm(runnable, desc=f"downstream {agent.name}", disable=not show_bar(progress)):
            files = None if candidates is None else candidates.get(task.instance_id, [])
            res = agent.run(task, files)
            res.repo = res.repo or getattr(task, "repo", "")
            results.append(res)
            if fh:
                fh.write(json.dumps(res.to_row()) + "\n")
    return results


def read_results(path: str | Path) -> list[DownstreamResult]:
    """Results written by ``run_downstream``."""
    p = Path(path)
    results = []
    for n, row in jsonl_objects(p, "downstream results"):
        try:
            results.append(DownstreamResult.from_row(row))
        except TypeError:
            missing = [f.name for f in fields(DownstreamResult) if f.default is MISSING
                       and f.default_factory is MISSING and f.name not in row]
            raise UserError(f"{p}:{n}: not a downstream result row (missing {missing}; "
                            "a file `codegrep downstream --out` wrote)") from None
    return results


RESOLVE_RATE_OVER = ("n_judged: the runs the harness evaluated; runs without a verdict and infrastructure failures "
                     "(infra_failure_ids) are not in the denominator")
"""What every resolve rate of ``summarize`` / ``paired_compare`` is over, stated in their output."""


def summarize(results: Sequence[DownstreamResult]) -> dict[str, Any]:
    """Resolve rate (over evaluated instances: ``n_judged``; the harness's infrastructure failures are not, they are
    counted in ``n_infra_failure`` and named in ``infra_failure_ids``), mean rounds, mean tokens (all and resolved)
    over the runs whose tokens are known (``n_tokens``: how many; a run that recorded no usage is left out, not
    counted as 0; so is one that recorded it on only some calls, counted in ``n_tokens_partial``); mean rounds
    likewise over the runs whose rounds are known (``n_rounds``: an OpenHands error row with no history is not 0).

    >>> s = summarize([DownstreamResult("a", "x", True, 4, 100, 10), DownstreamResult("b", "x", False, 2, None, None)])
    >>> s["mean_rounds"], s["mean_tokens"], s["n_tokens"], s["mean_tokens_resolved"]
    (3.0, 110.0, 1, 110.0)
    """
    judged = [r for r in results if r.judged]
    resolved = [r for r in judged if r.resolved]
    mean = lambda xs: float(np.mean(xs)) if len(xs) else float("nan")  # noqa: E731
    known = lambda rs: [r.tokens for r in rs if r.tokens is not None]  # noqa: E731
    infra = [r.instance_id for r in results if r.infra_failure]
    rounds = [r.rounds for r in results if r.rounds is not None]
    return {"agent": results[0].agent if results else None, "n": len(results), "n_judged": len(judged),
            "resolve_rate": mean([float(r.resolved) for r in judged]), "n_rounds": len(rounds), "mean_rounds": mean(rounds),
            "n_tokens": len(known(results)), "mean_tokens": mean(known(results)),
            "n_tokens_partial": sum(bool(r.extra.get("tokens_partial")) for r in results),
            "mean_tokens_resolved": mean(known(resolved)),
            "with_retrieval": bool(results) and results[0].candidate_files is not None,
            "n_infra_failure": len(infra), "infra_failure_ids": infra, "resolve_rate_over": RESOLVE_RATE_OVER}


def mcnemar(base: Sequence[bool], hinted: Sequence[bool]) -> dict[str, float]:
    """McNemar's exact test on paired binary outcomes.

    >>> mcnemar([True, False, False, False], [True, True, True, False])
    {'b_only': 0, 'h_only': 2, 'p_value': 0.5}
    """
    from scipy.stats import binomtest

    b = int(sum(x and not y for x, y in zip(base, hinted)))
    h = int(sum(y and not x for x, y in zip(base, hinted)))
    p = binomtest(b, b + h, 0.5).pvalue if b + h else 1.0
    return {"b_only": b, "h_only": h, "p_value": float(p)}


def relative_change(a: Sequence[float], b: Sequence[float], n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """mean(b)/mean(a) - 1 over pairs, with a paired bootstrap interval.

    >>> round(relative_change([10, 10], [8, 8])["change"], 6)
    -0.2
    >>> relative_change([0, 0], [3, 1])  # no base to be relative to: undefined, not a division by zero
    {'change': nan, 'low': nan, 'high': nan, 'n': 2}
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.size == 0 or a.mean() == 0:
        return {"change": float("nan"), "low": float("nan"), "high": float("nan"), "n": int(a.size)}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n_boot, a.size))
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample of only zero-base pairs: an infinite change
        boots = b[idx].mean(axis=1) / a[idx].mean(axis=1) - 1
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"change": float(b.mean() / a.mean() - 1), "low": float(lo), "high": float(hi), "n": int(a.size)}


def paired_compare(base: Sequence[DownstreamResult], hinted: Sequence[DownstreamResult],
                   seed: int = 0) -> dict[str, Any]:
    """Paired comparison on the instances both runs share (``n_pairs``; ``n_only_base`` / ``n_only_hint``: the
    instances of one side only, left out). An instance listed twice on one side counts once, by its last row.
    Resolve statistics are over the pairs judged on both sides (``n_judged``); a pair with an infrastructure
    failure on either side is not judged (``n_infra_failure``); rounds over the pairs whose rounds are both known.

    >>> r = lambda i, ok: DownstreamResult(i, "x", ok, 5, 100, 10)  # noqa: E731
    >>> p = paired_compare([r("a", True), r("b", False), r("a", False)], [r("b", True), r("c", True), r("a", True)])
    >>> p["n_pairs"], p["n_only_base"], p["n_only_hint"], p["mcnemar"]["h_only"]
    (2, 0, 1, 2)
    """
    by_id = {r.instance_id: r for r in base}
    hint_by_id = {r.instance_id: r for r in hinted}
    pairs = [(by_id[i], h) for i, h in hint_by_id.items() if i in by_id]
    judged = [(a, b) for a, b in pairs if a.judged and b.judged]
    ra, rb = [bool(a.resolved) for a, _ in judged], [bool(b.resolved) for _, b in judged]
    diff = paired_bootstrap_diff([float(x) for x in ra], [float(x) for x in rb], seed=seed) if judged else (np.nan,) * 3
    counted = [(a, b) for a, b in pairs if a.rounds is not None and b.rounds is not None]
    both = [(a, b) for a, b in judged if a.resolved and b.resolved and a.tokens is not None and b.tokens is not None]
    return {"n_pairs": len(pairs), "n_only_base": len(by_id.keys() - hint_by_id.keys()),
            "n_only_hint": len(hint_by_id.keys() - by_id.keys()), "n_judged": len(judged),
            "n_infra_failure": sum(bool(a.infra_failure or b.infra_failure) for a, b in pairs),
            "resolve_rate_over": RESOLVE_RATE_OVER,
            "resolve_base": float(np.mean(ra)) if ra else float("nan"),
            "resolve_hint": float(np.mean(rb)) if rb else float("nan"),
            "resolve_diff": diff[0], "resolve_diff_low": diff[1], "resolve_diff_high": diff[2],
            "mcnemar": mcnemar(ra, rb),
            "rounds": relative_change([a.rounds for a, _ in counted], [b.rounds for _, b in counted], seed=seed),
            "tokens_resolved": relative_change([a.tokens for a, _ in both], [b.tokens for _, b in both], seed=seed)}


def resolve_rate_ci(results: Sequence[DownstreamResult], seed: int = 0) -> tuple[float, float, float]:
    """Resolve rate with a bootstrap interval."""
    return bootstrap_ci([float(r.resolved) for r in results if r.judged], seed=seed)
