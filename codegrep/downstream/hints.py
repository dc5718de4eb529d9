"""The randomized hint experiment: the same frozen agent with hints of controlled precision, and without.

For every instance and every run index, one no-hint run plus one run per hint precision ``p``: a hint of
``set_size`` files, ``round(p * set_size)`` of them gold (at most as many as the fix touches) and the rest
*distractors*, the retriever's own false positives on that instance (BM25's top non-gold files on the snapshot
by default, or the non-gold files of a ``codegrep evaluate`` results file), so wrong hints look like real ones.
Which gold files and which of the top ``distractor_pool`` false positives enter, and their order, are drawn at
random from a seed recorded per run (``plan.jsonl``). Hints reach the agent in the one block every retriever
uses (``codegrep.downstream.agents.hinted_problem_statement``).

Layout of ``--out DIR``: ``plan.jsonl`` (every run's arm, seed and hint, written once), ``results.jsonl`` (one
row per attempt: rounds, prompt/completion tokens, files opened, patch, verdict, or ``status=failed`` with the
reason), ``trajectories/<arm>-r<run>/<id>.traj.json``. Re-running the same command resumes: keys already in
``results.jsonl`` are skipped (``retry_failed`` re-runs failed ones; the latest attempt of a key counts).

``summarize_hint_experiment`` turns the results into resolve / rounds / tokens by precision, paired differences
against the no-hint run with bootstrap intervals, and the precision where hints stop saving tokens.
"""
from __future__ import annotations

import json
import random
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from codegrep.data.tasks import Task
from codegrep.files import open_append, write_atomic, write_errors
from codegrep.quiet import show_bar

NO_HINT = "none"


@dataclass
class HintExperimentConfig:
    """Settings of the hint experiment (the ``downstream.hints`` block of a profile)."""

    precisions: list[float] = field(default_factory=lambda: [0.0, 0.33, 0.67, 1.0])
    """Nominal hint precisions, one arm each (0 = only distractors, 1 = only gold files)."""
    set_size: int = 4
    """Files per hint (k); a precision-1 hint has fewer when the fix touches fewer files."""
    runs: int = 1
    """Repetitions of every (instance, arm), each with its own seed; the no-hint run is repeated too."""
    seed: int = 0
    """Master seed; each run's seed derives from it, the instance and the arm, and is recorded."""
    distractor_retriever: str = "bm25"
    """Retriever whose false positives are the distractors (ignored when a candidates file is given)."""
    distractor_pool: int = 10
    """Distractors are drawn from the retriever's top this-many non-gold files."""
    no_hint: bool = True
    """Also run each instance without a hint (the paired control)."""
    verify: bool = True
    """Judge each patch with ``codegrep verify``'s local tests where the instance is verifiable."""
    retry_failed: bool = False
    """On resume, run again the keys whose latest attempt failed (else they stay recorded as failed)."""


def arm_name(precision: float | None) -> str:
    """``none`` or ``p0.33``.

    >>> arm_name(None), arm_name(0.333), arm_name(1)
    ('none', 'p0.33', 'p1.00')
    """
    return NO_HINT if precision is None else f"p{float(precision):.2f}"


def run_seed(seed: int, instance_id: str, arm: str, run: int) -> int:
    """The recorded seed of one run (stable across machines and Python versions).

    >>> run_seed(0, "a__b-1", "p0.50", 0) == run_seed(0, "a__b-1", "p0.50", 0) != run_seed(1, "a__b-1", "p0.50", 0)
    True
    """
    return zlib.crc32(f"{seed}|{instance_id}|{arm}|{run}".encode())


def build_hint(gold: Sequence[str], distractors: Sequence[str], precision: float, set_size: int,
               rng: random.Random) -> list[str]:
    """A hint of ``set_size`` files with ``round(precision * set_size)`` gold ones (fewer if fewer exist).

    Distractors are drawn from ``distractors`` (never a gold file); the order is shuffled.

    >>> h = build_hint(["g.py"], ["d1.py", "d2.py", "d3.py", "d4.py"], 0.5, 4, random.Random(0))
    >>> sorted(h).count("g.py"), len(h)
    (1, 3)
    >>> build_hint(["g.py"], ["d1.py"], 0.0, 1, random.Random(0))
    ['d1.py']
    """
    if not 0.0 <= precision <= 1.0:
        raise ValueError(f"hint precision must be in [0, 1], got {precision}")
    want_gold = int(round(precision * set_size))
    gold = list(dict.fromkeys(gold))
    bad_pool = [d for d in dict.fromkeys(distractors) if d not in set(gold)]
    n_gold = min(want_gold, len(gold))
    n_bad = min(set_size - want_gold, len(bad_pool))
    hint = rng.sample(gold, n_gold) + rng.sample(bad_pool, n_bad)
    rng.shuffle(hint)
    return hint


