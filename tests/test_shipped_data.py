"""Shipped data is part of the product: when any of it is missing the suite fails (never skips)."""
from __future__ import annotations

from pathlib import Path

import pytest

import codegrep
from codegrep.data import shipped

RESOURCES = Path(codegrep.__file__).resolve().parent / "resources"


def test_package_resources_are_present():
    assert (RESOURCES / "trajectories" / "swebench_verified.tasks.jsonl").is_file(), RESOURCES
    assert sorted((RESOURCES / "trajectories" / "mini-swe-agent").glob("*.traj.json.gz")), \
        "shipped package data missing: embedded mini-swe-agent runs"
    assert sorted((RESOURCES / "trajectories" / "format-samples").iterdir()), "shipped format samples missing"


@pytest.mark.parametrize("path", [shipped.verified_rows_path, shipped.lite_rows_path], ids=["verified", "lite"])
def test_project_data_rows_are_present(path):
    assert path().is_file() and path().stat().st_size > 0, f"shipped data missing: {path()}"


def test_project_trajectories_and_snapshots_are_present():
    for folder in shipped.trajectory_dirs():
        assert sorted(folder.glob("*.traj.json.gz")), f"shipped data missing: no runs in {folder}"
    assert shipped.snapshot_archives(), f"shipped data missing: no *.git.tar under {shipped.data_root()}"
