"""``codegrep mine`` and ``codegrep bench mine``."""
from __future__ import annotations

import argparse
import os
from codegrep.files import json_text


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mine", help="mine file-access supervision from coding-agent trajectories (CATM)")
    p.add_argument("paths", nargs="+", help="files, directories, HF dataset ids, or 'shipped' (the 400 real runs in "
                                            "data/), 'format-samples', 'embedded' (the package's real samples)")
    p.add_argument("--format", default="auto", help="auto (per row) or a format name (see docs/mining.md)")
    p.add_argument("--tasks", default=None, help="task file/HF id (adds repo, base_commit, gold_files); "
                                                 "'embedded' or 'swebench-verified' (the 500 shipped rows)")
    p.add_argument("--repos", default=None, help="directory of owner__name git repositories (checks paths, "
                                                  "replays demonstration calls)")
    p.add_argument("--out", required=True, help="records JSONL")
    p.add_argument("--demonstrations", default=None, help="demonstrations JSONL (default: OUT with .demos.jsonl)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes (default: one per core)")
    p.add_argument("--resolved-only", action="store_true", help="write only useful (resolved, targeted) records")
    p.set_defaults(func=_mine)


def register_bench(bench_sub: argparse._SubParsersAction) -> None:
    from codegrep.argtypes import non_negative_int

    p = bench_sub.add_parser("mine", help="mining throughput/memory on real runs resampled to N, beside json.load")
    p.add_argument("--n", type=int, default=67_000, help="trajectories to mine (real runs resampled with replacement)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (the target is for 2 cores)")
    p.add_argument("--baseline-n", type=int, default=None,
                   help="paths of the same sample for the json.load floor (default: all N)")
    p.add_argument("--no-demonstrations", action="store_true", help="records only (skip demonstration episodes)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="resampling seed")
    p.set_defaults(func=_bench)


def _mine(args: argparse.Namespace) -> int:
    from codegrep.mining.catm import load_task_map
    from codegrep.mining.runner import MineOptions, mine_files

    from codegrep.mining.runner import check_options, check_output

    if args.workers < 1:
        raise ValueError(f"--workers {args.workers}: must be at least 1")
    check_output(args.out, "--out")
    demos = args.demonstrations or (args.out[:-6] if args.out.endswith(".jsonl") else args.out) + ".demos.jsonl"
    check_output(demos, "--demonstrations")
    from codegrep.files import refuse_overwriting_inputs

    refuse_overwriting_inputs({"--out": args.out, "--demonstrations": demos},  # before anything is read or opened
                              {"--tasks": args.tasks, **{str(p): p for p in args.paths}})
    check_options(MineOptions(fmt=args.format, repos=args.repos))  # before the (slower) task loading
    options = MineOptions(fmt=args.format, tasks=load_task_map(args.tasks), repos=args.repos)
    stats = mine_files(args.paths, args.out, demos, options, workers=args.workers, resolved_only=args.resolved_only)
    print(json_text(stats))
    return 0


def _bench(args: argparse.Namespace) -> int:
    from codegrep.mining.bench import bench_mine

    if args.baseline_n is not None and args.baseline_n < 1:
        raise ValueError(f"--baseline-n {args.baseline_n}: must be at least 1")
    print(json_text(bench_mine(args.n, args.workers, args.baseline_n, not args.no_demonstrations, args.seed)))
    return 0