def distractor_lists(tasks: Sequence[Task], candidates: dict[str, list[str]] | None, retriever: str,
                     cfg: dict[str, Any] | None, resolver: Any, depth: int) -> dict[str, list[str]]:
    """instance_id -> the retriever's top ``depth`` non-gold files (from ``candidates`` when given)."""
    out: dict[str, list[str]] = {}
    if candidates is not None:
        for t in tasks:
            out[t.instance_id] = [f for f in candidates.get(t.instance_id, []) if f not in set(t.gold_files)][:depth]
        return out
    from codegrep.env.pool import default_pool
    from codegrep.retrievers.registry import make_retriever

    ret = make_retriever(retriever, cfg)
    pool = default_pool((cfg or {}).get("env"))
    for t in tasks:
        with pool.acquire(resolver.resolve(t.repo, t.base_commit), t.base_commit) as checkout:
            files = ret.retrieve(t, Path(checkout)).files
        out[t.instance_id] = [f for f in files if f not in set(t.gold_files)][:depth]
    return out


def make_plan(tasks: Sequence[Task], distractors: dict[str, list[str]], config: HintExperimentConfig,
              source: str) -> list[dict[str, Any]]:
    """Every run of the experiment: instance, arm, run index, seed, hint and its realised precision."""
    plan = []
    arms: list[float | None] = ([None] if config.no_hint else []) + [float(p) for p in config.precisions]
    for t in tasks:
        for run in range(config.runs):
            for p in arms:
                arm = arm_name(p)
                seed = run_seed(config.seed, t.instance_id, arm, run)
                hint = None if p is None else build_hint(t.gold_files, distractors.get(t.instance_id, []), p,
                                                         config.set_size, random.Random(seed))
                n_gold = None if hint is None else sum(f in set(t.gold_files) for f in hint)
                plan.append({"instance_id": t.instance_id, "arm": arm, "precision": p, "run": run, "seed": seed,
                             "hint": hint, "n_gold": n_gold,
                             "realised_precision": (n_gold / len(hint)) if hint else None,
                             "distractor_source": source})
    return plan


def key(row: dict[str, Any]) -> tuple[str, str, int]:
    return row["instance_id"], row["arm"], int(row["run"])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file (a torn last line from a killed run is ignored)."""
    if not path.is_file():
        return []
    rows = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if n == len(lines):
                break
            raise ValueError(f"{path}:{n}: not JSON ({exc})") from exc
    return rows


def load_or_write_plan(out: Path, plan: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan already in ``out`` (when its settings match), else ``plan`` written there."""
    plan_path, meta_path = out / "plan.jsonl", out / "experiment.json"
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        changed = {k: (old.get(k), v) for k, v in settings.items() if old.get(k) != v}
        if changed:
            raise ValueError(f"{meta_path}: this --out holds an experiment with other settings {changed}; "
                             "use a new --out")
        old_plan = read_jsonl(plan_path)
        known = {key(r) for r in old_plan}
        added = [r for r in plan if key(r) not in known]  # e.g. more tasks than the first time
        if added:
            with open_append(plan_path) as fh:
                fh.writelines(json.dumps(r) + "\n" for r in added)
        return old_plan + added
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(plan_path, "".join(json.dumps(r) + "\n" for r in plan))
    write_atomic(meta_path, json.dumps(settings, indent=1) + "\n")
    return plan


def pending(plan: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]], retry_failed: bool) -> list[dict]:
    """Plan rows still to run: no attempt yet, or (``retry_failed``) a latest attempt that failed.

    >>> plan = [{"instance_id": "a", "arm": "none", "run": 0}, {"instance_id": "a", "arm": "p1.00", "run": 0}]
    >>> res = [{"instance_id": "a", "arm": "p1.00", "run": 0, "status": "failed"}]
    >>> [r["arm"] for r in pending(plan, res, False)], [r["arm"] for r in pending(plan, res, True)]
    (['none'], ['none', 'p1.00'])
    """
    latest = {key(r): r for r in results}
    return [p for p in plan if key(p) not in latest or (retry_failed and latest[key(p)].get("status") != "ok")]


