"""``codegrep retrieve``, ``codegrep evaluate``, ``codegrep compare`` and ``codegrep bench retrieve``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codegrep.argtypes import non_negative_int, positive_int
from codegrep.errors import UserError
from codegrep.files import json_text

NAMES = ("bm25", "dense", "grep-heuristic", "agent", "oracle", "random", "bm25-plain")


def _overrides(args: argparse.Namespace) -> dict:
    """``--model``/``--endpoint`` as settings of the chosen retriever (dense: model; agent: policy)."""
    if args.retriever == "dense":
        return {"model": args.model}
    if args.retriever == "agent":
        return {"model": args.model, "endpoint": args.endpoint}
    if args.model or args.endpoint:
        raise ValueError(f"--model/--endpoint do not apply to retriever {args.retriever!r} (only dense, agent)")
    return {}


def _issue_text(args: argparse.Namespace) -> str:
    from codegrep.files import read_text

    if args.issue_file and args.issue:  # one of the two would be dropped silently
        raise ValueError(f"give the issue text once: as an argument ({args.issue[:40]!r}) or --issue-file "
                         f"{args.issue_file}, not both")
    text = sys.stdin.read() if args.issue == "-" else args.issue
    if args.issue_file:
        text = read_text(args.issue_file, "--issue-file")
    if not (text or "").strip():
        raise ValueError("no issue text: pass it as the last argument, '-' for stdin, or --issue-file PATH")
    return text


def _check_model(args: argparse.Namespace) -> None:
    """A ``--model`` that names a missing local directory, refused before any task (evaluate met it at the first
    task, after that task's repository was resolved and checked out). Aliases and hub ids are left to the loader."""
    if args.retriever == "dense" and args.model:
        from codegrep.retrievers.dense import resolve_model

        resolve_model(args.model)
    elif args.retriever == "agent" and args.model and not args.endpoint:  # with --endpoint: the served model's name
        from codegrep.agent.models import SMOLLM2_ALIASES, is_hub_id, resolve_model

        if args.model.lower() not in SMOLLM2_ALIASES and not is_hub_id(args.model):
            resolve_model(args.model)


def _retrieve(args: argparse.Namespace) -> int:
    from codegrep.config import cli_profile
    from codegrep.retrievers.registry import make_retriever
    from codegrep.retrievers.entrypoints import retrieve_in_repo

    if args.retriever == "oracle":  # it returns a task's gold files, and free text has none
        raise UserError("--retriever oracle: returns a task's gold files, and an issue text given to retrieve has "
                        "none; use it with 'codegrep evaluate --tasks ...'")
    cfg = cli_profile(args.profile, args.set)
    retriever = make_retriever(args.retriever, cfg, **_overrides(args))
    result = retrieve_in_repo(retriever, Path(args.repo), _issue_text(args), commit=args.commit)
    files = result.files[:args.k] if args.k else result.files
    if args.json:
        print(json_text({"files": files, "rounds": result.rounds, "tool_calls": result.tool_calls,
                          "tokens": result.tokens, "seconds": round(result.seconds, 4),
                          "reasons": {f: result.reasons.get(f, "") for f in files}, "extra": result.extra},
                         default=str))
    elif files:
        print("\n".join(files))
    if not files:  # as grep says nothing on no match, but a retriever's user asked for a ranking: say why it is empty
        print(f"codegrep retrieve: {_why_empty(args, retriever, result)}", file=sys.stderr)
    return 0


def _why_empty(args: argparse.Namespace, retriever, result) -> str:
    """Why a ranking is empty: nothing matched, or (a Go or Terraform repository for a ``.py`` retriever) the
    retriever found no file of the kinds it indexes, which no other issue text would change."""
    config = getattr(retriever, "config", None)
    if result.extra.get("n_indexed", result.extra.get("n_chunks")) != 0:
        scope = (f"; it indexes files whose suffix is in retrievers.{args.retriever}.suffixes, so a script without "
                 "one, such as bin/migrate, is not read: [] indexes every text file"
                 if getattr(config, "suffixes", None) else "")
        return f"no file of {args.repo} that {args.retriever} indexes matched the issue text{scope}"
    kinds = (f"it indexes files whose suffix is in retrievers.{args.retriever}.suffixes; [] indexes every text file"
             if hasattr(config, "suffixes") else "it indexes .py files only")
    return f"{args.retriever} found no file it indexes in {args.repo} ({kinds})"


def _evaluate(args: argparse.Namespace) -> int:
    from codegrep.config import cli_profile
    from codegrep.files import output_file
    from codegrep.retrievers.evaluate import evaluate, read_rows
    from codegrep.retrievers.registry import make_retriever
    from codegrep.retrievers.entrypoints import load_task_source

    from codegrep.files import refuse_overwriting_inputs

    refuse_overwriting_inputs({"--out": args.out}, {"--tasks": args.tasks, "--profile": args.profile})
    if args.repos and not Path(args.repos).expanduser().is_dir():  # as `mine --repos`; else each task tries a clone
        raise ValueError(f"--repos {args.repos}: not a directory (a directory of owner__name git repositories)")
    read_rows(output_file(args.out))  # a directory, or a corrupt resume file, fails before any work
    _check_model(args)
    cfg = cli_profile(args.profile, args.set)
    tasks, resolver = load_task_source(args.tasks, repos_dir=args.repos, split=args.split, limit=args.limit,
                                       seed=int(cfg.get("seed", 0)))
    retriever = make_retriever(args.retriever, cfg, **_overrides(args))
    if getattr(retriever, "episodes_dir", False) is None:  # the agent's transcripts beside the results, as notebook 03's
        retriever.episodes_dir = episodes_dir_for(Path(args.out))
    k = args.k
    if k is None and getattr(retriever, "fixed_size", False):
        k = (cfg.get("retrievers") or {}).get("k")  # the profile's set size, as profile_evaluation uses
    resume: dict[str, int] = {}
    # the profile's worktree pool (env.pool_root, max_worktrees, max_disk_gb), as notebooks 03-06 use it: the class
    # defaults (32 worktrees under the cache) evicted and re-made worktrees on every pass over the 86 commits
    pool = None
    if getattr(retriever, "needs_checkout", True):
        from codegrep.env.pool import default_pool

        pool = default_pool(cfg.get("env"))
    metrics = evaluate(tasks, resolver, retriever, Path(args.out), k=k, workers=args.workers, pool=pool,
                       resume=resume)
    print(json_text({**metrics, "retriever": args.retriever, "k": k, **resume}))
    return 0


def episodes_dir_for(out: Path) -> Path:
    """Where ``codegrep evaluate --retriever agent --out OUT`` saves each episode (one JSON per instance: every turn,
    call and observation): a folder beside ``OUT`` named after it, unless the profile's ``retrievers.agent.episodes_dir``
    names one.

    >>> episodes_dir_for(Path("runs/agent.jsonl")), episodes_dir_for(Path("runs/agent.out"))
    (PosixPath('runs/agent.episodes'), PosixPath('runs/agent.out.episodes'))
    """
    return out.with_name((out.stem if out.suffix == ".jsonl" else out.name) + ".episodes")


def result_labels(paths: list[Path], recorded: list[str]) -> list[str]:
    """One label per results file: the retriever its rows record, or, where several files record one name (two
    agents), each of those files' stem, and where stems collide too, the path as given.

    >>> result_labels([Path("a/bm25.jsonl"), Path("run1/agent.jsonl"), Path("multi_agent.jsonl")],
    ...               ["bm25", "agent", "agent"])
    ['bm25', 'agent', 'multi_agent']
    >>> result_labels([Path("x/agent.jsonl"), Path("y/agent.jsonl")], ["agent", "agent"])
    ['x/agent.jsonl', 'y/agent.jsonl']
    """
    shared = {n for n in recorded if recorded.count(n) > 1}
    labels = [p.stem if n in shared else n for p, n in zip(paths, recorded)]
    return [str(p) if labels.count(label) > 1 else label for p, label in zip(paths, labels)]


def _compare(args: argparse.Namespace) -> int:
    """``codegrep compare A.jsonl B.jsonl ...``: :func:`comparison_table` of ``evaluate`` results files, each named by
    the retriever its rows record (the file's stem where two record one name), on the instances all of them hold."""
    from codegrep.files import refuse_overwriting_inputs
    from codegrep.retrievers.evaluate import comparison_table, read_rows

    if args.out:
        refuse_overwriting_inputs({"--out": args.out}, {f"results file {i}": a for i, a in enumerate(args.results, 1)})
    files: list[tuple[Path, list[dict]]] = []
    for path in map(Path, args.results):
        if not path.is_file():
            raise UserError(f"{path}: no such results file (a JSONL that 'codegrep evaluate --out' wrote)")
        rows = [_with_episode(r, path) for r in read_rows(path).values()]
        if not rows:
            raise UserError(f"{path}: no result rows")
        files.append((path, rows))
    recorded = [names.pop() if len(names := {str(r.get("retriever") or p.stem) for r in rows}) == 1 else p.stem
                for p, rows in files]
    results = dict(zip(result_labels([p for p, _ in files], recorded), (rows for _, rows in files)))
    if len(results) < 2:
        raise UserError("compare needs at least two results files (e.g. an agent's and bm25's on the same tasks)")
    reference = args.reference or next(iter(results))
    if reference not in results:
        raise UserError(f"--reference {reference}: not among the compared results ({', '.join(results)})")
    ids = [{r["instance_id"] for r in rows} for rows in results.values()]
    shared = set.intersection(*ids)
    if not shared:
        raise UserError("the results files share no instance: compare runs of the same tasks")
    agent = next((n for n, rows in results.items() if rows[0].get("retriever") == "agent"), None)
    table = comparison_table(results, reference=reference, agent=agent, n_boot=args.boot, seed=args.seed)
    left_out = {name: len(i - shared) for name, i in zip(results, ids) if i - shared}
    if args.json or args.out:
        from codegrep.rl.policy_rows import ranked_line_numbers

        agents = {n: [r for r in rows if r["instance_id"] in shared] for n, rows in results.items()
                  if rows[0].get("retriever") == "agent"}  # how each agent used its ranked line (saved episodes)
        text = json_text({"reference": reference, "n_instances": len(shared), "instances": sorted(shared),
                          "left_out": left_out, "alpha": 0.05, "n_boot": args.boot,
                          "files": dict(zip(results, args.results)), "rows": table.to_dict("records"),
                          "ranked_line": ranked_line_numbers(agents, tuple(agents))})
        if args.out:
            from codegrep.files import write_atomic

            write_atomic(Path(args.out), text + "\n")
        if args.json:
            print(text)
    if not args.json:
        cols = ["retriever", "n", "p@1", "p@1_lo", "p@1_hi", "p@1_diff", "p@1_diff_lo", "p@1_diff_hi", "acc@5"]
        print(f"paired on {len(shared)} shared instances; diff = retriever - {reference} (95% bootstrap)")
        print(table[cols].round(3).to_string(index=False))
    if left_out:
        print(f"codegrep compare: left out instances not in every file: {left_out}", file=sys.stderr)
    return 0


def _with_episode(row: dict, results: Path) -> dict:
    """``row`` with its agent episode found where ``evaluate`` saves it beside ``results``
    (:func:`episodes_dir_for`) when the recorded path does not exist (results moved or copied with their episodes)."""
    extra = row.get("extra") or {}
    recorded = extra.get("episode_path")
    if isinstance(recorded, str) and not Path(recorded).is_file():
        moved = episodes_dir_for(results) / Path(recorded).name
        if moved.is_file():
            return {**row, "extra": {**extra, "episode_path": str(moved)}}
    return row


def _bench(args: argparse.Namespace) -> int:
    from codegrep.agent.models import SMOLLM2_ALIASES, is_hub_id, resolve_model
    from codegrep.retrievers.bench import run_bench

    model = None if args.model_ref == "none" else args.model_ref
    if model is not None and model.lower() not in SMOLLM2_ALIASES and not is_hub_id(model):
        resolve_model(model)  # a mistyped model directory is one line before the benchmark, not a note in its JSON
    print(json_text(run_bench(n_files=args.files, queries=args.queries, episodes=args.episodes, model=model,
                                real_tasks=None if args.tasks == "none" else args.tasks, real_limit=args.limit)))
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    from codegrep.config import add_set_option

    p.add_argument("--retriever", required=True, choices=NAMES, help="which retriever ranks the files")
    p.add_argument("--model", help="dense: embedding model (minilm, a directory, a hub id); agent: policy model")
    p.add_argument("--endpoint", help="agent: an OpenAI-compatible base URL (e.g. http://localhost:8000/v1)")
    p.add_argument("--k", type=positive_int, help="returned set size for ranking retrievers (evaluate: default the profile's "
                                        "retrievers.k; retrieve: the whole ranking)")
    p.add_argument("--profile", default="smoke", help="profile whose retrievers/agent/env sections apply")
    add_set_option(p, "agent.rank_relevance=1.0 or retrievers.bm25.k1=1.2")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("retrieve", help="rank the files of a repository for an issue text")
    p.add_argument("--repo", required=True, help="repository directory (a live checkout, or a git repo with --commit)")
    p.add_argument("--commit", help="retrieve at this commit (a temporary worktree) instead of the live tree")
    _common(p)
    p.add_argument("--json", action="store_true", help="print files, rounds, tool calls, tokens, seconds as JSON")
    p.add_argument("--issue-file", help="read the issue text from this file")
    p.add_argument("issue", nargs="?", default="", help="issue text ('-' reads stdin)")
    p.set_defaults(func=_retrieve)

    p = subparsers.add_parser("evaluate", help="run a retriever over a task set; prints macro metrics JSON last")
    p.add_argument("--tasks", required=True, help="'default', 'verified' (the 86 shipped real instances), "
                   "'lite-train', a .jsonl/.jsonl.gz/.json/.parquet file, or a HF dataset id")
    p.add_argument("--repos", help="directory of owner__name git repositories")
    _common(p)
    p.add_argument("--limit", type=positive_int, help="evaluate at most this many tasks (seeded sample; default: all)")
    p.add_argument("--split", help="only tasks of this split (train/eval)")
    p.add_argument("--workers", type=positive_int, default=1, help="tasks evaluated in parallel threads (default: 1); the agent instead runs "
                   "its profile's agent.batch_size tasks in lock step, one batched generate per turn")
    p.add_argument("--out", required=True, help="results JSONL (resumed when it exists; one run at a time: a second on the same OUT "
                   "fails at once, naming the first's pid); the agent also saves each "
                   "episode's transcript in OUT's stem + '.episodes/' (e.g. res.episodes/<instance_id>.json)")
    p.set_defaults(func=_evaluate)

    p = subparsers.add_parser("compare", help="paired comparison of evaluate results files on their shared instances")
    p.add_argument("results", nargs="+", help="results JSONL files ('codegrep evaluate --out'), one per retriever")
    p.add_argument("--reference", help="retriever the paired differences are taken against (default: the first file's)")
    p.add_argument("--boot", type=positive_int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="bootstrap seed")
    p.add_argument("--json", action="store_true", help="print the whole table as JSON (every metric, intervals)")
    p.add_argument("--out", help="also write that JSON to this file")
    p.set_defaults(func=_compare)


def _bench_ceiling(args: argparse.Namespace) -> int:
    from codegrep.config import cli_profile
    from codegrep.files import output_file, refuse_overwriting_inputs, write_atomic
    from codegrep.retrievers.scripted import ceiling_table, profile_ceiling

    if args.result:  # refused before the work, not after
        refuse_overwriting_inputs({"--result": args.result}, {"--profile": args.profile})
        output_file(args.result, "--result")
    cfg = cli_profile(args.profile, args.set)
    if cfg["_overrides"]:  # the 'profile' column is the profile with these
        print("profile: " + " ".join(f"--set {k}={v}" for k, v in cfg["_overrides"].items()))
    rows = profile_ceiling(cfg, args.tasks, args.seed)
    print(ceiling_table(rows).to_string())
    if args.result:
        from codegrep.agent.precision import cpu_features
        from codegrep.report import provenance

        doc = {"what": "P@1 scripted strategies reach through the agent's turn function on seeded TRAINING tasks, per "
                       "protocol setting ('profile' = the profile with its overrides); no model, no evaluation instance",
               "profile": cfg.get("profile"), "overrides": cfg["_overrides"], "tasks": args.tasks, "seed": args.seed,
               "rows": rows, "cpu": cpu_features(), **provenance()}
        write_atomic(args.result, json_text(doc) + "\n")
    return 0


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:
    from codegrep.config import add_set_option

    p = bench_subparsers.add_parser("ceiling", help="P@1 scripted strategies reach through the agent's turn function "
                                    "on TRAINING tasks, per protocol setting (chooses the protocol)")
    p.add_argument("--profile", default="smoke", help="profile whose agent/env sections and train split apply")
    p.add_argument("--tasks", type=positive_int, default=40, help="seeded train-split tasks (half real where any)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of that sample")
    add_set_option(p, "agent.max_observation_tokens=512 (the 'profile' column is then the profile with it)")
    p.add_argument("--result", help="also write the rows as JSON here, with the profile, overrides, seed, CPU and "
                   "commit (e.g. docs/results/ceiling_obs512.json)")
    p.set_defaults(func=_bench_ceiling)
    p = bench_subparsers.add_parser("retrieve", help="bm25 index/query speed vs a naive baseline; agent overhead")
    p.add_argument("--files", type=positive_int, default=2000, help="files in the benchmark repository")
    p.add_argument("--queries", type=positive_int, default=50, help="queries timed per index (default: 50)")
    p.add_argument("--episodes", type=positive_int, default=20, help="scripted agent episodes for the overhead measure")
    p.add_argument("--model-ref", default="none",
                   help="model whose real generate time is the denominator of the overhead ratio ('none': skip)")
    p.add_argument("--tasks", default="verified",
                   help="real instances for bm25 vs the plain bm25s baseline (time and accuracy); 'none': skip")
    p.add_argument("--limit", type=positive_int, help="at most this many of those instances (seeded sample)")
    p.set_defaults(func=_bench)
