"""``codegrep downstream``: run a frozen agent (or the replay cost model) with or without candidate files."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("downstream", help="run a downstream agent with/without retrieved candidate files",
                              description=__doc__)
    p.add_argument("--tasks", required=True,
                   help="task source (.jsonl/.json/.parquet, HF id, 'default'), or 'mined' = the replay model's "
                        "recorded instances")
    p.add_argument("--candidates", required=True, help="retriever results JSONL (instance_id, files), or 'none'")
    p.add_argument("--agent", default="replay", choices=["replay", "openhands", "mini-swe-agent"])
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL for real agents")
    p.add_argument("--out", required=True, help="results JSONL, one DownstreamResult per instance")
    p.add_argument("--profile", default="smoke", help="profile whose 'downstream' section configures the agent")
    p.add_argument("--compare", default=None, help="a previous --out to compare with (paired statistics)")
    p.add_argument("--limit", type=int, default=None, help="first N tasks only")
    p.add_argument("--prepare-only", action="store_true",
                   help="openhands: lay out the run (dataset, config.toml, run.sh) and print its paths")
    p.add_argument("--from-output", default=None,
                   help="read results from an existing OpenHands output.jsonl or a dir of mini-swe-agent "
                        "*.traj.json instead of running the agent")
    p.add_argument("--report", default=None, help="swebench harness report for --from-output resolution")
    p.set_defaults(func=cmd_downstream)


def _tasks(args: argparse.Namespace, cfg: dict[str, Any], agent: Any) -> list[Any]:
    if args.tasks == "mined":
        if not hasattr(agent, "traces"):
            raise ValueError("--tasks mined needs --agent replay")
        return sorted(agent.traces.values(), key=lambda t: t.instance_id)[: args.limit]
    from codegrep.data.tasks import load_tasks

    return load_tasks(args.tasks, limit=args.limit, seed=int(cfg.get("seed", 0)))


def _from_output(args: argparse.Namespace, candidates: dict[str, list[str]] | None) -> list[Any]:
    from codegrep.downstream.agents import load_report

    report = load_report(args.report) if args.report else None
    src = Path(args.from_output)
    if src.is_dir():
        from codegrep.downstream.mini_swe_agent import result_from_trajectory

        results = [result_from_trajectory(json.loads(f.read_text()), report, path=str(f))
                   for f in sorted(src.rglob("*.traj.json"))]
    else:
        from codegrep.downstream.openhands import results_from_output

        results = results_from_output(src, report)
    if candidates is not None:
        for r in results:
            r.candidate_files = candidates.get(r.instance_id, [])
    return results


def cmd_downstream(args: argparse.Namespace) -> int:
    from codegrep.config import load_profile, section
    from codegrep.downstream.agents import make_agent
    from codegrep.downstream.run import load_candidates, paired_compare, read_results, run_downstream, summarize

    cfg = load_profile(args.profile)
    ds = section(cfg, "downstream")
    candidates = None if args.candidates.lower() == "none" else load_candidates(args.candidates)
    if args.from_output:
        results = _from_output(args, candidates)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("".join(json.dumps(r.to_row()) + "\n" for r in results))
    elif args.prepare_only:
        return _prepare_openhands(args, cfg, ds, candidates)
    else:
        agent = make_agent(args.agent, ds, endpoint=args.endpoint)
        results = run_downstream(_tasks(args, cfg, agent), agent, candidates, args.out)
    summary: dict[str, Any] = {**summarize(results), "out": args.out,
                               "source": "model" if args.agent == "replay" and not args.from_output else "run"}
    if args.compare:
        summary["paired"] = paired_compare(read_results(args.compare), results, seed=int(cfg.get("seed", 0)))
    print(json.dumps(summary, default=float))
    return 0


def _prepare_openhands(args: argparse.Namespace, cfg: dict[str, Any], ds: dict[str, Any],
                       candidates: dict[str, list[str]] | None) -> int:
    if args.agent != "openhands":
        raise ValueError("--prepare-only is for --agent openhands")
    from codegrep.data.tasks import load_tasks
    from codegrep.downstream.openhands import OpenHandsAgent, write_openhands_run

    agent = OpenHandsAgent.from_config(ds, endpoint=args.endpoint)
    tasks = load_tasks(args.tasks, limit=args.limit, seed=int(cfg.get("seed", 0)))
    run = write_openhands_run(tasks, candidates, agent.config, Path(args.out).stem)
    print(json.dumps({"run_dir": str(run.run_dir), "script": str(run.script), "dataset": str(run.dataset_file),
                      "config": str(run.config_file), "infer_command": run.infer_command,
                      "eval_command": run.eval_command, "n_tasks": len(tasks)}))
    return 0