def run_one(agent: Any, task: Task, row: dict[str, Any], verifier: Any | None) -> dict[str, Any]:
    """One planned run as a results row; an exception becomes ``status=failed`` with its reason."""
    out = {**{k: row[k] for k in ("instance_id", "arm", "precision", "run", "seed", "hint", "n_gold",
                                  "realised_precision")}, "repo": task.repo, "agent": agent.name}
    start = time.perf_counter()
    try:
        res = agent.run(task, row["hint"], label=f"{row['arm']}-r{row['run']}")
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded with its reason, never dropped
        first = (str(exc).strip().splitlines() or [""])[0][:500]
        return {**out, "status": "failed", "reason": f"{type(exc).__name__}: {first}",
                "seconds": time.perf_counter() - start, "resolved": None}
    patch = res.extra.get("patch") or ""
    viewed = list(res.extra.get("viewed_files") or [])
    out.update(status="ok", reason="", rounds=res.rounds, prompt_tokens=res.prompt_tokens,
               completion_tokens=res.completion_tokens, tokens=res.tokens, seconds=res.seconds,
               exit_status=res.extra.get("exit_status"), viewed_files=viewed,
               opened_gold=any(f in set(task.gold_files) for f in viewed), patch=patch, trajectory=res.trajectory)
    if verifier is None:
        out.update(resolved=None, verdict_reason="not verified")
    elif not patch.strip():  # no fix: not resolved wherever a verdict is trusted
        trust = verifier.trust(task)
        out.update(resolved=False if trust["trusted"] else None,
                   verdict_reason="empty patch" if trust["trusted"] else f"unverifiable here: {trust['reason']}")
    else:
        v = verifier.verdict(task, patch, f"{row['arm']}-r{row['run']}")
        out.update(resolved=v.resolved, verdict_reason=v.reason)
    return out


