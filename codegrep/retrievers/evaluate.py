"""One harness for every retriever: a row per instance, macro metrics, resume, Acc@k curves.

Ranking metrics (acc@k, recall@5, mrr, P@1/P@2/P@3, the Acc@k curve) use the retriever's ranking (top
``RANKED_N``; for the agent, its submitted list in order); set metrics (precision, recall, F) use the returned
set: the ranking cut at ``k`` for fixed-size retrievers, or what the agent submitted when ``k`` is None.

``P@j`` = gold files among the first ``j`` ranked / ``j`` (a ranking shorter than ``j`` still divides by ``j``).
:func:`comparison_table` compares retrievers on the same instances, adding precision and recall at the agent's
own set size, with paired bootstrap intervals against a reference retriever.
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from codegrep import BatchRetriever, Retriever
from codegrep.data.tasks import Task
from codegrep.metrics import acc_at_k, bootstrap_ci, dedupe, instance_metrics, macro_average, paired_bootstrap_diff
from codegrep.retrievers.base import Retrieval
from codegrep.quiet import show_bar

RANKED_N = 20
"""Length of the ranking stored in each row (enough for Acc@k curves up to 20)."""
SET_KEYS = ("precision", "recall", "f1", "f0.5", "n_pred")
PRECISION_AT = (1, 2, 3)
"""The P@j every row and summary carries."""
MACRO_KEYS = ("n", "precision", "recall", "f1", "f0.5", "acc@1", "acc@5", "recall@5", "mrr", "p@1", "p@2", "p@3",
              "mean_files", "mean_rounds", "mean_tool_calls", "mean_tokens")


def precision_at(ranked: Sequence[str], gold: Sequence[str], j: int) -> float:
    """Gold files among the first ``j`` ranked, divided by ``j``.

    >>> precision_at(["a", "x", "b"], ["a", "b"], 2), precision_at(["a"], ["a"], 3)
    (0.5, 0.3333333333333333)
    """
    g = set(gold)
    return sum(f in g for f in dedupe(ranked)[:j]) / j


def recall_within(ranked: Sequence[str], gold: Sequence[str], j: int) -> float:
    """Share of the gold files among the first ``j`` ranked.

    >>> recall_within(["a", "x", "b"], ["a", "b"], 2)
    0.5
    """
    g = set(gold)
    return sum(f in g for f in dedupe(ranked)[:j]) / len(g) if g else 0.0


def score_row(task: Task, retrieval: Retrieval, k: int | None, retriever: str) -> dict[str, Any]:
    """The result row of one instance.

    >>> t = Task("i", "o/r", "c" * 40, "issue", gold_files=["a.py"])
    >>> r = score_row(t, Retrieval(files=["x.py", "a.py", "y.py"]), 1, "bm25")
    >>> r["files"], r["precision"], r["acc@5"], r["mrr"], r["n_pred"]
    (['x.py'], 0.0, 1.0, 0.5, 1)
    """
    ranked = dedupe(retrieval.files)[:RANKED_N]
    files = ranked[:k] if k else ranked
    gold = dedupe(task.gold_files)
    metrics = instance_metrics(ranked, gold)
    set_metrics = instance_metrics(files, gold)
    metrics.update({key: set_metrics[key] for key in SET_KEYS})
    metrics.update({f"p@{j}": precision_at(ranked, gold, j) for j in PRECISION_AT})
    extra = {key: v for key, v in retrieval.extra.items() if key in ("episode_path", "n_indexed", "n_chunks",
                                                                        "format_errors", "submitted")}
    return {"instance_id": task.instance_id, "repo": task.repo, "base_commit": task.base_commit,
            "retriever": retriever, "k": k, "files": files, "ranked": ranked, "gold": gold, **metrics,
            "rounds": retrieval.rounds, "tool_calls": retrieval.tool_calls, "tokens": retrieval.tokens,
            "seconds": round(retrieval.seconds, 4), "extra": extra}


def rescore(row: dict[str, Any], k: int | None) -> dict[str, Any]:
    """A stored row with its set metrics recomputed at another ``k`` (the ranking is kept in the row).

    >>> row = score_row(Task("i", "o/r", "c", "x", gold_files=["a.py"]), Retrieval(files=["a.py", "b.py"]), 1, "bm25")
    >>> rescore(row, 2)["precision"], rescore(row, 2)["files"]
    (0.5, ['a.py', 'b.py'])
    """
    if row.get("k") == k:
        return row
    files = row["ranked"][:k] if k else row["ranked"]
    set_metrics = instance_metrics(files, row["gold"])
    return {**row, "k": k, "files": files, **{key: set_metrics[key] for key in SET_KEYS}}


def macro_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The harness's summary: exactly ``MACRO_KEYS``.

    >>> m = macro_metrics([{"precision": 1.0, "recall": 1.0, "f1": 1.0, "f0.5": 1.0, "acc@1": 1.0, "acc@5": 1.0,
    ...                     "recall@5": 1.0, "mrr": 1.0, "n_pred": 1, "rounds": 2, "tool_calls": 4, "tokens": 10},
    ...                    {"precision": 0.0, "recall": 0.0, "f1": 0.0, "f0.5": 0.0, "acc@1": 0.0, "acc@5": 0.0,
    ...                     "recall@5": 0.0, "mrr": 0.0, "n_pred": 3, "rounds": 0, "tool_calls": 0, "tokens": 0}])
    >>> m["n"], m["precision"], m["mean_files"], m["mean_tool_calls"], list(m) == list(MACRO_KEYS)
    (2, 0.5, 2.0, 2.0, True)
    """
    renamed = {"n_pred": "mean_files", "rounds": "mean_rounds", "tool_calls": "mean_tool_calls",
               "tokens": "mean_tokens"}
    rows = [_with_precision_at(r) for r in rows]
    avg = macro_average(list(rows), keys=list(MACRO_KEYS[1:12]) + list(renamed))
    out = {key: avg.get(key, float("nan")) for key in MACRO_KEYS[:12]}
    out.update({new: avg.get(old, float("nan")) for old, new in renamed.items()})
    out["n"] = len(rows)
    return {key: out[key] for key in MACRO_KEYS}


