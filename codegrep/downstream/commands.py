"""``codegrep downstream``: run a frozen agent (or the replay cost model) with or without candidate files."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from codegrep.argtypes import non_negative_int, positive_int
from codegrep.files import json_text, output_file, refuse_overwriting_inputs, write_atomic


def register(subparsers: Any) -> None:
    from codegrep.config import add_set_option

    p = subparsers.add_parser("downstream", help="run a downstream agent with/without retrieved candidate files",
                              description=__doc__.replace("``", ""))
    p.add_argument("--tasks", required=True,
                   help="task source (.jsonl/.json/.parquet, HF id, 'default'), or 'mined' = the replay model's "
                        "recorded instances; with --from-output: the recorded runs of those tasks, or 'none' = all")
    p.add_argument("--candidates", default=None, help="retriever results JSONL (instance_id, files), or 'none'; with "
                   "--hint-precision: the retriever results whose non-gold files are the distractors")
    p.add_argument("--agent", default=None, choices=["replay", "openhands", "mini-swe-agent", "swe-agent"],
                   help="replay (the cost MODEL over recorded runs; the default), openhands (needs Docker) or "
                        "mini-swe-agent (needs --endpoint); with --from-output: the agent that made the runs (checked; "
                        "swe-agent: recorded runs only)")
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL for real agents")
    p.add_argument("--out", required=True, help="results JSONL, one DownstreamResult per instance")
    p.add_argument("--profile", default="smoke", help="profile whose 'downstream' section configures the agent")
    add_set_option(p, "downstream.mini_swe_agent.step_limit=30")
    p.add_argument("--compare", default=None, help="a previous --out to compare with (paired statistics)")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="a seeded sample of N of the tasks (their order kept; the rule of every task limit)")
    p.add_argument("--prepare-only", action="store_true",
                   help="openhands: lay out the run (dataset, config.toml, run.sh) and print its paths")
    p.add_argument("--from-output", default=None,
                   help="read results of recorded runs instead of running the agent: an OpenHands output.jsonl, "
                        "or a mini-swe-agent *.traj.json[.gz] / SWE-agent *.traj or a directory of them (recursive)")
    p.add_argument("--report", default=None, help="swebench harness report of the run for --from-output resolution "
                   "(run report, per-instance report.json, a directory of those, or OpenHands' "
                   "output.swebench_eval.jsonl); default: the <id>.report.json beside each trajectory, or the "
                   "evaluation beside an OpenHands output.jsonl")
    h = p.add_argument_group("randomized hint experiment (--hint-precision; --out is then a directory)")
    h.add_argument("--hint-precision", default=None, help="comma-separated hint precisions, e.g. 0,0.33,0.67,1")
    h.add_argument("--set-size", type=positive_int, default=None, help="files per hint (k; default downstream.hints)")
    h.add_argument("--runs", type=positive_int, default=None, help="repetitions per instance and arm (default downstream.hints)")
    h.add_argument("--seed", type=non_negative_int, default=None, help="master seed of the hint assignment (default downstream.hints)")
    h.add_argument("--repos", default=None, help="directory of owner__name git repositories (default: the shipped "
                   "snapshots)")
    h.add_argument("--no-verify", action="store_true", help="do not judge patches with the local tests")
    h.add_argument("--retry-failed", action="store_true", help="re-run keys whose latest attempt failed")
    p.set_defaults(func=cmd_downstream)
    register_verify(subparsers)


def _tasks(args: argparse.Namespace, cfg: dict[str, Any], agent: Any) -> list[Any]:
    from codegrep.data.tasks import load_tasks, seeded_sample

    if args.tasks == "mined":
        if not hasattr(agent, "traces"):
            raise ValueError("--tasks mined needs --agent replay")
        return seeded_sample(sorted(agent.traces.values(), key=lambda t: t.instance_id), args.limit,
                             int(cfg.get("seed", 0)))

    return load_tasks(args.tasks, limit=args.limit, seed=int(cfg.get("seed", 0)))


def _from_output(args: argparse.Namespace, cfg: dict[str, Any],
                 candidates: dict[str, list[str]] | None) -> tuple[list[Any], list[str]]:
    """(results of the recorded runs of the selected tasks, ids of the selected tasks with no recorded run)."""
    from codegrep.data.swebench_report import load_report
    from codegrep.data.tasks import load_tasks, seeded_sample
    from codegrep.downstream.agent_runs import results_from_agent_output

    for flag, given in (("--prepare-only", args.prepare_only), ("--endpoint", args.endpoint)):
        if given:
            raise ValueError(f"{flag} runs an agent; --from-output reads recorded runs: give one of them")
    if args.tasks == "mined":
        raise ValueError("--tasks mined selects the replay model's instances; with --from-output give a task source "
                         "(its tasks' recorded runs) or 'none' (every recorded run)")
    results = results_from_agent_output(args.from_output, load_report(args.report, whole_run=True) if args.report else None)
    agents = sorted({r.agent for r in results})
    if len(agents) > 1:
        first = {a: next(r.trajectory for r in results if r.agent == a) for a in agents}
        raise ValueError(f"--from-output {args.from_output}: runs of {len(agents)} agents ("
                         f"{', '.join(f'{a}: {t}' for a, t in first.items())}, ...); give one agent's runs")
    if args.agent is not None and agents != [args.agent]:
        raise ValueError(f"--agent {args.agent}: --from-output {args.from_output} holds {', '.join(agents)} runs")
    seed = int(cfg.get("seed", 0))
    if args.tasks.lower() == "none":
        results, missing = seeded_sample(results, args.limit, seed), []
    else:
        by_id = {r.instance_id: r for r in results}
        ids = [t.instance_id for t in load_tasks(args.tasks, limit=args.limit, seed=seed)]
        results, missing = [by_id[i] for i in ids if i in by_id], [i for i in ids if i not in by_id]
        if not results:
            raise ValueError(f"--from-output {args.from_output}: no recorded run of the {len(ids)} task(s) of "
                             f"--tasks {args.tasks}")
    if candidates is not None:
        for r in results:
            r.candidate_files = candidates.get(r.instance_id, [])
    return results, missing


def cmd_downstream(args: argparse.Namespace) -> int:
    from codegrep.config import cli_profile, section
    from codegrep.downstream.factory import make_agent
    from codegrep.downstream.agent_runs import load_candidates, paired_compare, read_results, run_downstream, summarize

    refuse_overwriting_inputs({"--out": args.out}, {"--tasks": args.tasks, "--candidates": args.candidates,
                                                    "--compare": args.compare, "--from-output": args.from_output,
                                                    "--report": args.report, "--profile": args.profile})
    cfg = cli_profile(args.profile, args.set)  # every --set value, used by this run or not, before work
    ds = section(cfg, "downstream")
    if args.hint_precision is not None:
        return cmd_hint_experiment(args, cfg, ds)
    if args.candidates is None:
        raise ValueError("--candidates is required (a retriever results JSONL, or 'none') unless --hint-precision "
                         "is given")
    candidates = None if args.candidates.lower() == "none" else load_candidates(args.candidates)
    compared = read_results(args.compare) if args.compare else None  # a bad --compare is refused before the run
    if not args.prepare_only:
        output_file(args.out, "--out")  # a directory or a path under a file: refused before the run, not after
    if args.from_output:
        results, skipped = _from_output(args, cfg, candidates)
        write_atomic(args.out, "".join(json.dumps(r.to_row()) + "\n" for r in results))
    elif args.prepare_only:
        return _prepare_openhands(args, cfg, ds, candidates)
    else:
        if args.agent == "swe-agent":
            raise ValueError("--agent swe-agent: codegrep reads recorded SWE-agent runs (--from-output), it does not "
                             "run SWE-agent")
        agent = make_agent(args.agent or "replay", ds, endpoint=args.endpoint)
        tasks = _tasks(args, cfg, agent)
        results = run_downstream(tasks, agent, candidates, args.out)
        done = {r.instance_id for r in results}
        skipped = [t.instance_id for t in tasks if t.instance_id not in done]
    if skipped:
        print(f"codegrep downstream: {len(skipped)} selected task(s) have no recorded run and were skipped (e.g. "
              f"{skipped[0]}; all in the summary's skipped_ids)", file=sys.stderr)
    summary: dict[str, Any] = {**summarize(results), "n_skipped": len(skipped), "skipped_ids": skipped,
                               "out": args.out, "source": "run" if args.from_output or results[0].agent != "replay"
                               else "model"}
    if compared is not None:
        summary["paired"] = paired_compare(compared, results, seed=int(cfg.get("seed", 0)))
    print(json_text(summary, default=float))
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
    print(json_text({"run_dir": str(run.run_dir), "script": str(run.script), "dataset": str(run.dataset_file),
                      "config": str(run.config_file), "infer_command": run.infer_command,
                      "eval_command": run.eval_command, "n_tasks": len(tasks)}))
    return 0


def _precisions(text: str) -> list[float]:
    """``--hint-precision`` as floats in [0, 1].

    >>> _precisions("0,0.33, 1")
    [0.0, 0.33, 1.0]
    """
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--hint-precision: expected comma-separated numbers in [0, 1], got {text!r}") from None
    if not values or any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError(f"--hint-precision: expected comma-separated numbers in [0, 1], got {text!r}")
    return values


def _served_models(url: str | None) -> list[str]:
    """The model ids an OpenAI-compatible endpoint lists (one clear error when it does not answer)."""
    if not url:
        raise ValueError("--hint-precision with --agent mini-swe-agent needs --endpoint URL (an OpenAI-compatible "
                         "base URL) or downstream.mini_swe_agent.api_base")
    import os

    import httpx

    key = os.environ.get("OPENAI_API_KEY")
    try:
        resp = httpx.get(url.rstrip("/") + "/models", timeout=10,
                         headers={"Authorization": f"Bearer {key}"} if key else None)
    except httpx.HTTPError as exc:
        raise ValueError(f"--endpoint {url}: not reachable ({type(exc).__name__}: {exc})") from None
    try:
        return [str(m["id"]) for m in resp.json().get("data") or [] if m.get("id")]
    except (ValueError, AttributeError, TypeError):
        return []  # some servers answer chat only; the model name must then be configured


def _resolvable(tasks: list[Any], resolver: Any) -> tuple[list[Any], list[str]]:
    """(tasks whose repository at ``base_commit`` is available, ids of the others)."""
    ok, missing = [], []
    for t in tasks:
        try:
            resolver.resolve(t.repo, t.base_commit)
            ok.append(t)
        except (FileNotFoundError, RuntimeError, ValueError):
            missing.append(t.instance_id)
    return ok, missing


def cmd_hint_experiment(args: argparse.Namespace, cfg: dict[str, Any], ds: dict[str, Any]) -> int:
    """Plan (or resume) the randomized hint experiment and run what is pending."""
    from codegrep.data.repos import RepoResolver
    from codegrep.data.tasks import filter_tasks, load_tasks
    from codegrep.downstream.agents import config_from_section
    from codegrep.downstream.factory import make_agent
    from codegrep.downstream.hints import HintExperimentConfig, run_experiment, summarize_hint_experiment
    from codegrep.downstream.mini_swe_agent import MiniSweAgentConfig
    from codegrep.downstream.agent_runs import load_candidates
    from codegrep.downstream.verify import Verifier, VerifyConfig

    if args.agent != "mini-swe-agent":
        raise ValueError("--hint-precision runs a live agent: use --agent mini-swe-agent (the OpenHands adapter "
                         "lays out runs for Docker, see docs/downstream.md)")
    hcfg = config_from_section(ds, "hints", HintExperimentConfig, "precisions", _precisions(args.hint_precision))
    for name in ("set_size", "runs", "seed"):
        if getattr(args, name) is not None:
            setattr(hcfg, name, getattr(args, name))
    if hcfg.set_size < 1 or hcfg.runs < 1:
        raise ValueError(f"--set-size and --runs must be >= 1 (got {hcfg.set_size}, {hcfg.runs})")
    hcfg.verify = hcfg.verify and not args.no_verify
    hcfg.retry_failed = args.retry_failed
    if args.repos is None:
        from codegrep.data.shipped import snapshot_repos_dir

        args.repos = str(snapshot_repos_dir())
    if not Path(args.repos).is_dir():
        raise FileNotFoundError(f"--repos: no such directory {args.repos}")
    if Path(args.out).is_file():
        raise ValueError(f"--out {args.out}: with --hint-precision --out is a directory, and this is a file")
    resolver = RepoResolver(args.repos, offline=True)
    tasks, missing = _resolvable([t for t in load_tasks(args.tasks) if t.gold_files], resolver)
    tasks = filter_tasks(tasks, limit=args.limit, seed=int(cfg.get("seed", 0)))  # --limit among the runnable
    if missing:
        print(f"codegrep downstream: {len(missing)} task(s) skipped, their commit is not in --repos {args.repos} "
              f"(e.g. {missing[0]})", file=sys.stderr)
    if not tasks:
        raise ValueError(f"--tasks {args.tasks}: no task with gold files whose commit is in --repos {args.repos}")
    agent = make_agent("mini-swe-agent", ds, endpoint=args.endpoint)
    agent.resolver = resolver
    agent.config.output_dir = str(Path(args.out) / "trajectories")
    served = _served_models(agent.config.api_base)
    if agent.config.model_name == MiniSweAgentConfig.model_name:  # the placeholder: use what the server serves
        if not served:
            raise ValueError(f"--endpoint {agent.config.api_base} lists no models: set "
                             "downstream.mini_swe_agent.model_name (--set downstream.mini_swe_agent.model_name=...)")
        agent.config.model_name = f"openai/{served[0]}"
    candidates = None if args.candidates in (None, "none") else load_candidates(args.candidates)
    source = f"candidates:{args.candidates}" if candidates is not None else f"retriever:{hcfg.distractor_retriever}"
    from codegrep.downstream.hints import distractor_lists, read_jsonl

    planned = {r["instance_id"] for r in read_jsonl(Path(args.out) / "plan.jsonl")}  # resumed: hints are recorded
    distractors = distractor_lists([t for t in tasks if t.instance_id not in planned], candidates,
                                   hcfg.distractor_retriever, cfg, resolver, hcfg.distractor_pool)
    verifier = None
    if hcfg.verify:
        verifier = Verifier(config_from_section(ds, "verify", VerifyConfig, "timeout"), resolver=resolver)
    settings = {"agent": args.agent, "model": agent.config.model_name, "endpoint": agent.config.api_base,
                "step_limit": agent.config.step_limit, "tasks": str(args.tasks)}
    rows = run_experiment(tasks, agent, hcfg, args.out, distractors, source, verifier, settings)
    summary = summarize_hint_experiment(rows, n_boot=200, seed=hcfg.seed)
    brief = {"out": args.out, "n_runs": len(rows), "n_failed": sum(r.get("status") != "ok" for r in rows),
             "source": "run"}
    if summary is not None:
        brief["by_arm"] = summary["by_precision"][["arm", "n", "n_failed", "n_judged", "resolve_rate", "mean_rounds",
                                                   "mean_tokens"]].to_dict("records")
    print(json_text(brief, default=float))
    return 0


def register_verify(subparsers: Any) -> None:
    from codegrep.config import add_set_option

    v = subparsers.add_parser("verify", help="Docker-free SWE-bench verdict: apply a patch + the test patch, run "
                              "FAIL_TO_PASS/PASS_TO_PASS locally", description=(
                                  "Without --patch: check every selected instance (gold must resolve, the bare base "
                                  "must not) and write the table to --out. With --patch: one trusted verdict each, "
                                  "or 'unverifiable here' with the reason."))
    v.add_argument("--tasks", required=True, help="task source with test_patch/FAIL_TO_PASS/PASS_TO_PASS rows "
                   "(e.g. data/swebench/swebench_verified.jsonl.gz)")
    v.add_argument("--repos", default=None, help="directory of owner__name git repositories (default: the shipped "
                   "snapshots)")
    v.add_argument("--instance", action="append", default=None, help="instance id (repeatable; default: all tasks "
                   "of repositories with a local recipe)")
    v.add_argument("--patch", default=None, help="gold | none | a diff file (omit: the gold/base trust check)")
    v.add_argument("--jobs", type=positive_int, default=1, help="instances checked in parallel")
    v.add_argument("--timeout", type=positive_int, default=None, help="seconds per test run (default: downstream.verify)")
    v.add_argument("--out", default=None, help="write the verdicts / trust table here as JSON")
    v.add_argument("--profile", default="smoke", help="profile whose downstream.verify section configures it")
    add_set_option(v, "downstream.verify.timeout=300")
    v.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    import datetime
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from codegrep.config import cli_profile, section
    from codegrep.data.repos import RepoResolver
    from codegrep.data.tasks import load_tasks
    from codegrep.downstream.agents import config_from_section
    from codegrep.downstream.verify import RECIPES, Verifier, VerifyConfig, patch_text

    cfg = cli_profile(args.profile, args.set)
    ds = section(cfg, "downstream")
    vcfg = config_from_section(ds, "verify", VerifyConfig, "timeout", args.timeout)  # --timeout overrides
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    if args.out:
        refuse_overwriting_inputs({"--out": args.out}, {"--tasks": args.tasks, "--patch": args.patch,
                                                        "--profile": args.profile})
        output_file(args.out, "--out")  # before any test runs, not after
    if args.repos is None:
        from codegrep.data.shipped import snapshot_repos_dir

        args.repos = str(snapshot_repos_dir())
    if not Path(args.repos).is_dir():
        raise FileNotFoundError(f"--repos: no such directory {args.repos}")
    tasks = load_tasks(args.tasks, instance_ids=args.instance)
    if not args.instance:
        tasks = [t for t in tasks if t.repo in RECIPES]
    if not tasks:
        raise ValueError(f"--tasks {args.tasks}: no task of a repository with a local recipe ({sorted(RECIPES)})")
    verifier = Verifier(vcfg, resolver=RepoResolver(args.repos))
    if args.patch:
        for t in tasks:  # read the patch file up front: a bad path is one line, before any test runs
            patch_text(t, args.patch)
        label = args.patch if args.patch in ("gold", "none") else str(Path(args.patch))
        work = lambda t: verifier.verdict(t, patch_text(t, args.patch), label).to_row()  # noqa: E731
    else:
        work = verifier.trust
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    rows: list[dict[str, Any]] = []
    order = {t.instance_id: i for i, t in enumerate(tasks)}
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for fut in as_completed([pool.submit(work, t) for t in tasks]):
            row = fut.result()
            rows.append(_small_trust_row(row) if not args.patch else row)
            rows.sort(key=lambda r: order[r["instance_id"]])
            brief = {k: row.get(k) for k in ("instance_id", "trusted", "resolved", "reason") if k in row}
            print(json_text(brief), file=sys.stderr, flush=True)
            summary = _verify_summary(rows, bool(args.patch))
            if args.out:  # rewritten after every instance: a long measurement leaves a usable partial table
                write_atomic(args.out, json.dumps({
                    "started": started, "updated": datetime.datetime.now(datetime.timezone.utc).strftime(
                        "%Y-%m-%dT%H:%MZ"), "command": "codegrep " + " ".join(sys.argv[1:]), "tasks": args.tasks,
                    "complete": len(rows) == len(tasks), "n_selected": len(tasks), "summary": summary,
                    "rows": rows}, indent=1) + "\n")
    print(json_text({**summary, "out": args.out}))
    return 0


def _small_trust_row(row: dict[str, Any]) -> dict[str, Any]:
    """A trust row without the test logs (those stay in the verify cache)."""
    out = dict(row)
    for k in ("gold", "none"):
        if out.get(k):
            out[k] = {f: out[k][f] for f in ("resolved", "reason", "f2p_failed", "p2p_failed", "n_tests", "python",
                                             "seconds")}
    return out


def _verify_summary(rows: list[dict[str, Any]], verdicts: bool) -> dict[str, Any]:
    import collections

    if verdicts:
        return {"n": len(rows), "resolved": sum(r["resolved"] is True for r in rows),
                "not_resolved": sum(r["resolved"] is False for r in rows),
                "unverifiable": sum(r["resolved"] is None for r in rows)}
    return {"n": len(rows), "trusted": sum(bool(r["trusted"]) for r in rows),
            "reasons": dict(collections.Counter(_reason_kind(r["reason"]) for r in rows if not r["trusted"]))}


def _reason_kind(reason: str) -> str:
    """A reason without its instance-specific tail, for counting.

    >>> _reason_kind("gold: no test results in the log (Python 3.11 here, the harness uses 3.9): ImportError: x")
    'gold: no test results in the log (Python 3.11 here, the harness uses 3.9)'
    >>> _reason_kind("gold: timeout after 600s"), _reason_kind("gold patch does not resolve here (failing: ['t'])")
    ('gold: timeout after 600s', 'gold patch does not resolve here')
    """
    parts = reason.split(" (failing")[0].split(": ")
    return ": ".join(parts[:2] if parts[0] in ("gold", "base") else parts[:1])
