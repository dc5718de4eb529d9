"""Every `codegrep` command and option explains itself; no reStructuredText markup leaks into help."""
from __future__ import annotations

import argparse
import json

import pytest

from codegrep.cli import build_parser


def _parsers(parser: argparse.ArgumentParser, path: str = "codegrep"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                assert helps.get(name), f"`{path} {name}` has no help line"
                yield from _parsers(sub, f"{path} {name}")


ALL = list(_parsers(build_parser()))


@pytest.mark.parametrize("path,parser", ALL, ids=[p for p, _ in ALL])
def test_every_option_has_help_without_rst(path, parser):
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"`{path}`: {name} has no help"
    text = parser.format_help()
    assert "``" not in text, f"`{path} --help` shows RST double backticks"


def test_reproduce_help_lists_notebooks_and_profiles():
    text = dict(ALL)["codegrep reproduce"].format_help()
    from codegrep.pipeline import NOTEBOOKS

    for name in NOTEBOOKS:
        assert name in text
    for profile in ("ci", "smoke", "paper"):
        assert f"  {profile} " in text


def test_reproduce_help_shows_measured_times():
    from codegrep.pipeline import reproduce_description

    times = {"smoke": {"seconds": {"03_training": 1500, "01_mining": 7}, "total_s": 2640, "machine": "2 idle cores",
                       "measured_at": "2026-12-01", "git_commit": "0123456789", "cold": True}}
    text = reproduce_description(times)
    row = next(line for line in text.splitlines() if line.strip().startswith("03_training"))
    assert "25 min" in row and "7 s" in text
    assert "measured cold: 44 min on 2 idle cores, 2026-12-01, commit 0123456" in text
    assert "ci      plumbing check" in text and "(not measured)" in text


def test_demos_choice_metavar_names_the_scripted_strategies():
    """``bench demos --choice`` spells the strategies in its metavar (the CLI does not import them at start-up):
    the spelling must be the strategies' own."""
    from codegrep.retrievers.scripted import STRATEGIES

    choice = next(a for a in dict(ALL)["codegrep bench demos"]._actions if "--choice" in a.option_strings)
    assert choice.metavar == "{" + ",".join(STRATEGIES) + "}"


def test_agent_benchmarks_run_the_profile_with_set_and_record_it(monkeypatch, capsys, tmp_path):
    """``bench ceiling`` and ``bench demos`` under ``--set``: the profile they run is the one with the override (the
    ceiling's 'profile' column is then that setting, and it says so first), and the demos JSON records it."""
    from codegrep.cli import main
    from codegrep.retrievers import scripted
    from codegrep.rl import curve

    seen = []

    def fake_ceiling(cfg, n, seed):
        seen.append(cfg)
        return [{"setting": "profile", "strategy": "first-listed (6 terms)", "n": 1, "p_at_1": 1.0, "n_real": 1}]

    monkeypatch.setattr(scripted, "profile_ceiling", fake_ceiling)
    assert main(["bench", "ceiling", "--profile", "ci", "--tasks", "1", "--set", "agent.max_observation_tokens=512"]) == 0
    out = capsys.readouterr().out
    assert seen[-1]["agent"]["max_observation_tokens"] == 512
    assert out.splitlines()[0] == "profile: --set agent.max_observation_tokens=512"
    assert main(["bench", "ceiling", "--profile", "ci", "--tasks", "1"]) == 0
    assert seen[-1]["agent"]["max_observation_tokens"] != 512 and "--set" not in capsys.readouterr().out
    result = tmp_path / "ceiling.json"
    assert main(["bench", "ceiling", "--profile", "ci", "--tasks", "1", "--set", "agent.max_turns=2",
                 "--result", str(result)]) == 0
    capsys.readouterr()
    saved = json.loads(result.read_text())
    assert saved["overrides"] == {"agent.max_turns": 2} and saved["rows"][0]["p_at_1"] == 1.0
    assert saved["profile"] == "ci" and saved["tasks"] == 1 and "git_commit" in saved and "cpu" in saved

    monkeypatch.setattr(curve, "demos_curve", lambda cfg, *a, **k: {"profile": cfg["profile"],
                                                                     "min_greps": cfg["agent"]["min_greps"]})
    assert main(["bench", "demos", "--profile", "ci", "--out", str(tmp_path / "d"), "--set", "agent.min_greps=8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"profile": "ci", "min_greps": 8, "overrides": {"agent.min_greps": 8}}
