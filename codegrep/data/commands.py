"""``codegrep tasks default --out DIR`` and ``codegrep tasks stats TASKS``."""
from __future__ import annotations

import argparse
from codegrep.files import json_text


def _default(args: argparse.Namespace) -> int:
    from codegrep.data.default_set import ensure_default_task_set
    from codegrep.files import output_dir

    if args.out is not None:
        output_dir(args.out, "--out")  # a file, or a path under one: one line naming --out, before any work
    built = ensure_default_task_set(args.out)
    n = sum(1 for _ in open(built.tasks_path, encoding="utf-8"))
    print(json_text({"tasks_path": str(built.tasks_path), "repos_dir": str(built.repos_dir), "n_tasks": n}))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from codegrep.data.stats import format_stats, task_stats
    from codegrep.data.tasks import filter_tasks, load_tasks, task_split
    from codegrep.errors import UserError

    tasks = load_tasks(args.tasks, on_error="skip" if args.skip_bad else "raise")
    if args.split:
        selected = filter_tasks(tasks, split=args.split)
        if not selected:  # a mistyped split is not an empty result
            splits = sorted({task_split(t) for t in tasks} - {None})
            raise UserError(f"{args.tasks}: no tasks in split {args.split!r} (its splits: {', '.join(splits)})")
        tasks = selected
    stats = task_stats(tasks)
    print(json_text(stats["summary"]) if args.json else format_stats(stats))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    tasks = subparsers.add_parser("tasks", help="task sets: build the offline default set, print statistics")
    sub = tasks.add_subparsers(dest="tasks_command", required=True)
    d = sub.add_parser("default", help="build the offline default task set (tasks.jsonl + repos/owner__name)")
    d.add_argument("--out", default=None, help="output directory (default: the cache, printed)")
    d.set_defaults(func=_default)
    s = sub.add_parser("stats", help="per-repo counts, gold files per task, issue length")
    s.add_argument("tasks", help="a .jsonl/.json/.parquet file, a HF dataset id (online), or 'default'")
    s.add_argument("--split", default=None, help="only tasks of this split (train|eval)")
    s.add_argument("--skip-bad", action="store_true", help="skip malformed rows (they are counted) instead of failing")
    s.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    s.set_defaults(func=_stats)
