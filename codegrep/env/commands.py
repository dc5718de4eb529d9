"""CLI: ``codegrep tool`` (run calls exactly as the agent would) and ``codegrep bench env``."""
from __future__ import annotations

import argparse
import json
import sys
from codegrep.argtypes import positive_float, positive_int
from codegrep.files import json_text


def _parse_calls(text: str) -> list:
    from codegrep.env.tools import ToolCall

    from codegrep.files import json_loads

    try:
        data = json_loads(text, "CALLS")
    except json.JSONDecodeError as exc:
        raise ValueError(f"CALLS is not valid JSON ({exc}); e.g. '{{\"name\": \"grep\", \"arguments\": "
                         f"{{\"pattern\": \"def main\"}}}}'") from None
    items = data if isinstance(data, list) else [data]
    if not items:
        raise ValueError("CALLS is an empty list: give at least one call, e.g. '{\"name\": \"grep\", "
                         "\"arguments\": {\"pattern\": \"def main\"}}'")
    calls = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise ValueError(f"CALLS item {i} must be an object with 'name' and 'arguments'")
        calls.append(ToolCall(str(item["name"]), item.get("arguments") or {}))
    return calls


def _repo_and_commit(args: argparse.Namespace) -> tuple:
    from pathlib import Path

    if args.repo:
        from codegrep.data.repos import has_commit

        if not Path(args.repo).is_dir():
            raise FileNotFoundError(f"--repo {args.repo}: not a directory")
        if not has_commit(args.repo, args.commit or "HEAD"):  # one line naming the argument, not git's command line
            raise ValueError(f"--commit {args.commit}: not a commit of the git repository {args.repo}" if args.commit
                             else f"--repo {args.repo}: not a git repository with a commit (HEAD)")
        return Path(args.repo), args.commit or "HEAD"
    from codegrep.env.bench import default_bench_repo

    git_dir, commit = default_bench_repo()
    print(f"codegrep: no --repo given; using the largest default-set repository {git_dir}", file=sys.stderr)
    if args.commit:  # git's command line and its empty reason were the message
        from codegrep.data.repos import has_commit

        if not has_commit(git_dir, args.commit):
            raise ValueError(f"--commit {args.commit}: not a commit of the default-set repository {git_dir} (no --repo "
                             "given)")
    return git_dir, args.commit or commit


def _tool(args: argparse.Namespace) -> int:
    from codegrep.env.tools import RepoToolEnvironment, ToolConfig, open_snapshot

    calls = _parse_calls(args.calls)
    config = ToolConfig(timeout_s=args.timeout)
    if args.dir:
        from pathlib import Path

        given = [flag for flag, value in (("--repo", args.repo), ("--commit", args.commit)) if value]
        if given:  # a plain directory has no commits: the call would silently read the live files instead
            raise ValueError(f"--dir serves a plain directory as it is; {' and '.join(given)} do not apply to it "
                             "(use --repo [--commit] for a git snapshot)")
        if not Path(args.dir).is_dir():
            raise FileNotFoundError(f"--dir {args.dir}: not a directory")
        with RepoToolEnvironment(args.dir, config) as env:
            results = env.run_turn(calls)
    else:
        git_dir, commit = _repo_and_commit(args)
        with open_snapshot(git_dir, commit, args.mode, config=config) as env:
            results = env.run_turn(calls)
    if args.json:
        keys = ("name", "ok", "output", "error", "truncated", "latency_ms")
        print(json_text([{k: r.to_dict()[k] for k in keys} for r in results], indent=2))
    else:
        for i, r in enumerate(results):
            if len(results) > 1:
                print(f"=== [{i}] {r.name} ===")
            print(r.text())
    return _failed_calls(results)