def _with_precision_at(row: dict[str, Any]) -> dict[str, Any]:
    """A row with ``p@j`` filled from its ranking when it lacks them (rows written before they existed)."""
    if all(f"p@{j}" in row for j in PRECISION_AT) or "ranked" not in row:
        return row
    return {**row, **{f"p@{j}": precision_at(row["ranked"], row["gold"], j) for j in PRECISION_AT}}


def acc_curve(rows: Iterable[dict[str, Any]], max_k: int = RANKED_N) -> list[float]:
    """Mean Acc@k for k = 1..max_k over the stored rankings.

    >>> acc_curve([{"ranked": ["x", "a"], "gold": ["a"]}, {"ranked": ["b"], "gold": ["b"]}], 3)
    [0.5, 1.0, 1.0]
    """
    rows = list(rows)
    if not rows:
        return []
    return [sum(acc_at_k(r["ranked"], r["gold"], k) for r in rows) / len(rows) for k in range(1, max_k + 1)]


ROW_TYPES: dict[str, tuple[type, ...]] = {
    "retriever": (str,), "fingerprint": (str,), "files": (list,), "ranked": (list,), "gold": (list,),
    **{key: (int, float, type(None)) for key in ("precision", "recall", "f1", "f0.5", "acc@1", "acc@5", "recall@5",
                                                 "mrr", "n_pred", "rounds", "tool_calls", "tokens", "seconds")}}
"""Types a stored results row must have where it has the field (a wrong type is refused, never read as text)."""
SETTINGS_ATTRS = ("config", "spec", "agent_config", "env_config", "top_n")
"""Retriever attributes that make its settings (part of each row's fingerprint)."""