def run_experiment(tasks: Sequence[Task], agent: Any, config: HintExperimentConfig, out: str | Path,
                   distractors: dict[str, list[str]], source: str, verifier: Any | None = None,
                   settings: dict[str, Any] | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Plan (or resume) the experiment under ``out`` and run what is pending; returns every results row."""
    from tqdm.auto import tqdm

    out = Path(out)
    settings = {**(settings or {}), **{k: v for k, v in asdict(config).items() if k != "retry_failed"},
                "distractor_source": source}
    plan = load_or_write_plan(out, make_plan(tasks, distractors, config, source), settings)
    by_id = {t.instance_id: t for t in tasks}
    results_path = out / "results.jsonl"
    todo = [p for p in pending(plan, read_jsonl(results_path), config.retry_failed) if p["instance_id"] in by_id]
    # an append-only log (one complete line per finished row, flushed): a resumed run continues it
    with write_errors(results_path), open_append(results_path) as fh:
        for row in tqdm(todo, desc="hint experiment", disable=not show_bar(progress)):
            res = run_one(agent, by_id[row["instance_id"]], row, verifier if config.verify else None)
            fh.write(json.dumps(res) + "\n")
            fh.flush()
    return read_jsonl(results_path)


# ----------------------------------------------------------------------------------------------- analysis

def latest_results(results: str | Path | Iterable[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The latest attempt per (instance, arm, run) from a run dir, a results.jsonl, or rows."""
    if results is None:
        return []
    if isinstance(results, (str, Path)):
        p = Path(results)
        p = p / "results.jsonl" if p.is_dir() else p
        results = read_jsonl(p)
    return list({key(r): r for r in results}.values())


def _mean(values: Iterable[Any]) -> float:
    """Mean of the known (not None) values; NaN when none is.

    >>> _mean([2, None, 4]), _mean([None])
    (3.0, nan)
    """
    known = [float(v) for v in values if v is not None]
    return float(np.mean(known)) if known else float("nan")


def _crossing_by_arm(pairs: list[tuple[dict, dict]], metric: str) -> tuple[list[float], list[float]]:
    arms = sorted({h["precision"] for _, h in pairs})
    xs, ys = [], []
    for p in arms:
        sel = [(b, h) for b, h in pairs if h["precision"] == p]
        base = sum(b[metric] for b, _ in sel)
        if base > 0:
            xs.append(float(p))
            ys.append(sum(h[metric] for _, h in sel) / base - 1)
    return xs, ys


def summarize_hint_experiment(results: str | Path | Iterable[dict[str, Any]] | None, n_boot: int = 2000,
                              seed: int = 0, metric: str = "tokens") -> dict[str, Any] | None:
    """Resolve, rounds and tokens by hint precision, paired differences against the no-hint run, and the
    precision where hints stop saving ``metric`` (``tokens`` or ``rounds``); None when no results exist.

    Every number comes from real agent runs; intervals are 95% bootstrap over runs (paired where paired), the
    crossing point's over instances. Failed runs are counted, not analysed.

    >>> rows = [{"instance_id": i, "arm": a, "precision": p, "run": 0, "status": "ok", "resolved": None,
    ...          "rounds": r, "prompt_tokens": 10 * r, "completion_tokens": r, "tokens": 11 * r}
    ...         for i in "ab" for a, p, r in (("none", None, 10), ("p0.00", 0.0, 12), ("p1.00", 1.0, 6))]
    >>> s = summarize_hint_experiment(rows, n_boot=50)
    >>> list(s["paired"]["rounds_diff"]), round(s["crossing"]["precision"], 3)
    ([2.0, -4.0], 0.333)
    >>> summarize_hint_experiment([]) is None
    True
    """
    import pandas as pd

    from codegrep.downstream.threshold import crossing_point
    from codegrep.metrics import bootstrap_ci, paired_bootstrap_diff

    rows = latest_results(results)
    if not rows:
        return None
    ok = [r for r in rows if r.get("status") == "ok"]
    arms = sorted({r["arm"] for r in rows}, key=lambda a: (a != NO_HINT, a))
    table = []
    for arm in arms:
        sel = [r for r in ok if r["arm"] == arm]
        judged = [float(r["resolved"]) for r in sel if r.get("resolved") is not None]
        res, lo, hi = bootstrap_ci(judged, n_boot=n_boot, seed=seed)
        mean = lambda k: _mean([r.get(k) for r in sel])  # noqa: E731
        prec = next((r.get("precision") for r in rows if r["arm"] == arm), None)
        real = [r["realised_precision"] for r in sel if r.get("realised_precision") is not None]
        table.append({"arm": arm, "precision": float("nan") if prec is None else float(prec),
                      "realised_precision": float(np.mean(real)) if real else float("nan"),
                      "n": len(sel), "n_failed": sum(r["arm"] == arm and r.get("status") != "ok" for r in rows),
                      "n_judged": len(judged), "resolve_rate": res, "resolve_low": lo, "resolve_high": hi,
                      "mean_rounds": mean("rounds"), "mean_prompt_tokens": mean("prompt_tokens"),
                      "mean_completion_tokens": mean("completion_tokens"), "mean_tokens": mean("tokens")})
    base = {(r["instance_id"], r["run"]): r for r in ok if r["arm"] == NO_HINT}
    pairs = [(base[(r["instance_id"], r["run"])], r) for r in ok
             if r["arm"] != NO_HINT and (r["instance_id"], r["run"]) in base]
    known = lambda items, k: [(b, h) for b, h in items if b.get(k) is not None and h.get(k) is not None]  # noqa: E731
    paired = []
    for arm in [a for a in arms if a != NO_HINT]:
        sel = [(b, h) for b, h in pairs if h["arm"] == arm]
        judged = [(b, h) for b, h in sel if b.get("resolved") is not None and h.get("resolved") is not None]
        row = {"arm": arm, "precision": float(sel[0][1]["precision"]) if sel else float("nan"),
               "n_pairs": len(sel), "n_judged": len(judged)}
        for name, items, get in (("resolve", judged, lambda r: float(r["resolved"])),
                                 ("rounds", known(sel, "rounds"), lambda r: float(r["rounds"])),
                                 ("tokens", known(sel, "tokens"), lambda r: float(r["tokens"]))):
            d = paired_bootstrap_diff([get(b) for b, _ in items], [get(h) for _, h in items], n_boot=n_boot,
                                      seed=seed) if items else (float("nan"),) * 3
            row.update({f"{name}_diff": d[0], f"{name}_low": d[1], f"{name}_high": d[2]})
        paired.append(row)
    pairs = known(pairs, metric)  # a run that recorded no token usage is left out of the token crossing
    crossing = {"metric": metric, "precision": float("nan"), "low": float("nan"), "high": float("nan"),
                "n": len({b["instance_id"] for b, _ in pairs})}
    if pairs:
        crossing["precision"] = crossing_point(*_crossing_by_arm(pairs, metric))
        ids = sorted({b["instance_id"] for b, _ in pairs})
        by_inst = {i: [(b, h) for b, h in pairs if b["instance_id"] == i] for i in ids}
        rng = np.random.default_rng(seed)
        boots = []
        for _ in range(n_boot):
            draw = [pr for j in rng.integers(0, len(ids), len(ids)) for pr in by_inst[ids[j]]]
            boots.append(crossing_point(*_crossing_by_arm(draw, metric)))
        found = np.asarray([b for b in boots if not np.isnan(b)])
        if found.size:
            crossing["low"], crossing["high"] = (float(x) for x in np.quantile(found, [0.025, 0.975]))
        crossing["boot_found_share"] = float(found.size / n_boot)
    return {"n_instances": len({r["instance_id"] for r in rows}), "n_runs": len(rows),
            "n_failed": sum(r.get("status") != "ok" for r in rows), "source": "run",
            "by_precision": pd.DataFrame(table), "paired": pd.DataFrame(paired), "crossing": crossing}