def _failed_calls(results: list) -> int:
    """The exit status of ``codegrep tool``: 0 when every call was answered (``No matches found.`` is an answer),
    else one stderr line naming the failed calls and 2, as ripgrep exits 2 on an error; stdout keeps the calls'
    ``ERROR: ...`` text as the agent sees it.

    >>> from codegrep.env.contract import ToolResult
    >>> _failed_calls([ToolResult("grep", True, "No matches found.")])
    0
    """
    failed = [(i, r) for i, r in enumerate(results) if not r.ok]
    if not failed:
        return 0
    said = "; ".join(f"[{i}] {r.name}: {' '.join(r.error.split())}" for i, r in failed)
    if len(said) > 300:
        said = said[:300] + " ..."
    print(f"codegrep tool: error: {len(failed)} of {len(results)} call{'s' if len(results) > 1 else ''} failed: "
          f"{said}", file=sys.stderr)
    return 2


def _bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from codegrep.env.bench import bench_env, package_repo

    if args.package:
        from codegrep.config import cache_dir

        git_dir, commit = package_repo(cache_dir() / "bench" / f"{args.package}.git", args.package)
    else:
        git_dir, commit = _repo_and_commit(args)
    result = bench_env(Path(git_dir), commit, rollouts=args.rollouts, group=args.group, turns=args.turns,
                       calls=args.calls, concurrency=args.concurrency, samples=args.samples,
                       modes=args.modes)
    print(json_text(result, indent=2))
    return 0 if result["leaked_worktrees"] == 0 else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("tool", help="run grep/glob/read calls on a repository exactly as the agent sees them",
                              description="CALLS: one JSON call {\"name\": \"grep\", \"arguments\": {\"pattern\": "
                                          "\"x\"}} or a JSON list of calls run as one parallel turn. Exit status: 0 "
                                          "when every call was answered ('No matches found.' included), 2 when a call "
                                          "failed (its 'ERROR: ...' is printed as the agent sees it, and one line on "
                                          "stderr names it) or an argument is bad.")
    p.add_argument("calls", metavar="CALLS", help="a JSON list of tool calls, e.g. '[{\"name\": \"grep\", \"arguments\": {\"pattern\": \"def main\"}}]'")
    p.add_argument("--repo", help="git dir (bare or not); default: the largest default-set repository")
    p.add_argument("--commit", help="commit to serve (default: HEAD, or the default-set task commit)")
    p.add_argument("--dir", help="serve a plain directory instead (e.g. your live checkout)")
    p.add_argument("--mode", choices=("objects", "worktree"), default="objects",
                   help="objects: checkout-free (default); worktree: a pooled checkout (answers are identical)")
    p.add_argument("--timeout", type=positive_float, default=10.0, help="per-call timeout in seconds (> 0)")
    p.add_argument("--json", action="store_true", help="print {name, ok, output, error, truncated, latency_ms} list")
    p.set_defaults(func=_tool)


def _modes(text: str) -> tuple[str, ...]:
    """``--modes``: comma-separated tool modes, each ``worktree`` or ``objects``.

    >>> _modes("objects, worktree")
    ('objects', 'worktree')
    """
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    if not modes or set(modes) - {"worktree", "objects"}:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated tool modes from worktree, objects")
    return modes


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:
    p = bench_subparsers.add_parser("env", help="environment acquisition and tool latency vs clone/worktree baselines")
    p.add_argument("--repo", help="git dir; default: the largest default-set repository")
    p.add_argument("--commit", help="commit (default: HEAD or the default-set task commit)")
    p.add_argument("--package", help="benchmark a git repo built from this installed package (e.g. sympy: ~1.6K files)")
    p.add_argument("--rollouts", type=positive_int, default=64, help="rollouts per method (default: 64)")
    p.add_argument("--group", type=positive_int, default=8, help="rollouts per task (GRPO group) sharing one checkout")
    p.add_argument("--turns", type=positive_int, default=4, help="turns per rollout (default: 4)")
    p.add_argument("--calls", type=positive_int, default=8, help="parallel calls per turn")
    p.add_argument("--concurrency", type=positive_int, default=None, help="rollouts in flight (default: all)")
    p.add_argument("--samples", type=positive_int, default=5, help="timed acquisitions per method")
    p.add_argument("--modes", type=_modes, default=("worktree", "objects"),
                   help="tool modes to run rollouts in, comma-separated (default: worktree,objects)")
    p.set_defaults(func=_bench)