def _plain(value: Any) -> Any:
    """A JSON-able copy of settings: dataclasses as dicts, paths as text, objects by their type name."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value) if isinstance(value, Path) else type(value).__name__


def fingerprint(task: Task, retriever: Any) -> str:
    """What a stored row was computed from: the task row's content and the retriever's name and settings.

    A resumed row is reused only when its fingerprint is this one; otherwise it is recomputed.

    >>> t = Task("i", "o/r", "c" * 40, "issue", gold_files=["a.py"])
    >>> class R: name = "bm25"
    >>> fingerprint(t, R()) == fingerprint(Task("i", "o/r", "c" * 40, "issue", gold_files=["a.py"]), R())
    True
    >>> fingerprint(t, R()) == fingerprint(Task("i", "o/r", "c" * 40, "issue", gold_files=["b.py"]), R())
    False
    """
    import hashlib

    settings = {a: _plain(getattr(retriever, a)) for a in SETTINGS_ATTRS if hasattr(retriever, a)}
    blob = json.dumps({"task": _plain(task.to_dict()), "retriever": getattr(retriever, "name", "?"),
                       "settings": settings}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _check_row(path: Path, lineno: int, row: Any) -> None:
    from codegrep.errors import UserError

    if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
        raise UserError(f"{path}:{lineno}: not a results row (an object with an 'instance_id'); the file was "
                        "left as it is: fix or delete that line to resume")
    for key, types in ROW_TYPES.items():
        value = row.get(key)
        if key in row and (not isinstance(value, types) or isinstance(value, bool) and bool not in types):
            raise UserError(f"{path}:{lineno}: field {key!r} must be {' or '.join(t.__name__ for t in types)}, got "
                            f"{type(value).__name__}; the file was left as it is: fix or delete that line to resume")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise UserError(f"{path}:{lineno}: field {key!r} must be a list of paths; the file was left as it is: "
                            "fix or delete that line to resume")


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    """Rows already in a results file, last one per instance winning (a rerun supersedes).

    Every row is checked (JSON object, ``instance_id``, the types of ``ROW_TYPES``) before anything is reused;
    a bad row is an error naming ``file:line``, except the partial last row a killed run left (dropped).
    """
    from codegrep.errors import UserError
    from codegrep.files import output_file

    rows: dict[str, dict[str, Any]] = {}
    if not output_file(path, "results file").is_file():
        return rows
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    last = len(lines) if data.endswith(b"\n") else len(lines) - 1  # ... or the partial row a killed run left
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            if lineno > last:  # the last row of a run killed mid-write: rerun that instance
                continue
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise UserError(f"{path}:{lineno}: not a JSON row ({reason}); the file was left as it is: fix or "
                            "delete that line to resume") from None
        _check_row(path, lineno, row)
        rows[row["instance_id"]] = row
    return rows


@contextlib.contextmanager
def _no_empty_partial(partial: Path, done: dict[str, Any]) -> Iterator[None]:
    """A run stopped before any row was kept or computed (``done`` empty: the first task's repository missing,
    Ctrl-C) removes its ``.partial`` file: it holds nothing for a next run to resume, and was left beside ``--out``."""
    try:
        yield
    except BaseException:
        if not done:
            partial.unlink(missing_ok=True)
        raise


def partial_path(out_path: Path) -> Path:
    """Where rows stream while a run is going (renamed over ``out_path``'s content when it completes)."""
    return out_path.with_name(f".{out_path.name}.partial")


@contextlib.contextmanager
def _checkout(task: Task, resolver: Any, pool: Any, needed: bool):
    if not needed:
        yield None
        return
    git_dir = resolver.resolve(task.repo, task.base_commit)
    with pool.acquire(git_dir, task.base_commit) as path:
        yield Path(path)


def _default_pool():
    """The process's shared pool under the cache directory (``codegrep.env.pool.default_pool``) for a caller that
    passed none; a profile's callers pass theirs (``WorktreePool.from_config(cfg["env"])``)."""
    from codegrep.env.pool import default_pool

    return default_pool()


def evaluate(tasks: Sequence[Task], resolver: Any, retriever: Retriever, out_path: str | Path,
             k: int | None = None, limit: int | None = None, workers: int = 1, pool: Any = None,
             progress: bool = True, resume: dict[str, int] | None = None) -> dict[str, float]:
    """Run ``retriever`` on every task, one row per instance in ``out_path``, and return the macro metrics over
    all requested tasks.

    A :class:`codegrep.BatchRetriever` with a ``batch_size`` above 1 (the agent: episodes in lock step, one
    batched generate per turn) gets its tasks in batches of that size, ordered by its ``batch_order`` key, one
    checkout each; ``workers`` is then not used (the batch is the parallelism).

    Resume: a row already in ``out_path`` is reused only when its ``fingerprint`` (the task row's content and
    the retriever's settings) is this run's; any other row of a requested task is recomputed. New rows stream
    to a hidden ``.<name>.partial`` sibling (a killed run's rows are reused from it next time) and ``out_path``
    is replaced atomically when the run completes, so it is never half-written; one run at a time writes it (a second
    one fails at once, naming the first's pid: ``codegrep.files.single_writer``). ``resume``, when given, receives
    the counts ``reused`` / ``recomputed`` / ``new`` (also said on stderr when something was recomputed).
    """
    from codegrep.files import single_writer

    with single_writer(out_path, "evaluation"):  # a second run on this output fails at once, naming this one's pid
        return _evaluate(tasks, resolver, retriever, Path(out_path), k, limit, workers, pool, progress, resume)


def _evaluate(tasks: Sequence[Task], resolver: Any, retriever: Retriever, out_path: Path, k: int | None,
              limit: int | None, workers: int, pool: Any, progress: bool, resume: dict[str, int] | None,
              ) -> dict[str, float]:
    """:func:`evaluate` while holding its output's writer lock."""
    import sys

    from tqdm.auto import tqdm

    from codegrep.files import atomic_write, write_errors

    tasks = list(tasks)[:limit] if limit else list(tasks)
    partial = partial_path(out_path)
    stored = read_rows(out_path)  # checks the whole file before anything is changed
    streamed = read_rows(partial)
    for path, rows in ((out_path, stored), (partial, streamed)):  # name the file that holds them: a stopped run's
        others = sorted({str(r.get("retriever")) for r in rows.values()} - {retriever.name})  # rows are hidden
        if others:
            left = f" (the rows a stopped run left for {out_path}: delete it to start over)" if path == partial else ""
            raise ValueError(f"{path} holds results of retriever(s) {others}, not {retriever.name!r}{left}: "
                             "use another --out")
    prints = {t.instance_id: fingerprint(t, retriever) for t in tasks}
    done: dict[str, dict[str, Any]] = {}
    counts = {"reused": 0, "recomputed": 0, "new": 0}
    for t in tasks:
        row = streamed.get(t.instance_id) or stored.get(t.instance_id)
        if row is not None and row.get("fingerprint") == prints[t.instance_id]:
            done[t.instance_id] = row
            counts["reused"] += 1
        else:
            counts["recomputed" if t.instance_id in stored or t.instance_id in streamed else "new"] += 1
    if counts["recomputed"]:
        print(f"evaluate: {counts['recomputed']} stored row(s) of {out_path} were made for other task content or "
              "retriever settings: recomputed", file=sys.stderr)
    if resume is not None:
        resume.update(counts)
    todo = sorted((t for t in tasks if t.instance_id not in done), key=lambda t: (t.repo, t.base_commit))
    needed = getattr(retriever, "needs_checkout", True)
    pool = pool if pool is not None or not needed or not todo else _default_pool()
    lock = threading.Lock()

    def run_one(task: Task) -> dict[str, Any]:
        start = time.perf_counter()
        with _checkout(task, resolver, pool, needed) as checkout:
            retrieval = retriever.retrieve(task, checkout)
        retrieval.seconds = retrieval.seconds or time.perf_counter() - start
        return {**score_row(task, retrieval, k, retriever.name), "fingerprint": prints[task.instance_id]}

    batch = int(retriever.batch_size) if isinstance(retriever, BatchRetriever) else 1
    if batch > 1:  # tasks of similar cost together, in the retriever's order
        todo = sorted(todo, key=retriever.batch_order)

    def run_batch(group: list[Task]) -> list[dict[str, Any]]:
        start = time.perf_counter()
        with contextlib.ExitStack() as stack:
            checkouts = [stack.enter_context(_checkout(t, resolver, pool, needed)) for t in group]
            retrievals = retriever.retrieve_batch(group, checkouts)
        rows = []
        for task, retrieval in zip(group, retrievals):
            retrieval.seconds = retrieval.seconds or (time.perf_counter() - start) / len(group)
            rows.append({**score_row(task, retrieval, k, retriever.name), "fingerprint": prints[task.instance_id]})
        return rows

    if todo:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(partial, "w", label=out_path, encoding="utf-8") as fh:  # rows kept so far, then new ones
            for row in done.values():
                fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
        kept = f"; {out_path} is as it was, and the rows computed so far are kept for the next run to resume"
        with _no_empty_partial(partial, done), write_errors(out_path, kept), \
                partial.open("a", encoding="utf-8") as fh, \
                tqdm(total=len(todo), desc=f"evaluate {retriever.name}",
                     disable=not show_bar(progress)) as bar:
            def record(row: dict[str, Any]) -> None:
                with lock:
                    fh.write(json.dumps(row, default=str) + "\n")
                    fh.flush()
                    done[row["instance_id"]] = row
                    bar.update(1)

            if batch > 1:
                for i in range(0, len(todo), batch):
                    for row in run_batch(todo[i:i + batch]):
                        record(row)
            elif workers <= 1:
                for task in todo:
                    record(run_one(task))
            else:
                with ThreadPoolExecutor(max_workers=workers) as ex:
                    for fut in as_completed([ex.submit(run_one, t) for t in todo]):
                        record(fut.result())
    if todo or counts["reused"] != len(stored) or streamed or not out_path.is_file():
        kept = {iid: row for iid, row in stored.items() if iid not in prints}  # other instances: the user's rows
        with atomic_write(out_path, "w", encoding="utf-8") as fh:
            for row in (*kept.values(), *(done[t.instance_id] for t in tasks if t.instance_id in done)):
                fh.write(json.dumps(row, default=str) + "\n")
        partial.unlink(missing_ok=True)
    return macro_metrics([rescore(done[t.instance_id], k) for t in tasks])


def _artifacts_dir(cfg: dict[str, Any], out: Any) -> Path:
    if out is None:
        from codegrep.config import project_root

        return Path(cfg.get("artifacts_dir") or project_root() / "artifacts")
    return Path(getattr(out, "artifacts", out))


def _profile_tasks(cfg: dict[str, Any], split: str | None, limit: int | None):
    from codegrep.data.tasks import profile_tasks

    return profile_tasks(cfg, split=split, limit=limit)


def profile_evaluation(cfg: dict[str, Any], retriever_name: str, split: str | None = "eval", out: Any = None,
                       *, k: int | None = None, limit: int | None = None, workers: int | None = None,
                       retriever: Retriever | None = None):
    """Evaluate one retriever on a profile's tasks, cached in ``<artifacts>/eval/<retriever>.jsonl``.

    ``out`` is an ``Outputs`` or an artifacts directory (default ``<project>/artifacts``). ``k`` defaults to
    ``retrievers.k`` for fixed-size retrievers (bm25, dense, random) and None (their own set) for the rest.
    Results made under other settings are moved aside to ``*.stale.jsonl``, never mixed in.
    Returns ``(rows DataFrame, summary)``; the summary adds ``acc_curve`` (Acc@1..20) and ``mean_seconds``.
    """
    import pandas as pd

    from codegrep.retrievers.registry import make_retriever, retriever_settings

    settings = cfg.get("retrievers") or {}
    retriever = retriever or make_retriever(retriever_name, cfg)
    if k is None and getattr(retriever, "fixed_size", False):
        k = settings.get("k")
    limit = limit if limit is not None else settings.get("limit")
    tasks, resolver = _profile_tasks(cfg, split, limit)
    name = retriever_name if split == "eval" else f"{retriever_name}-{split or 'all'}"
    path = _artifacts_dir(cfg, out) / "eval" / f"{name}.jsonl"
    meta = {"retriever": retriever_name, "split": split, "settings": retriever_settings(cfg, retriever_name),
            "agent": cfg.get("agent") if retriever_name == "agent" else None,
            "tasks": (cfg.get("tasks") or {})}
    _move_stale(path, meta)
    if getattr(retriever, "episodes_dir", False) is None:  # the agent saves its episodes beside the results
        retriever.episodes_dir = path.parent / "episodes" / name
    from codegrep.env.pool import WorktreePool

    metrics = evaluate(tasks, resolver, retriever, path, k=k, workers=int(workers or settings.get("workers") or 1),
                       pool=WorktreePool.from_config(cfg.get("env")))
    rows = read_rows(path)
    df = pd.DataFrame([rescore(rows[t.instance_id], k) for t in tasks])
    summary = {**metrics, "retriever": retriever_name, "split": split, "k": k, "path": str(path),
               "acc_curve": acc_curve(df.to_dict("records")) if len(df) else [],
               "mean_seconds": float(df["seconds"].mean()) if len(df) else float("nan")}
    return df, summary


def _move_stale(path: Path, meta: dict[str, Any]) -> None:
    """Keep ``path`` only when it was made with the same settings (recorded in ``<name>.meta.json``)."""
    from codegrep.files import write_atomic

    meta_path = path.with_suffix(".meta.json")
    wanted = json.dumps(meta, sort_keys=True, default=str)
    if path.is_file() and (not meta_path.is_file() or meta_path.read_text() != wanted):
        path.rename(path.with_suffix(".stale.jsonl"))
    write_atomic(meta_path, wanted)


# ------------------------------------------------------------------------------------- fair comparison

COMPARE_METRICS = ("p@1", "p@2", "p@3", "acc@1", "acc@5", "precision", "recall", "precision@agent", "recall@agent")
"""Metrics of :func:`comparison_table`: P@j and Acc@j on the ranking, precision/recall of the returned set
(ranking cut at the profile's k, or the agent's submission), and precision/recall of the first ``m`` ranked
where ``m`` is the agent's submitted set size on that instance."""


def is_non_submit(row: dict[str, Any]) -> bool:
    """An agent row that submitted nothing (format errors, ran out of turns, or an empty submit).

    >>> is_non_submit({"files": [], "extra": {}}), is_non_submit({"files": ["a.py"], "extra": {"submitted": True}})
    (True, False)
    """
    return not row.get("files") or (row.get("extra") or {}).get("submitted") is False


def comparison_table(results: dict[str, Any], reference: str = "bm25", agent: str | None = "agent",
                     n_boot: int = 2000, seed: int = 0, alpha: float = 0.05):
    """One row per retriever, on the instances every result shares, with bootstrap intervals.

    ``results`` maps a retriever name to its rows (the DataFrame :func:`profile_evaluation` returns, or a list
    of row dicts). Columns: ``retriever``, ``n`` (shared instances), and for each of :data:`COMPARE_METRICS`
    ``<m>``, ``<m>_lo``, ``<m>_hi`` (percentile bootstrap of the mean) and ``<m>_diff``, ``<m>_diff_lo``,
    ``<m>_diff_hi`` (paired bootstrap of ``retriever - reference`` over the same instances; 0 for the reference);
    ``n_agent_size`` (instances in the ``@agent`` columns) and ``agent_non_submits``.

    The agent's non-submits: in P@j/Acc@j/precision/recall they count as an empty answer (0); the ``@agent``
    columns leave those instances out for *every* retriever (the set size is undefined there), and their count is
    the ``agent_non_submits`` column (also in ``table.attrs``). Without an ``agent`` result the ``@agent`` columns
    are NaN.

    >>> a = [{"instance_id": "i", "ranked": ["a", "b"], "files": ["a"], "gold": ["a"]},
    ...      {"instance_id": "j", "ranked": ["x", "c"], "files": ["x"], "gold": ["c"]}]
    >>> b = [{"instance_id": "i", "ranked": ["b", "a"], "files": ["b"], "gold": ["a"]},
    ...      {"instance_id": "j", "ranked": ["c"], "files": ["c"], "gold": ["c"]}]
    >>> t = comparison_table({"bm25": a, "other": b}, agent=None, n_boot=50)
    >>> t[["retriever", "n", "p@1", "p@2", "p@1_diff"]].values.tolist()
    [['bm25', 2, 0.5, 0.5, 0.0], ['other', 2, 0.5, 0.5, 0.0]]
    """
    import pandas as pd

    if not results:
        raise ValueError("comparison_table: no results")
    if reference not in results:
        raise ValueError(f"comparison_table: reference {reference!r} not among {sorted(results)}")
    by_name = {name: {r["instance_id"]: r for r in _records(rows)} for name, rows in results.items()}
    shared = sorted(set.intersection(*(set(rows) for rows in by_name.values())))
    agent_rows = by_name.get(agent) if agent else None
    sizes: dict[str, int] = {}
    non_submits = 0
    if agent_rows is not None:
        for iid in shared:
            if is_non_submit(agent_rows[iid]):
                non_submits += 1
            else:
                sizes[iid] = len(dedupe(agent_rows[iid]["files"]))

    def values(name: str, metric: str) -> list[float]:
        rows = by_name[name]
        if metric.endswith("@agent"):
            fn = precision_at if metric.startswith("precision") else recall_within
            return [fn(rows[i]["ranked"], rows[i]["gold"], sizes[i]) for i in shared if i in sizes]
        out = []
        for i in shared:
            row = rows[i]
            if metric.startswith("p@"):
                out.append(precision_at(row["ranked"], row["gold"], int(metric[2:])))
            elif metric.startswith("acc@"):
                out.append(acc_at_k(row["ranked"], row["gold"], int(metric[4:])))
            else:
                out.append(instance_metrics(row.get("files") or [], row["gold"])[metric])
        return out

    table = []
    for name in results:
        entry: dict[str, Any] = {"retriever": name, "n": len(shared)}
        for metric in COMPARE_METRICS:
            vals, ref = values(name, metric), values(reference, metric)
            if not vals:
                entry.update({f"{metric}{s}": float("nan") for s in ("", "_lo", "_hi", "_diff", "_diff_lo",
                                                                         "_diff_hi")})
                continue
            m, lo, hi = bootstrap_ci(vals, n_boot=n_boot, alpha=alpha, seed=seed)
            d, dlo, dhi = paired_bootstrap_diff(ref, vals, n_boot=n_boot, alpha=alpha, seed=seed)
            entry.update({metric: m, f"{metric}_lo": lo, f"{metric}_hi": hi,
                          f"{metric}_diff": d, f"{metric}_diff_lo": dlo, f"{metric}_diff_hi": dhi})
        entry.update({"n_agent_size": len(sizes) if agent_rows is not None else 0, "agent_non_submits": non_submits})
        table.append(entry)
    df = pd.DataFrame(table)
    df.attrs.update({"reference": reference, "agent": agent if agent_rows is not None else None,
                     "instances": shared, "agent_non_submits": non_submits, "n_boot": n_boot, "alpha": alpha})
    return df


def _records(rows: Any) -> list[dict[str, Any]]:
    """Row dicts from a DataFrame or an iterable of dicts."""
    return rows.to_dict("records") if hasattr(rows, "to_dict") else [dict(r) for r in rows]
