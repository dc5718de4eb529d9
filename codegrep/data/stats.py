"""Descriptive statistics of a task set: per-repository counts, gold files per task, issue length."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from codegrep.data.tasks import Task, task_split


def per_task_frame(tasks: Sequence[Task]) -> pd.DataFrame:
    """One row per task: repo, split, number of gold files, issue length in characters and words.

    >>> t = Task("o__r-1", "o/r", "abc", "Fix the thing now", gold_files=["a.py", "b.py"])
    >>> per_task_frame([t])[["repo", "gold_files", "issue_words"]].values.tolist()
    [['o/r', 2, 4]]
    """
    return pd.DataFrame([{"instance_id": t.instance_id, "repo": t.repo, "split": task_split(t) or "-",
                          "gold_files": len(t.gold_files), "issue_chars": len(t.problem_statement),
                          "issue_words": len(t.problem_statement.split())} for t in tasks],
                        columns=["instance_id", "repo", "split", "gold_files", "issue_chars", "issue_words"])


def per_repo_frame(per_task: pd.DataFrame) -> pd.DataFrame:
    """Counts and medians per repository (sorted by task count, then name)."""
    grouped = per_task.groupby("repo", sort=True)
    frame = pd.DataFrame({
        "split": grouped["split"].agg(lambda s: ",".join(sorted(set(s)))),
        "tasks": grouped.size(),
        "gold_files_mean": grouped["gold_files"].mean().round(2),
        "multi_file_share": grouped["gold_files"].agg(lambda s: float((s > 1).mean())).round(3),
        "issue_words_median": grouped["issue_words"].median(),
    }).reset_index()
    return frame.sort_values(["tasks", "repo"], ascending=[False, True], ignore_index=True)


def summary(per_task: pd.DataFrame) -> dict[str, Any]:
    """Whole-set numbers (task and repo counts, gold files and issue length distributions)."""
    if per_task.empty:
        return {"tasks": 0, "repos": 0}
    q = per_task.describe(percentiles=[0.5, 0.9])
    return {"tasks": int(len(per_task)), "repos": int(per_task["repo"].nunique()),
            "splits": {k: int(v) for k, v in per_task["split"].value_counts().sort_index().items()},
            **{f"{col}_{stat}": float(q.loc[key, col]) for col in ("gold_files", "issue_words", "issue_chars")
               for stat, key in (("mean", "mean"), ("median", "50%"), ("p90", "90%"), ("max", "max"))},
            "multi_file_share": float((per_task["gold_files"] > 1).mean())}


def task_stats(tasks: Sequence[Task]) -> dict[str, Any]:
    """``{"per_task": DataFrame, "per_repo": DataFrame, "summary": dict}`` for notebooks and the CLI."""
    per_task = per_task_frame(tasks)
    return {"per_task": per_task, "per_repo": per_repo_frame(per_task), "summary": summary(per_task)}


def gold_file_histogram(per_task: pd.DataFrame) -> pd.DataFrame:
    """How many tasks have 1, 2, 3, ... gold files."""
    counts = per_task["gold_files"].value_counts().sort_index()
    return pd.DataFrame({"gold_files": counts.index, "tasks": counts.values})


def format_stats(stats: dict[str, Any]) -> str:
    """The tables ``codegrep tasks stats`` prints."""
    s = stats["summary"]
    lines = [f"{s['tasks']} tasks over {s['repos']} repositories"]
    if s["tasks"]:
        lines += [f"splits: {s['splits']}",
                  f"gold files per task: mean {s['gold_files_mean']:.2f}, median {s['gold_files_median']:g}, "
                  f"max {s['gold_files_max']:g}; multi-file share {s['multi_file_share']:.3f}",
                  f"issue length (words): mean {s['issue_words_mean']:.1f}, median {s['issue_words_median']:g}, "
                  f"p90 {s['issue_words_p90']:g}, max {s['issue_words_max']:g}",
                  "", stats["per_repo"].to_string(index=False), "",
                  gold_file_histogram(stats["per_task"]).to_string(index=False)]
    return "\n".join(lines)
