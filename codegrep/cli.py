"""The codegrep command: thin wrappers over the library.

Each area contributes its sub-commands through a ``register(subparsers)`` function in its
``commands`` module (and ``register_bench(bench_subparsers)`` for ``codegrep bench ...``), so this
file stays a dispatcher. Heavy imports happen inside the command functions, keeping ``--help`` fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from typing import NoReturn, Sequence

from codegrep.errors import user_message

COMMAND_MODULES = (
    "codegrep.data.commands",        # tasks default|stats
    "codegrep.env.commands",         # tool; bench env
    "codegrep.mining.commands",      # mine; bench mine
    "codegrep.retrievers.commands",  # retrieve, evaluate, compare; bench retrieve
    "codegrep.rl.commands",          # train, export
    "codegrep.downstream.commands",  # downstream
    "codegrep.serve.commands",       # mcp; bench mcp
    "codegrep.pipeline",             # reproduce
    "codegrep.report",               # report
    "codegrep.cache",                # cache info|prune
)


class CliParser(argparse.ArgumentParser):
    """argparse whose refusals are one line on stderr, exit 2, with no usage dump before it; every sub-command
    parser inherits it (``add_subparsers`` builds sub-parsers of the parent's class).

    >>> import contextlib, io
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     try:
    ...         CliParser(prog="codegrep x").parse_args(["--nope"])
    ...     except SystemExit as exc:
    ...         code = exc.code
    >>> code, err.getvalue()
    (2, "codegrep x: error: unrecognized arguments: --nope (see 'codegrep x --help')\\n")
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """Arguments no parser knows are refused by the sub-command that was chosen (argparse leaves them to the
        top parser, whose message would name ``codegrep`` and point at the wrong ``--help``); a long list is cut.

        >>> import contextlib, io
        >>> top = CliParser(prog="codegrep")
        >>> sub = top.add_subparsers(dest="command").add_parser("tool")
        >>> _ = sub.add_argument("--repo")
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     try:
        ...         top.parse_args(["tool", "--repo", ".", "--pattern", "x"])
        ...     except SystemExit:
        ...         pass
        >>> err.getvalue()
        "codegrep tool: error: unrecognized arguments: --pattern x (see 'codegrep tool --help')\\n"
        """
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            shown = " ".join(extras)
            if len(shown) > 160:
                shown = f"{shown[:160]}... ({len(extras)} arguments)"
            self.chosen(parsed).error(f"unrecognized arguments: {shown}")
        return parsed

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> object:
        """A value given on the command line must not be empty (nor only spaces): ``--name ""`` and ``--out ""``
        fell back silently to the default run name or output (``args.name or ...``), ``--artifacts ""`` became
        ``.``. Checked here, before any ``type``, for every option and positional of every sub-command; a default
        (``issue`` of ``retrieve``: ``""`` when no text is given) is not a value given, and is not checked.

        >>> import contextlib, io
        >>> parser = CliParser(prog="codegrep train")
        >>> _ = parser.add_argument("--name")
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     try:
        ...         parser.parse_args(["--name="])
        ...     except SystemExit:
        ...         pass
        >>> err.getvalue()
        "codegrep train: error: argument --name: must not be empty, got '' (see 'codegrep train --help')\\n"
        """
        if action.nargs not in (argparse.PARSER, argparse.REMAINDER):  # a sub-command's values: its parser checks
            blank = next((s for s in arg_strings if not s.strip()), None)
            if blank is not None:
                raise argparse.ArgumentError(action, f"must not be empty, got {blank!r}")
        return super()._get_values(action, arg_strings)

    def chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest sub-command parser that ``parsed`` went through (this parser when none)."""
        parser: argparse.ArgumentParser = self
        while True:
            subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            name = getattr(parsed, subs.dest, None) if subs else None
            if subs is None or name not in subs.choices:
                return parser
            parser = subs.choices[name]


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="codegrep", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    bench = sub.add_parser("bench", help="benchmarks that print ratios against baselines measured in the same run")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)  # a command module that fails to import is a bug: never skip it
        if not hasattr(module, "register") and not hasattr(module, "register_bench"):
            raise RuntimeError(f"{name} registers no command (no register/register_bench function)")
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
    except Exception as exc:  # the one error boundary: a user mistake is one line, a bug keeps its traceback
        message = user_message(exc)
        if message is not None:
            print(f"codegrep {args.command}: error: {message}", file=sys.stderr)
            return 2
        traceback.print_exc()
        print(f"codegrep {args.command}: internal error: {type(exc).__name__}: {exc}\n"
              "This is a bug in codegrep, not a mistake in your input: please report it with the traceback above.",
              file=sys.stderr)
        return 1
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
