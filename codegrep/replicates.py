"""Stage effects across committed runs, instance by instance (``codegrep report --replicates``).

One cold smoke run evaluates each policy on the same 86 instances, so its paired differences are small samples
(one instance is 0.012 of P@1). Every committed run keeps its per-instance P@1 (``per_instance.json``, written by
``report --save-results``); this module reads the committed run and its replicates, counts for each run the
instances a policy won and lost against another on the same instances, and pools the counts over runs with an
exact two-sided sign test. Runs whose rows for a pair are identical (a run re-used by a later notebook) count once.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np

PAIRS = (("GRPO", "warm_start"), ("warm_start", "grep-heuristic"), ("GRPO", "grep-heuristic"), ("GRPO", "bm25"))
"""(policy, against) pairs compared in every run that has both."""


def policy_name(key: str) -> str:
    """A per-instance table's key as a policy or retriever name.

    >>> policy_name("smoke-gated-lam0.1-s0/GRPO"), policy_name("eval/grep-heuristic"), policy_name("p_at_1_bm25")
    ('GRPO', 'grep-heuristic', 'bm25')
    >>> policy_name("p_at_1_grpo")
    'GRPO'
    """
    leaf = key.rsplit("/", 1)[-1]
    if leaf.startswith("p_at_1_"):
        leaf = leaf[len("p_at_1_"):]
    return "GRPO" if leaf.lower() == "grpo" else leaf


def tables(per_instance: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``{policy: {instance_id: P@1}}`` from a ``per_instance.json`` (the current layout under ``p_at_1``, or an
    older one with ``p_at_1_<policy>`` keys at the top).

    >>> tables({"p_at_1": {"r/GRPO": {"a": 1.0}, "eval/bm25": {"a": 0.0}}})
    {'GRPO': {'a': 1.0}, 'bm25': {'a': 0.0}}
    >>> tables({"p_at_1_grpo": {"a": 1.0}, "what": "..."})
    {'GRPO': {'a': 1.0}}
    """
    source = per_instance.get("p_at_1") if isinstance(per_instance.get("p_at_1"), dict) else {
        k: v for k, v in per_instance.items() if k.startswith("p_at_1_")}
    return {policy_name(k): v for k, v in source.items() if isinstance(v, dict)}


def _check_numbers(path: Path, doc: dict[str, Any], tab: dict[str, dict[str, Any]]) -> None:
    """A hand-edited or foreign ``per_instance.json`` is one error naming the file: ``p_at_1`` not an object, or a
    P@1 that is not a number (it was a TypeError deep in the sign test, or a run silently left out)."""
    from codegrep.errors import UserError

    if "p_at_1" in doc and not isinstance(doc["p_at_1"], dict):
        raise UserError(f"{path}: field 'p_at_1' must be a JSON object, got {type(doc['p_at_1']).__name__}")
    for policy, values in tab.items():
        for iid, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise UserError(f"{path}: P@1 of {policy} on {iid} must be a number, got {v!r}")


def won_lost(a: dict[str, float], b: dict[str, float]) -> tuple[int, int, int]:
    """(instances where ``a`` beats ``b``, where it loses, instances both have).

    >>> won_lost({"x": 1.0, "y": 0.0, "z": 1.0}, {"x": 0.0, "y": 1.0, "z": 1.0, "w": 0.0})
    (1, 1, 3)
    """
    common = a.keys() & b.keys()
    return (sum(a[i] > b[i] for i in common), sum(a[i] < b[i] for i in common), len(common))


