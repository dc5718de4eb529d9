"""``codegrep mcp`` (the MCP server, or one query with ``--query``) and ``codegrep bench mcp``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codegrep.argtypes import non_negative_int, positive_int
from codegrep.files import json_text

RETRIEVER_CHOICES = ("grep-heuristic", "bm25", "dense", "agent")


def _add_retriever_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retriever", default="grep-heuristic", choices=RETRIEVER_CHOICES,
                   help="what ranks the files (default: grep-heuristic, the fast one)")
    p.add_argument("--model", default=None,
                   help="agent retriever: a model name or path (e.g. smollm2, a trained checkpoint); with "
                        "--endpoint, the model name the endpoint serves")
    p.add_argument("--endpoint", default=None, help="agent retriever: OpenAI-compatible URL serving the policy")
    p.add_argument("--profile", default=None,
                   help="profile (ci|smoke|paper|YAML) configuring the retriever (default: its defaults)")


def register(subparsers) -> None:
    p = subparsers.add_parser("mcp", help="MCP server (stdio) exposing find_relevant_files to coding agents",
                              description="Serve find_relevant_files over stdio for Claude Code, OpenHands, "
                                          "Cursor and any MCP client (see docs/mcp.md).")
    p.add_argument("--repo", type=Path, default=None,
                   help="repository to serve; requests may only name paths inside it (default: none, every "
                        "call must pass an absolute repo_path)")
    _add_retriever_args(p)
    p.add_argument("--max-files-limit", type=int, default=50, help="largest max_files a client may ask for")
    p.add_argument("--query", default=None, help="answer this one query as JSON on stdout and exit (no server)")
    p.add_argument("--max-files", type=int, default=10, help="with --query: how many files to print")
    p.add_argument("--commit", default=None, help="with --query: search this commit instead of the live tree")
    p.set_defaults(func=run_mcp)


def register_bench(bench_subparsers) -> None:
    p = bench_subparsers.add_parser("mcp", help="find_relevant_files latency through a real stdio session "
                                                "on a ~2K-file repository, against in-process baselines")
    p.add_argument("--files", type=positive_int, default=2000, help="files in the generated benchmark repository")
    p.add_argument("--queries", type=positive_int, default=20, help="tool calls to time")
    p.add_argument("--retriever", default="grep-heuristic", choices=RETRIEVER_CHOICES, help="retriever behind the tool (default: grep-heuristic)")
    p.add_argument("--repo", type=Path, default=None,
                   help="benchmark this repository instead of the generated one (queries still come from it)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the generated benchmark repository and queries")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    p.set_defaults(func=run_bench)


def _config(args: argparse.Namespace):
    from codegrep.serve.mcp_server import ServeConfig

    if args.retriever != "agent" and (args.model or args.endpoint):
        raise ValueError(f"--model/--endpoint only apply to --retriever agent (got --retriever {args.retriever})")
    if args.repo is not None and not args.repo.expanduser().is_dir():
        raise FileNotFoundError(f"--repo {args.repo}: no such directory")
    if args.max_files_limit < 1:
        raise ValueError(f"--max-files-limit must be >= 1, got {args.max_files_limit}")
    return ServeConfig(repo=args.repo, retriever=args.retriever, model=args.model, endpoint=args.endpoint,
                       max_files_limit=args.max_files_limit, profile=getattr(args, "profile", None))


def run_mcp(args: argparse.Namespace) -> int:
    from codegrep.serve.mcp_server import answer_once, serve_stdio

    config = _config(args)
    if args.query is None and args.commit is not None:  # the server would search the live tree, not this commit
        raise ValueError(f"--commit {args.commit}: applies only with --query (one answer); the server searches each "
                         "request's live tree and would ignore it")
    if args.query is not None:
        if config.repo is None:
            config.repo = Path.cwd()
        print(answer_once(config, args.query, max_files=args.max_files, commit=args.commit))
        return 0
    if sys.stdin.isatty():
        print("codegrep mcp: serving MCP over stdio; an MCP client starts this command (see docs/mcp.md). "
              "Ctrl-C to stop.", file=sys.stderr)
    serve_stdio(config)
    return 0


def run_bench(args: argparse.Namespace) -> int:
    from codegrep.files import output_file
    from codegrep.serve.bench import bench_mcp

    if args.out:
        output_file(args.out, "--out")  # before the benchmark, not after
    result = bench_mcp(n_files=args.files, n_queries=args.queries, retriever=args.retriever,
                       repo=args.repo, seed=args.seed)
    text = json_text(result, indent=2)
    if args.out:
        from codegrep.files import write_atomic

        write_atomic(args.out, text + "\n")
    print(text)
    return 0
