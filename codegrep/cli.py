"""The ``codegrep`` command: thin wrappers over the library.

Each area contributes its sub-commands through a ``register(subparsers)`` function in its
``commands`` module (and ``register_bench(bench_subparsers)`` for ``codegrep bench ...``), so this
file stays a dispatcher. Heavy imports happen inside the command functions, keeping ``--help`` fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "codegrep.data.commands",        # tasks default|stats
    "codegrep.env.commands",         # tool; bench env
    "codegrep.mining.commands",      # mine; bench mine
    "codegrep.retrievers.commands",  # retrieve, evaluate; bench retrieve
    "codegrep.rl.commands",          # train, export
    "codegrep.downstream.commands",  # downstream
    "codegrep.serve.commands",       # mcp; bench mcp
    "codegrep.pipeline",             # reproduce
    "codegrep.report",               # report
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codegrep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="benchmarks that print ratios against baselines measured in the same run")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that area is not built yet
                continue
            raise
        if hasattr(module, "register"):
            module.register(sub)
        if hasattr(module, "register_bench"):
            module.register_bench(bench_sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        # Library errors carry the file/line/argument that caused them; show that, not a traceback.
        print(f"codegrep {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
