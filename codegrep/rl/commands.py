"""``codegrep train`` and ``codegrep export``."""
from __future__ import annotations

import argparse
from typing import Any


def _train(args: argparse.Namespace) -> int:
    from codegrep.config import parse_overrides
    from codegrep.rl.run import train

    overrides: dict[str, Any] = parse_overrides(args.set or [])
    for key in ("efficiency_layer", "efficiency_lambda", "seed", "out", "name", "max_steps"):
        if getattr(args, key) is not None:
            overrides[key] = getattr(args, key)
    if args.resume:
        overrides["resume"] = True
    run_dir = train(args.config, overrides)
    print(run_dir)
    return 0


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from codegrep.rl.export import export_run

    run = Path(args.run)
    if not run.is_dir():
        run = Path(args.runs_dir) / args.run
    print(export_run(run, args.out))
    return 0


def register(subparsers: Any) -> None:
    from codegrep.errors import non_negative_float, positive_int
    from codegrep.rl.advantages import LAYERS
    p = subparsers.add_parser(
        "train", help="warm-start (SFT) and GRPO-train the retrieval agent (TRL); see docs/training.md",
        description="Train the retrieval agent: a supervised warm start on demonstrations (synthetic scripted "
                    "episodes and/or real recorded runs), then GRPO on the profile's train split with live tools. "
                    "Episode limits come from the profile's agent: section. Writes OUT/NAME/ (config.json, "
                    "manifest.json, metrics.jsonl, final/). Instances of the evaluation split never reach training.")
    p.add_argument("--config", default="smoke",
                   help="train YAML (configs/train/*.yaml) or a profile name/YAML whose train.config names one")
    p.add_argument("--efficiency-layer", dest="efficiency_layer",
                   choices=list(LAYERS),
                   help="where the efficiency signal enters (default: the train YAML's efficiency_layer)")
    p.add_argument("--efficiency-lambda", dest="efficiency_lambda", type=non_negative_float,
                   help="λ, the efficiency coefficient (default: the train YAML's)")
    p.add_argument("--seed", type=int, help="seed of every random source (default: the train YAML's seed)")
    p.add_argument("--out", help="runs directory (the run goes to OUT/NAME)")
    p.add_argument("--name", help="run name (default <profile>-<layer>-lam<λ>-s<seed>)")
    p.add_argument("--max-steps", dest="max_steps", type=positive_int, help="GRPO steps (default: the train YAML's max_steps)")
    p.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="any CodeGrepArgs / TRL GRPOConfig field, e.g. --set num_generations=4 (repeatable)")
    p.set_defaults(func=_train)
    e = subparsers.add_parser("export", help="write a trained run's policy as a HF model dir with a model card")
    e.add_argument("run", help="run directory, or a run name under --runs-dir")
    e.add_argument("--runs-dir", default="artifacts/train", help="where run names are looked up (default %(default)s)")
    e.add_argument("--out", help="output directory (default RUN/export)")
    e.set_defaults(func=_export)
