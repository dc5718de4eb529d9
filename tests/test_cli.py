"""Smoke tests of the ``codegrep`` command line: every registered (sub-)command's ``--help`` parses."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from codegrep.cli import build_parser


def subcommand_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path (``("bench", "mcp")``, ...) reachable through sub-parsers, depth first."""
    paths = []
    for action in parser._actions:  # argparse exposes sub-parsers only through this private list
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.append(prefix + (name,))
                paths.extend(subcommand_paths(sub, prefix + (name,)))
    return paths


ALL_PATHS = subcommand_paths(build_parser())


def test_top_level_help_runs_as_a_program():
    done = subprocess.run([sys.executable, "-m", "codegrep", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: codegrep" in done.stdout
    for (name,) in [p for p in ALL_PATHS if len(p) == 1]:
        assert name in done.stdout


def test_known_commands_are_registered():
    assert ("bench",) in ALL_PATHS and ("mcp",) in ALL_PATHS and ("bench", "mcp") in ALL_PATHS


@pytest.mark.parametrize("path", ALL_PATHS, ids=[" ".join(p) for p in ALL_PATHS])
def test_every_subcommand_help_parses(path: tuple[str, ...], capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*path, "--help"])
    assert exit_info.value.code == 0
    assert f"usage: codegrep {' '.join(path)}" in capsys.readouterr().out.replace("\n", " ").replace("  ", " ")


def test_leaf_commands_have_a_function():
    parser = build_parser()
    for path in ALL_PATHS:
        parent = parser
        for name in path:
            sub = next(a for a in parent._actions if isinstance(a, argparse._SubParsersAction))
            parent = sub.choices[name]
        has_children = any(isinstance(a, argparse._SubParsersAction) for a in parent._actions)
        assert has_children or callable(parent.get_default("func")), f"codegrep {' '.join(path)} has no func"


def test_a_command_module_that_fails_to_import_fails_the_cli(monkeypatch):
    """A broken area must not silently vanish from the command line."""
    from codegrep import cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", cli.COMMAND_MODULES + ("codegrep.no_such_commands",))
    with pytest.raises(ModuleNotFoundError, match="codegrep.no_such_commands"):
        cli.build_parser()


def test_set_typo_fails_with_the_key_named():
    """`--set` keys are checked against the profile and its config dataclasses: exit 2, one line, key named."""
    done = subprocess.run([sys.executable, "-m", "codegrep", "reproduce", "--profile", "ci", "--only", "01",
                           "--set", "agent.max_turnz=3"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "unknown key 'max_turnz'" in done.stderr and "did you mean 'max_turns'" in done.stderr
    assert "Traceback" not in done.stderr
