"""``codegrep mine`` and ``codegrep bench mine``."""
from __future__ import annotations

import argparse
import json
import os


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mine", help="mine file-access supervision from coding-agent trajectories (CATM)")
    p.add_argument("paths", nargs="+", help="files, directories, 'embedded' (shipped real samples) or HF dataset ids")
    p.add_argument("--format", default="auto", help="auto (per row) or a format name (see docs/mining.md)")
    p.add_argument("--tasks", default=None, help="task file/HF id (adds repo, base_commit, gold_files); 'embedded'")
    p.add_argument("--repos", default=None, help="directory of owner__name git repositories (checks paths, "
                                                  "replays demonstration calls)")
    p.add_argument("--out", required=True, help="records JSONL")
    p.add_argument("--demonstrations", default=None, help="demonstrations JSONL (default: OUT with .demos.jsonl)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--resolved-only", action="store_true", help="write only useful (resolved, targeted) records")
    p.set_defaults(func=_mine)


def register_bench(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("mine", help="mining throughput/memory on replayed real trajectories")
    p.add_argument("--n", type=int, default=2000, help="trajectories to mine (real samples replayed)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--baseline-n", type=int, default=300, help="trajectories for the single-process baseline")
    p.set_defaults(func=_bench)


def _mine(args: argparse.Namespace) -> int:
    from codegrep.mining.catm import load_task_map
    from codegrep.mining.runner import MineOptions, mine_files

    demos = args.demonstrations or (args.out[:-6] if args.out.endswith(".jsonl") else args.out) + ".demos.jsonl"
    options = MineOptions(fmt=args.format, tasks=load_task_map(args.tasks), repos=args.repos)
    stats = mine_files(args.paths, args.out, demos, options, workers=args.workers, resolved_only=args.resolved_only)
    print(json.dumps(stats))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from codegrep.mining.bench import bench_mine

    print(json.dumps(bench_mine(args.n, args.workers, args.baseline_n)))
    return 0
