"""Smoke tests of the ``codegrep`` command line: every registered (sub-)command's ``--help`` parses, and no
argument takes an empty value."""
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


def _value_arguments() -> list[tuple[tuple[str, ...], str, str]]:
    """(command path, argv word, name in the message) of every option that takes a value, and of each leaf
    command's first positional (an empty word on the command line lands there)."""
    parser, found = build_parser(), []
    for path in ALL_PATHS:
        leaf = parser
        for name in path:
            leaf = next(a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        actions = [a for a in leaf._actions if a.nargs != 0 and not isinstance(a, argparse._SubParsersAction)]
        found += [(path, a.option_strings[-1], "/".join(a.option_strings)) for a in actions if a.option_strings]
        positionals = [a for a in actions if not a.option_strings]
        if positionals and not any(isinstance(a, argparse._SubParsersAction) for a in leaf._actions):
            found.append((path, "", positionals[0].metavar or positionals[0].dest))
    return found


VALUE_ARGUMENTS = _value_arguments()


@pytest.mark.parametrize("path,word,name", VALUE_ARGUMENTS,
                         ids=[" ".join((*p, w or n)) for p, w, n in VALUE_ARGUMENTS])
def test_an_empty_value_is_refused_naming_the_argument(path: tuple[str, ...], word: str, name: str, capsys):
    """``--name ""``, ``--out ""`` ... fell back silently to the default (``args.name or ...``) and a ``Path`` option
    read ``""`` as ``.``: every value given on the command line, option or positional, must be non-empty."""
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*path, *([word] if word else []), ""])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err == f"codegrep {' '.join(path)}: error: argument {name}: must not be empty, got '' " \
                  f"(see 'codegrep {' '.join(path)} --help')\n"


def test_the_empty_value_rule_leaves_defaults_and_dashes_alone():
    """A positional whose default is ``""`` (``retrieve``'s issue, read from --issue-file) is not refused when left
    out; ``--`` before a value, and a value of spaces inside text, pass."""
    parser = build_parser()
    assert parser.parse_args(["retrieve", "--repo", ".", "--retriever", "bm25"]).issue == ""
    assert parser.parse_args(["retrieve", "--repo", ".", "--retriever", "bm25", "--", "-x fails"]).issue == "-x fails"
    assert parser.parse_args(["train", "--name", " a b "]).name == " a b "
