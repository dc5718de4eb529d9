"""Execute every notebook on the `ci` profile through the real `codegrep reproduce` entry point and
check the numbers they record (recommenders-style). Also checks the second run is served from cache."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codegrep.pipeline import NOTEBOOKS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "codegrep", "reproduce", "--profile", "ci", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"reproduce failed:\n{proc.stderr[-6000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    return out, summary, json.loads(again.stdout.strip().splitlines()[-1])


def headline(out: Path, name: str) -> dict:
    return json.loads((out / "artifacts" / "headlines" / f"{name}.json").read_text())["numbers"]


def test_every_notebook_ran_and_second_run_is_cached(ci_run):
    out, first, second = ci_run
    assert first["ran"] == list(NOTEBOOKS)
    assert second["cached"] == list(NOTEBOOKS) and not second["ran"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_saved_figures_and_finite_headlines(ci_run, name):
    out = ci_run[0]
    numbers = headline(out, name)
    assert numbers, f"{name} recorded no headline numbers"
    for key, value in numbers.items():
        if isinstance(value, float):
            assert math.isfinite(value), f"{name}: {key} is not finite"
    figs = sorted((out / "figures").glob(f"{name[:2]}_*.png"))
    assert figs, f"{name} saved no figure"
    for png in figs:
        assert png.with_suffix(".svg").is_file(), f"{png.name} has no SVG twin"


def test_report_lists_every_claim_with_this_runs_value(ci_run):
    out = ci_run[0]
    report = (out / "artifacts" / "report.md").read_text()
    assert "| claim | paper (reference) | this run |" in report
    assert "not run" not in report, "every notebook's claim rows must be filled"
    assert (out / "artifacts" / "report.html").is_file()
    run = json.loads((out / "artifacts" / "run.json").read_text())
    assert run["profile"] == "ci" and run["git_commit"]