def sign_test_p(won: int, lost: int) -> float:
    """Exact two-sided sign test of ``won`` against ``lost`` (ties dropped): the chance of a split at least this
    uneven if either side were equally likely to win an untied instance.

    >>> round(sign_test_p(2, 9), 3), sign_test_p(3, 3), sign_test_p(0, 0)
    (0.065, 1.0, 1.0)
    """
    n = won + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(won, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def per_instance(artifacts: Path) -> dict[str, dict[str, float]]:
    """``{run/policy: {instance_id: P@1}}`` from the evaluation rows notebook 03 wrote
    (``artifacts/train/eval/<run>/<policy>.jsonl``) and ``{eval/retriever: ...}`` from the retrievers' rows
    (``artifacts/eval/<retriever>.jsonl``, notebook 05); empty when there are none."""
    from codegrep.errors import UserError
    from codegrep.files import json_loads, read_text

    out: dict[str, dict[str, float]] = {}
    for path in sorted(Path(artifacts).glob("train/eval/*/*.jsonl")) + sorted(Path(artifacts).glob("eval/*.jsonl")):
        rows = {}
        for lineno, line in enumerate(read_text(path, "evaluation rows").splitlines(), 1):
            try:
                row = json_loads(line, f"{path}:{lineno}") if line.strip() else None
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
            if isinstance(row, dict) and "instance_id" in row and isinstance(row.get("p@1"), (int, float)):
                rows[row["instance_id"]] = float(row["p@1"])
        if rows:
            out[f"{path.parent.name}/{path.stem}"] = dict(sorted(rows.items()))
    return out


HABITS_FILE = "habits.json"
"""Each policy's call habits on the evaluation split (:func:`habits`), saved beside ``per_instance.json``."""


def call_habits(episodes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What a policy did over saved episodes (``Episode.to_dict``): how many of each tool it called, how many
    episodes had a turn ended by a repeated call or a block that was not valid JSON, how many never submitted, the
    mean tokens of the first turn, and the mean rounds and generated tokens of an episode (what its evaluation costs).
    Counted, not judged: a diagnostic of why training seeds differ.

    >>> ep = {"submitted": True, "turns": [{"calls": [{"name": "grep"}, {"name": "glob"}], "completion_tokens": 90,
    ...        "errors": ["a call repeated an earlier call of this turn: the turn ended there"]},
    ...       {"calls": [{"name": "grep"}], "completion_tokens": 30, "errors": []}]}
    >>> bad = {"submitted": False, "turns": [{"calls": [], "completion_tokens": 256,
    ...        "errors": ["invalid JSON in <tool_call> (Expecting value at char 0): '{'"]}]}
    >>> h = call_habits([ep, bad])
    >>> h["episodes"], h["grep_calls"], h["glob_calls"], h["read_calls"], h["mean_turn1_tokens"]
    (2, 2, 1, 0, 173.0)
    >>> h["episodes_with_a_turn_ended_by_a_repeated_call"], h["episodes_with_invalid_json"], h["episodes_not_submitted"]
    (1, 1, 1)
    >>> h["mean_rounds"], h["mean_completion_tokens"]
    (1.5, 188.0)
    >>> call_habits([])["episodes"], call_habits([])["mean_rounds"]
    (0, None)
    """
    from collections import Counter

    from codegrep.agent.protocol import INVALID_JSON_ERROR, REPEAT_ERROR

    repeat = REPEAT_ERROR.split(":")[0]  # the message's fixed part
    episodes = [e for e in episodes if isinstance(e, dict)]
    calls: Counter = Counter()
    repeated = invalid = unsubmitted = 0
    first, rounds, generated = [], [], []
    for e in episodes:
        turns = [t for t in e.get("turns") or [] if isinstance(t, dict)]
        calls.update(c.get("name") for t in turns for c in t.get("calls") or [] if isinstance(c, dict))
        errors = [str(x) for t in turns for x in t.get("errors") or []]
        repeated += any(repeat in x for x in errors)
        invalid += any(x.startswith(INVALID_JSON_ERROR) for x in errors)
        unsubmitted += not e.get("submitted")
        if turns:
            first.append(int(turns[0].get("completion_tokens") or 0))
        rounds.append(len(turns))
        generated.append(sum(int(t.get("completion_tokens") or 0) for t in turns))
    return {"episodes": len(episodes), "grep_calls": calls.get("grep", 0), "glob_calls": calls.get("glob", 0),
            "read_calls": calls.get("read", 0), "episodes_with_a_turn_ended_by_a_repeated_call": repeated,
            "episodes_with_invalid_json": invalid, "episodes_not_submitted": unsubmitted,
            "mean_turn1_tokens": round(float(np.mean(first)), 1) if first else None,
            "mean_rounds": round(float(np.mean(rounds)), 2) if rounds else None,
            "mean_completion_tokens": round(float(np.mean(generated)), 1) if generated else None}


def habits(artifacts: Path) -> dict[str, dict[str, Any]]:
    """``{run/policy: call_habits}`` from the episodes notebook 03 saved (``artifacts/train/eval/<run>/<policy>/
    *.json``); empty when there are none. An unreadable episode file is one error naming it."""
    from codegrep.files import read_json_object

    out = {}
    for d in sorted(p for p in Path(artifacts).glob("train/eval/*/*") if p.is_dir()):
        files = sorted(d.glob("*.json"))
        if files:
            out[f"{d.parent.name}/{d.name}"] = call_habits(read_json_object(f) for f in files)
    return out


def read_habits(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """A run's call habits: a committed run's ``habits.json`` (``report --save-results``), else counted from a run's
    artifacts directory; ``{}`` where neither is there (runs saved before habits were kept)."""
    from codegrep.errors import UserError
    from codegrep.files import read_json_object

    run_dir = Path(run_dir)
    path = run_dir / HABITS_FILE
    if path.is_file():
        kept = read_json_object(path).get("habits")
        keys = set(call_habits([]))
        if not isinstance(kept, dict) or not all(isinstance(h, dict) and keys <= set(h) for h in kept.values()):
            raise UserError(f"{path}: 'habits' must map each run/policy to its counts ({', '.join(sorted(keys))})")
        return kept
    if (run_dir / "run.json").is_file():
        return habits(run_dir)
    return {}


def is_demos_result(doc: dict[str, Any]) -> bool:
    """Whether a JSON object is a ``codegrep bench demos --result`` file (held-out train tasks, not a run)."""
    return isinstance(doc.get("points"), list) and isinstance(doc.get("dev_ids"), list)


def demos_tables(doc: dict[str, Any], path: str | Path = "bench demos result") -> dict[str, dict[str, float]]:
    """``{policy: {task_id: P@1}}`` from one ``bench demos --result`` point: the warm start (``warm_start``) and the
    scripted expert it imitates (``scripted-expert``) on the held-out TRAIN tasks, so a seed study on training tasks
    (``--set train.sft_seed=S``, one file per seed) reads as one on evaluation instances does. A file of several
    points (``--tasks 10,20,40``) is refused: which point is the seed's would be a guess.

    >>> demos_tables({"dev_ids": ["a", "b"], "expert_per_task": [1.0, 0.0], "points": [{"per_task": [0.0, 1.0]}]})
    {'warm_start': {'a': 0.0, 'b': 1.0}, 'scripted-expert': {'a': 1.0, 'b': 0.0}}
    """
    from codegrep.errors import UserError

    points, ids = doc["points"], doc["dev_ids"]
    if len(points) != 1:
        raise UserError(f"{path}: holds {len(points)} points (one per --tasks size); a seed study reads one point "
                        "per file: run bench demos with one --tasks size")
    out = {}
    for policy, row in (("warm_start", points[0].get("per_task") if isinstance(points[0], dict) else None),
                        ("scripted-expert", doc.get("expert_per_task"))):
        if row is None:
            continue
        if not isinstance(row, list) or len(row) != len(ids):
            raise UserError(f"{path}: the {policy} row must be a list of one P@1 per dev task ({len(ids)}), got "
                            f"{type(row).__name__}{' of ' + str(len(row)) if isinstance(row, list) else ''}")
        out[policy] = dict(zip(map(str, ids), row))
    return out


def read_run(run_dir: str | Path) -> tuple[str, str, dict[str, dict[str, float]]]:
    """A run's name, short commit and per-instance P@1 tables (:func:`tables`): from a committed run's
    ``per_instance.json``, or, where there is none, from a run's artifacts directory (its ``run.json`` and evaluation
    rows, :func:`per_instance`; named after its parent when it is called ``artifacts``), or from a ``bench demos
    --result`` file (:func:`demos_tables`, named after the file). A file without tables or with a P@1 that is not a
    number is one error naming it."""
    from codegrep.errors import UserError
    from codegrep.files import read_json_object

    run_dir = Path(run_dir)
    if run_dir.is_file():
        doc = read_json_object(run_dir)
        if not is_demos_result(doc):
            raise UserError(f"{run_dir}: not a bench demos --result file (no 'points' and 'dev_ids'); give a run "
                            "directory (per_instance.json or run.json) or such a file")
        tab = demos_tables(doc, run_dir)
        _check_numbers(run_dir, {}, tab)
        if not tab:
            raise UserError(f"{run_dir}: its point has no 'per_task' row and there is no 'expert_per_task'")
        return run_dir.stem, str(doc.get("git_commit") or "")[:7], tab
    path = run_dir / "per_instance.json"
    if not path.is_file() and (run_dir / "run.json").is_file():  # a run's artifacts, straight from `reproduce --out`
        path = run_dir / "run.json"
        doc = {"run_commit": read_json_object(path).get("git_commit"), "p_at_1": per_instance(run_dir)}
        name = run_dir.parent.name if run_dir.name == "artifacts" and run_dir.parent.name else run_dir.name
    else:
        doc, name = read_json_object(path), run_dir.name
    tab = tables(doc)
    _check_numbers(path, doc, tab)
    if not tab:  # another file's shape is not a run without pairs (an empty table, exit 0)
        raise UserError(f"{path}: no per-instance P@1 tables (a 'p_at_1' object of policy -> {{instance_id: P@1}})")
    return name, str(doc.get("run_commit") or "")[:7], tab


def run_dirs(results: Path) -> list[Path]:
    """The committed run directories under ``results`` (``docs/results``) that hold a ``per_instance.json``: the
    headline run (the first of ``paper``, ``smoke``, ``ci`` present, as the README's table reads), then
    ``replicates/*`` by name. A smaller profile's run beside the headline one (ci's 2 instances beside smoke's 86)
    is another recipe at another scale, not a replicate, so it is not pooled with them.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> for d in ("smoke", "ci", "replicates/smoke_old"):
    ...     (root / d).mkdir(parents=True); _ = (root / d / "per_instance.json").write_text("{}")
    >>> [str(p.relative_to(root)) for p in run_dirs(root)]
    ['smoke', 'replicates/smoke_old']
    """
    own = [results / p for p in ("paper", "smoke", "ci") if (results / p / "per_instance.json").is_file()]
    return own[:1] + sorted(p.parent for p in (results / "replicates").glob("*/per_instance.json"))


def replicate_pairs(dirs: Iterable[Path], pairs: Iterable[tuple[str, str]] = PAIRS) -> dict[str, Any]:
    """Per run and pooled: P@1 of each policy of a pair and the instances won and lost, on the instances both have.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> for name, g in (("r1", {"a": 0.0, "b": 1.0}), ("r2", {"a": 0.0, "b": 0.0})):
    ...     (root / name).mkdir()
    ...     _ = (root / name / "per_instance.json").write_text(json.dumps(
    ...         {"run_commit": name, "p_at_1": {"x/GRPO": g, "x/warm_start": {"a": 1.0, "b": 1.0}}}))
    >>> out = replicate_pairs([root / "r1", root / "r2"], [("GRPO", "warm_start")])
    >>> out["pooled"]["GRPO vs warm_start"]["won"], out["pooled"]["GRPO vs warm_start"]["lost"]
    (0, 3)
    """
    runs, seen, pooled = [], set(), {}
    for d in dirs:
        name, commit, tab = read_run(d)
        row: dict[str, Any] = {"run": name, "commit": commit}
        for a, b in pairs:
            if a not in tab or b not in tab:
                continue
            key = f"{a} vs {b}"
            fingerprint = (key, json.dumps(tab[a], sort_keys=True), json.dumps(tab[b], sort_keys=True))
            won, lost, n = won_lost(tab[a], tab[b])
            common = tab[a].keys() & tab[b].keys()
            row[key] = {"won": won, "lost": lost, "n": n, "p_at_1": round(sum(tab[a][i] for i in common) / n, 6),
                        "p_at_1_against": round(sum(tab[b][i] for i in common) / n, 6),
                        "repeat_of_an_earlier_run": fingerprint in seen}
            if fingerprint not in seen:
                seen.add(fingerprint)
                total = pooled.setdefault(key, {"won": 0, "lost": 0, "n": 0, "runs": 0})
                total["won"] += won
                total["lost"] += lost
                total["n"] += n
                total["runs"] += 1
        runs.append(row)
    for total in pooled.values():
        total["sign_test_p"] = round(sign_test_p(total["won"], total["lost"]), 6)  # 6 digits: the lines round once
    return {"what": "instances won and lost per pair of policies on the same evaluation instances, per committed run "
                    "and pooled over distinct runs (exact two-sided sign test); the runs may differ in settings and "
                    "host (docs/training.md says what each is); SMALL samples: each run is one smoke run on the "
                    "evaluation split", "runs": runs, "pooled": pooled}


def replicates_text(doc: dict[str, Any]) -> str:
    """The pairs as lines a reader can scan: one per run and pair, then the pooled counts."""
    lines = []
    for row in doc["runs"]:
        for key, v in row.items():
            if isinstance(v, dict):
                again = " (same rows as an earlier run: not pooled)" if v["repeat_of_an_earlier_run"] else ""
                lines.append(f"{row['run']:<28} {key:<28} P@1 {v['p_at_1']:.3f} vs {v['p_at_1_against']:.3f}  "
                             f"won {v['won']:>2} lost {v['lost']:>2} of {v['n']}{again}")
    for key, v in doc["pooled"].items():
        lines.append(f"{'pooled (' + str(v['runs']) + ' runs)':<28} {key:<28} won {v['won']} lost {v['lost']} of "
                     f"{v['n']}, sign test p = {v['sign_test_p']:.3f}")
    return "\n".join(lines)


SEED_PAIRS = (("GRPO", "bm25"), ("GRPO", "grep-heuristic"), ("warm_start", "bm25"), ("GRPO", "warm_start"),
              ("warm_start", "scripted-expert"))
"""(policy, against) pairs :func:`seed_spread` summarises over training-seed replicates."""


def seed_spread(dirs: Iterable[Path], pairs: Iterable[tuple[str, str]] = SEED_PAIRS, n_boot: int = 2000,
                boot_seed: int = 0) -> dict[str, Any]:
    """Runs of ONE recipe at several training seeds (the same evaluation instances), summarised per pair: each run's
    P@1 of both sides and instances won/lost; over the runs, the policy's mean, range and standard deviation, how
    many runs reach the other side, and the seed-averaged paired difference (each instance's P@1 averaged over the
    runs, minus the other side's, also averaged) with a 95% bootstrap interval over instances. The interval is over
    instances GIVEN these seeds: the spread between seeds is the range, not a confidence statement (a few seeds).
    ``boot_seed`` seeds the bootstrap.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> for name, g in (("s0", {"a": 1.0, "b": 0.0, "c": 1.0}), ("s1", {"a": 1.0, "b": 1.0, "c": 0.0})):
    ...     (root / name).mkdir()
    ...     _ = (root / name / "per_instance.json").write_text(json.dumps(
    ...         {"run_commit": name, "p_at_1": {"x/GRPO": g, "eval/bm25": {"a": 1.0, "b": 0.0, "c": 0.0}}}))
    >>> out = seed_spread([root / "s0", root / "s1"], [("GRPO", "bm25")])
    >>> v = out["pairs"]["GRPO vs bm25"]
    >>> v["p_at_1"], v["p_at_1_min"], v["p_at_1_max"], v["runs_at_or_above"], v["diff"], [r["won"] for r in v["runs"]]
    (0.666667, 0.666667, 0.666667, 2, 0.333333, [1, 1])
    >>> [r["same_rows_as"] for r in v["runs"]]  # different rows at the same P@1: two seeds
    [None, None]
    """
    from codegrep.errors import UserError
    from codegrep.metrics import paired_bootstrap_diff

    dirs = [Path(d) for d in dirs]
    if len(dirs) < 2:
        raise UserError(f"--seeds: give at least two run directories (one recipe at two or more seeds), got {len(dirs)}")
    tabs = [read_run(d) for d in dirs]
    out: dict[str, Any] = {}
    for a, b in pairs:
        have = [(name, commit, tab) for name, commit, tab in tabs if a in tab and b in tab]
        if len(have) < 2:
            continue
        common = sorted(set.intersection(*(set(t[a]) & set(t[b]) for _, _, t in have)))
        if not common:
            raise UserError(f"--seeds: the runs share no evaluation instance for {a} vs {b}")
        runs, first = [], {}
        for name, commit, tab in have:
            won, lost, _ = won_lost({i: tab[a][i] for i in common}, {i: tab[b][i] for i in common})
            rows = json.dumps([tab[a][i] for i in common])
            same = first.get(rows)  # a seed that left this policy as it was (a stage the seeds share): said, kept
            if same is None:
                first[rows] = name
            runs.append({"run": name, "commit": commit, "p_at_1": round(float(np.mean([tab[a][i] for i in common])), 6),
                         "p_at_1_against": round(float(np.mean([tab[b][i] for i in common])), 6),
                         "won": won, "lost": lost, "same_rows_as": same, "n_own": len(set(tab[a]) & set(tab[b]))})
        mine = [float(np.mean([t[a][i] for _, _, t in have])) for i in common]
        theirs = [float(np.mean([t[b][i] for _, _, t in have])) for i in common]
        diff, lo, hi = paired_bootstrap_diff(theirs, mine, n_boot=n_boot, seed=boot_seed)
        values = [r["p_at_1"] for r in runs]
        out[f"{a} vs {b}"] = {
            "n_runs": len(runs), "n": len(common), "runs": runs,
            "p_at_1": round(float(np.mean(values)), 6), "p_at_1_min": min(values), "p_at_1_max": max(values),
            "p_at_1_sd": round(float(np.std(values, ddof=1)), 6),
            "p_at_1_against": round(float(np.mean(theirs)), 6),  # 6 digits: the lines' 3 are rounded once, not twice
            "runs_at_or_above": sum(r["p_at_1"] >= r["p_at_1_against"] for r in runs),
            "diff": round(diff, 6), "diff_lo": round(lo, 6), "diff_hi": round(hi, 6)}
    if not out:
        raise UserError("--seeds: no pair of " + ", ".join(f"{a} vs {b}" for a, b in pairs) + " is in two or more of "
                        "the runs (their per_instance.json tables: " + "; ".join(
                            f"{name}: {', '.join(sorted(tab)) or 'none'}" for name, _, tab in tabs) + ")")
    return {"what": "one recipe at several training seeds on the same evaluation instances: per run P@1 and won/lost; "
                    "over runs the mean, range and SD of the policy's P@1 and the seed-averaged paired difference with "
                    "a 95% bootstrap interval over instances (given these seeds; SMALL: a few seeds, one split)",
            "runs": [name for name, _, _ in tabs], "pairs": out,
            "habits": {name: {policy_name(k): v for k, v in read_habits(d).items()}
                       for d, (name, _, _) in zip(dirs, tabs) if d.is_dir()}}  # a bench demos file keeps none


def seed_disagreement(table: list[list[float]]) -> list[float]:
    """Per instance, the mean over pairs of runs of how far their P@1 differ (with 0/1 P@1: the share of seed pairs
    that disagree on it). ``table[r][i]`` is run r's P@1 on instance i. Fewer than two runs: all 0.

    >>> seed_disagreement([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    [0.0, 0.666667, 0.666667]
    """
    runs = len(table)
    pairs = [(r, t) for r in range(runs) for t in range(r + 1, runs)]
    if not pairs:
        return [0.0] * (len(table[0]) if table else 0)
    return [round(sum(abs(table[r][i] - table[t][i]) for r, t in pairs) / len(pairs), 6) for i in range(len(table[0]))]


RECIPE_POLICIES = ("warm_start", "GRPO")
"""Policies :func:`recipe_comparison` compares between two recipes' seed sets."""


def recipe_comparison(dirs: Iterable[Path], against: Iterable[Path], policies: Iterable[str] = RECIPE_POLICIES,
                      n_boot: int = 2000, boot_seed: int = 0) -> dict[str, Any]:
    """Two recipes, each at several training seeds, on the same evaluation instances: per policy, each recipe's mean,
    range and SD of P@1 over its seeds and its seed disagreement (:func:`seed_disagreement`, averaged over instances),
    then this recipe minus the other, paired over instances, with 95% bootstrap intervals: of the seed-averaged P@1
    and of the disagreement (how much the seed moves an instance). Intervals are over instances GIVEN these seeds.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> for name, g in (("a0", [1, 0, 1, 0]), ("a1", [0, 1, 1, 0]), ("b0", [1, 1, 1, 0]), ("b1", [1, 1, 1, 0])):
    ...     (root / name).mkdir()
    ...     _ = (root / name / "per_instance.json").write_text(json.dumps({"run_commit": name, "p_at_1": {
    ...         "x/GRPO": dict(zip("abcd", map(float, g)))}}))
    >>> v = recipe_comparison([root / "b0", root / "b1"], [root / "a0", root / "a1"])["policies"]["GRPO"]
    >>> v["this"]["p_at_1"], v["other"]["p_at_1"], v["diff"], v["this"]["disagreement"], v["other"]["disagreement"]
    (0.75, 0.5, 0.25, 0.0, 0.5)
    >>> v["disagreement_diff"], v["n"]
    (-0.5, 4)
    """
    from codegrep.errors import UserError
    from codegrep.metrics import paired_bootstrap_diff

    this, other = [read_run(d) for d in dirs], [read_run(d) for d in against]
    if len(this) < 2 or len(other) < 2:
        raise UserError(f"--seeds-against: each recipe needs two or more runs (got {len(this)} and {len(other)})")
    out: dict[str, Any] = {}
    for policy in policies:
        have = [[tab[policy] for _, _, tab in runs if policy in tab] for runs in (this, other)]
        if min(map(len, have)) < 2:
            continue
        common = sorted(set.intersection(*(set(t) for t in have[0] + have[1])))
        if not common:
            raise UserError(f"--seeds-against: the two recipes' runs share no evaluation instance for {policy}")
        sides = {}
        for side, tabs in zip(("this", "other"), have):
            table = [[t[i] for i in common] for t in tabs]
            raw = [float(np.mean(r)) for r in table]
            per_run = [round(v, 6) for v in raw]
            sides[side] = {"runs": len(table), "p_at_1_runs": per_run, "p_at_1": round(float(np.mean(raw)), 6),
                           "p_at_1_min": min(per_run), "p_at_1_max": max(per_run),
                           "p_at_1_sd": round(float(np.std(raw, ddof=1)), 6),
                           "per_instance": [float(np.mean(c)) for c in zip(*table)],
                           "per_instance_disagreement": seed_disagreement(table)}
            sides[side]["disagreement"] = round(float(np.mean(sides[side]["per_instance_disagreement"])), 6)
        diff, lo, hi = paired_bootstrap_diff(sides["other"].pop("per_instance"), sides["this"].pop("per_instance"),
                                             n_boot=n_boot, seed=boot_seed)
        ddiff, dlo, dhi = paired_bootstrap_diff(sides["other"].pop("per_instance_disagreement"),
                                                sides["this"].pop("per_instance_disagreement"), n_boot=n_boot,
                                                seed=boot_seed)
        out[policy] = {"n": len(common), **sides, "diff": round(diff, 6), "diff_lo": round(lo, 6),
                       "diff_hi": round(hi, 6), "disagreement_diff": round(ddiff, 6),
                       "disagreement_diff_lo": round(dlo, 6), "disagreement_diff_hi": round(dhi, 6)}
    if not out:
        raise UserError("--seeds-against: no policy of " + ", ".join(policies) + " is in two or more runs of each recipe")
    return {"what": "this recipe (--seeds) against another (--seeds-against), each at several training seeds, on the "
                    "instances every run has: per recipe the mean, range and SD of P@1 over seeds and the seed "
                    "disagreement (mean over seed pairs of the share of instances whose P@1 differs); this minus the "
                    "other paired over instances with 95% bootstrap intervals (given these seeds; SMALL)",
            "this": [name for name, _, _ in this], "other": [name for name, _, _ in other], "policies": out}


def recipe_comparison_text(doc: dict[str, Any]) -> str:
    """:func:`recipe_comparison` as lines, one per policy and recipe, then the differences."""
    lines = []
    for policy, v in doc["policies"].items():
        for side, label in (("this", "this recipe"), ("other", "other recipe")):
            r = v[side]
            lines.append(f"{policy:<11} {label:<13} {r['runs']} seeds: P@1 {r['p_at_1']:.3f} (range "
                         f"{r['p_at_1_min']:.3f}-{r['p_at_1_max']:.3f}, SD {r['p_at_1_sd']:.3f}); seed pairs "
                         f"disagree on {r['disagreement']:.1%} of the {v['n']} instances")
        lines.append(f"{policy:<11} this - other: seed-averaged P@1 {v['diff']:+.3f} [{v['diff_lo']:+.3f}, "
                     f"{v['diff_hi']:+.3f}]; disagreement {v['disagreement_diff']:+.3f} "
                     f"[{v['disagreement_diff_lo']:+.3f}, {v['disagreement_diff_hi']:+.3f}] (95% over instances)")
    return "\n".join(lines)


def seed_spread_text(doc: dict[str, Any]) -> str:
    """:func:`seed_spread` as lines: per pair, each run, then the summary."""
    lines = []
    for key, v in doc["pairs"].items():
        for r in v["runs"]:
            lines.append(f"{r['run']:<36} {key:<26} P@1 {r['p_at_1']:.3f} vs {r['p_at_1_against']:.3f}  "
                         f"won {r['won']:>2} lost {r['lost']:>2} of {v['n']}")
        same = [f"{r['run']} = {r['same_rows_as']}" for r in v["runs"] if r["same_rows_as"]]
        more = [f"{r['run']} has {r['n_own']}" for r in v["runs"] if r["n_own"] != v["n"]]
        if more:
            lines.append(f"{key}: the runs differ in instances; each is read on the {v['n']} all have ("
                         + ", ".join(more) + ")")
        lines.append(f"{'over ' + str(v['n_runs']) + ' seeds':<36} {key:<26} P@1 {v['p_at_1']:.3f} "
                     f"(range {v['p_at_1_min']:.3f}-{v['p_at_1_max']:.3f}) vs {v['p_at_1_against']:.3f}; "
                     f"{v['runs_at_or_above']} of {v['n_runs']} at or above; seed-averaged diff {v['diff']:+.3f} "
                     f"[{v['diff_lo']:+.3f}, {v['diff_hi']:+.3f}]"
                     + (f" (identical rows: {'; '.join(same)}; the same P@1 on every instance, from a stage the seeds "
                        "share or from seeds that converge: check which before reading the range)" if same else ""))
    for run, by_policy in (doc.get("habits") or {}).items():
        for policy, h in by_policy.items():
            lines.append(f"{run:<36} {policy:<26} habits: grep {h['grep_calls']}, glob {h['glob_calls']}, read "
                         f"{h['read_calls']}; episodes with a repeated call {h['episodes_with_a_turn_ended_by_a_repeated_call']}"
                         f", invalid JSON {h['episodes_with_invalid_json']}, no submit {h['episodes_not_submitted']} "
                         f"of {h['episodes']}; {h['mean_rounds']} rounds, {h['mean_completion_tokens']} tokens written "
                         "an episode")
        if not by_policy:
            lines.append(f"{run:<36} habits not kept (saved before report --save-results wrote {HABITS_FILE})")
    return "\n".join(lines)


def from_demos(pairs: dict[str, Any]) -> bool:
    """Whether :func:`seed_spread`'s pairs come from ``bench demos`` points (held-out TRAIN tasks, the scripted expert
    the baseline) rather than runs (the 86, BM25 the baseline): the one place the figures and their notes decide it.

    >>> from_demos({"warm_start vs scripted-expert": {}}), from_demos({"GRPO vs bm25": {}, "warm_start vs bm25": {}})
    (True, False)
    """
    return any(k.endswith(" vs scripted-expert") for k in pairs)  # a run never has the scripted expert's rows


def seed_figure(doc: dict[str, Any], path: str | Path) -> Path:
    """:func:`seed_spread`'s figure, two panels: (a) each run's warm start and GRPO P@1 with 95% Wilson intervals
    over its instances, BM25's and the grep heuristic's P@1 as lines (no training: the same in every run);
    (b) each pair's seed-averaged paired difference with its 95% bootstrap interval over instances. Saved with
    :func:`codegrep.plots.save` (PNG or SVG by suffix)."""
    from codegrep import plots
    from codegrep.claims import wilson
    from codegrep.errors import UserError

    pairs = doc["pairs"]
    base = "scripted-expert" if from_demos(pairs) else "bm25"
    shown = [(p, f"{p} vs {base}") for p in ("warm_start", "GRPO") if f"{p} vs {base}" in pairs]
    if not shown:
        raise UserError("--seeds-plot: the runs have no warm_start or GRPO rows beside bm25 (or the scripted expert) "
                        "to draw")
    names = list(dict.fromkeys(r["run"] for _, key in shown for r in pairs[key]["runs"]))
    n = pairs[shown[0][1]]["n"]
    fig, (ax, bx) = plots.subplots(1, 2, width=max(9.0, 4.5 + 0.8 * len(names)), height=3.8,
                                   gridspec_kw={"width_ratios": [max(2, len(names)), 2]})
    low = []
    for j, (policy, key) in enumerate(shown):
        v = pairs[key]
        xs = [names.index(r["run"]) + (j - 0.5) * 0.2 for r in v["runs"]]
        ys = [r["p_at_1"] for r in v["runs"]]
        cis = [wilson(round(y * v["n"]), v["n"]) for y in ys]
        low += [lo for lo, _ in cis]
        ax.errorbar(xs, ys, yerr=[[y - lo for y, (lo, _) in zip(ys, cis)], [hi - y for y, (_, hi) in zip(ys, cis)]],
                    fmt="os"[j], color=plots.PALETTE[j], capsize=3, label=policy.replace("_", " "))
    lines = {"BM25" if base == "bm25" else "scripted expert": shown[-1][1],
             "grep heuristic": next((k for k in pairs if k.endswith(" vs grep-heuristic")), None)}
    varies = False
    for k, (label, key) in enumerate(lines.items()):  # a baseline's P@1 (the other side of a pair), where there is one
        if key is not None:
            varies |= len({r["p_at_1_against"] for r in pairs[key]["runs"]}) > 1  # said on the legend, not hidden
            ax.axhline(pairs[key]["p_at_1_against"], color=plots.PALETTE[2 + k], linestyle="--", linewidth=1.2,
                       label=f"{label} ({pairs[key]['p_at_1_against']:.3f})")
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right")
    ax.set_ylabel("P@1 (first file gold)")
    ax.set_ylim(max(0.0, min(low) - 0.14), min(1.0, max(pairs[k]["p_at_1_max"] for k in pairs) + 0.15))
    ax.legend(loc="lower center", ncol=4, fontsize=7, framealpha=0.9,  # inside, in the room left under the bars
              title="points: 95% Wilson CI per run; lines: " + ("the mean over runs (they differ between runs)"
                                                                   if varies else "no training, the same in every run"),
              title_fontsize=7)
    plots.title(ax, "(a) P@1 per training seed", data="real", n=n)
    rows = [k for k in ("GRPO vs bm25", "warm_start vs bm25", "GRPO vs grep-heuristic", "GRPO vs warm_start",
                        "warm_start vs scripted-expert") if k in pairs]
    for y, key in enumerate(rows):
        v = pairs[key]
        bx.errorbar([v["diff"]], [y], xerr=[[v["diff"] - v["diff_lo"]], [v["diff_hi"] - v["diff"]]], fmt="o",
                    color="0.2", capsize=3)
        bx.annotate(f"{v['diff']:+.3f}", (v["diff"], y), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize=7)
    bx.axvline(0, color="0.5", linewidth=1)
    words = {"bm25": "BM25", "grep-heuristic": "grep heuristic", "warm_start": "warm start",
             "scripted-expert": "scripted expert"}
    bx.set_yticks(range(len(rows)), [" − ".join(words.get(p, p) for p in k.split(" vs ")) for k in rows])
    bx.set_ylim(-0.6, len(rows) - 0.4)
    bx.invert_yaxis()
    bx.set_xlabel("seed-averaged P@1 difference")
    runs = pairs[rows[0]]["n_runs"]
    plots.title(bx, f"(b) mean over {runs} seeds, paired", data="95% bootstrap CI over instances")
    plots.mark_source(fig, "measured", "one smoke run per seed; SMALL: a few seeds, one evaluation split"
                      if base == "bm25" else "one bench demos point per seed, held-out TRAIN tasks; SMALL: a few seeds")
    out = plots.save(fig, path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out


def recipe_figure(doc: dict[str, Any], path: str | Path, labels: tuple[str, str] = ("this recipe", "other recipe"),
                  baselines: dict[str, float] | None = None,
                  note: str = "one smoke run per seed and recipe; SMALL: a few seeds, one evaluation split") -> Path:
    """:func:`recipe_comparison`'s figure, two panels: (a) each seed's P@1 under each recipe, per policy (a dot per
    seed, a bar at the mean), with the baselines' P@1 as lines; (b) this recipe minus the other, paired over
    instances with 95% bootstrap intervals: seed-averaged P@1 and seed disagreement, per policy. ``labels`` names
    the two recipes; ``note`` says what a seed's point is. Saved with :func:`codegrep.plots.save`."""
    from codegrep import plots

    pols = list(doc["policies"])
    fig, (ax, bx) = plots.subplots(1, 2, width=10.0, height=4.0, gridspec_kw={"width_ratios": [3, 2]})
    for j, (side, label) in enumerate((("other", labels[1]), ("this", labels[0]))):
        for k, policy in enumerate(pols):
            r = doc["policies"][policy][side]
            x = 2 * k + j
            ax.scatter([x] * len(r["p_at_1_runs"]), r["p_at_1_runs"], color=plots.PALETTE[j], zorder=3,
                       label=f"{label}: one dot per seed" if k == 0 else None)
            ax.hlines(r["p_at_1"], x - 0.3, x + 0.3, color=plots.PALETTE[j], linewidth=2)
            ax.annotate(f"{r['disagreement']:.0%} flip", (x, r["p_at_1_min"]), textcoords="offset points",
                        xytext=(0, -14), ha="center", fontsize=7, color="0.3")
    for k, (name, value) in enumerate((baselines or {}).items()):
        ax.axhline(value, color=plots.PALETTE[2 + k], linestyle="--", linewidth=1.2, label=f"{name} ({value:.3f})")
    ax.set_xticks([2 * k + 0.5 for k in range(len(pols))], [p.replace("_", " ") for p in pols])
    ax.set_xlim(-0.7, 2 * len(pols) - 0.3)
    lows = [doc["policies"][p][s_]["p_at_1_min"] for p in pols for s_ in ("this", "other")]
    highs = [doc["policies"][p][s_]["p_at_1_max"] for p in pols for s_ in ("this", "other")]
    ax.set_ylim(max(0.0, min(lows + list((baselines or {}).values())) - 0.1), min(1.0, max(highs) + 0.05))
    ax.set_ylabel("P@1 (first file gold)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, fontsize=7, framealpha=0.9,
              title="bar: mean over seeds; flip: share of instances on which two seeds disagree", title_fontsize=7)
    n = doc["policies"][pols[0]]["n"]
    plots.title(ax, "(a) P@1 per training seed, two recipes", data="real", n=n)
    rows = [(f"{p.replace('_', ' ')}: P@1", p, "diff") for p in pols] + [
        (f"{p.replace('_', ' ')}: disagreement", p, "disagreement_diff") for p in pols]
    for y, (_, policy, key) in enumerate(rows):
        v = doc["policies"][policy]
        bx.errorbar([v[key]], [y], xerr=[[v[key] - v[f"{key}_lo"]], [v[f"{key}_hi"] - v[key]]], fmt="o", color="0.2",
                    capsize=3)
        bx.annotate(f"{v[key]:+.3f}", (v[key], y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    bx.axvline(0, color="0.5", linewidth=1)
    bx.set_yticks(range(len(rows)), [r[0] for r in rows])
    bx.set_ylim(-0.6, len(rows) - 0.4)
    bx.invert_yaxis()
    bx.set_xlabel(f"{labels[0]} minus {labels[1]}")
    plots.title(bx, "(b) difference, paired over instances", data="95% bootstrap CI over instances")
    plots.mark_source(fig, "measured", note)
    out = plots.save(fig, path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out
